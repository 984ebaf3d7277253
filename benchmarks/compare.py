"""`fedeval compare`: coverage of the difference's interval, the gate's error rates at the
population the planner calls sufficient, coverage on other data shapes (`--only hard`);
`--shapes`, the release-shape measurement that chose two 1-D releases over a joint one.

    .venv/bin/python benchmarks/compare.py                      # every table (≈ 30 min, 2 cores)
    .venv/bin/python benchmarks/compare.py --only coverage --releases 200   # a quick look
    .venv/bin/python benchmarks/compare.py --only power --models distdp
    .venv/bin/python benchmarks/compare.py --only hard --hard-releases 200
    .venv/bin/python benchmarks/compare.py --shapes             # 1-D pair against joint 2-D

Coverage: paired scores of correlated models (`tests/paired.py`: 2% positives; a candidate worse,
equal, better, and worse on tied scores, one data set each, used in turn), fresh noise per
release; the interval must hold the exact candidate − baseline. Beside it, how often the
baseline's own interval holds its exact value (the difference's interval inherits its
conservatism where that is above 95%). Federated releases have no noise: their coverage is over
fresh data per release, and P/R/A at declared thresholds are exact (interval of width 0).

Power: for each model (`POWER`: distdp ε = 1, localdp ε = 5, federated), the gate
``--fail-if-worse auc=m`` at the population `fedeval.api.compare_plan.detect` calls sufficient
for ≤ 5% false failures (its binormal reference population at the data's positive share and
AUC): how often it fails a candidate of exactly the same AUC (false failures, at most 5%), and
one exactly 2m worse (caught, at least 80%).

Hard: the same coverage, auto height, on paired data of other shapes (`HARD`: a 0.01 grid, tree
scores, scores squeezed into [0.45, 0.55], 0.2% positives, 2,000 rows), distdp ε = 1 and localdp
ε = 8.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from paired import KINDS, auc_drop, paired_scores, same_auc, scenario

from fedeval.api.compare import compare
from fedeval.api.compare_plan import detect

METRICS = ("auc", "ap", "precision@0.5", "recall@0.5", "accuracy@0.5")
SETTINGS = {
    "federated": (None, 5_000),
    "distdp": (1.0, 20_000),
    "localdp": (8.0, 200_000),
}
"""ε of the pair and rows per data set: localdp needs many more rows for an interval narrower
than [−1, 1] (its ε is split: OUE's variance per count grows 14× from ε = 5 to 2.5)."""


def coverage(model: str, releases: int, seed: int, height: int | str = "auto") -> list[str]:
    eps, n = SETTINGS[model]
    rng = np.random.default_rng(seed)
    fixed = model != "federated"
    data = [scenario(k, n, rng) for k in KINDS] if fixed else []
    truth = []
    if fixed:
        for d in data:
            c = compare(*d, model="federated", thresholds=[0.5], ci_draws=0)
            truth.append({x.metric: (x.difference.exact, x.baseline.exact) for x in c.differences})
    hits = {m: [] for m in METRICS}
    own = {m: [] for m in METRICS}
    width = {m: [] for m in METRICS}
    start = time.perf_counter()
    for r in range(releases):
        k = r % len(KINDS)
        d = data[k] if fixed else scenario(KINDS[k], n, rng)
        c = compare(
            *d,
            model=model,
            epsilon=eps,
            thresholds=[0.5],
            exact=not fixed,
            seed=int(rng.integers(1 << 62)),
            ci_draws=100,
            height=height,
        )
        for m in METRICS:
            x = c[m]
            diff, base = truth[k][m] if fixed else (x.difference.exact, x.baseline.exact)
            if diff is None or not math.isfinite(diff):
                continue
            lo, hi = x.difference.ci95
            hits[m].append(lo <= diff <= hi)
            width[m].append(hi - lo)
            blo, bhi = x.baseline.ci95
            own[m].append(blo <= base <= bhi)
    took = time.perf_counter() - start
    rows = []
    for m in METRICS:
        rows.append(
            f"{model:9s} {'—' if eps is None else f'{eps:g}':>4s} {n:>8,d} {m:14s} "
            f"{len(hits[m]):>6d} {np.mean(hits[m]):>9.3f} {np.mean(own[m]):>9.3f} "
            f"{np.mean(width[m]):>9.4f}"
        )
    rows.append(f"{'':9s} ({took:.0f} s)")
    return rows


POWER = {
    "federated": (None, 0.01),
    "distdp": (1.0, 0.05),
    "localdp": (5.0, 0.1),
}
"""ε of the pair and the gate's AUC margin m of each model's power rows: a margin the planner
reaches at a population one can simulate here (localdp at its default ε = 5 needs 16 million
rows for m = 0.05, 3.6 million for m = 0.1)."""


def power(models: list[str], releases: int, seed: int, margin: float | None = None) -> list[str]:
    """The gate ``--fail-if-worse auc=m`` at the population `detect` calls sufficient for ≤ 5%
    false failures (binormal reference, 2% positives, AUC 0.92: the paired data's): how often it
    fails a candidate of exactly the baseline's AUC, and one exactly 2m worse. Under noise one
    population, fresh noise per release; federated (no noise) fresh data per release."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        eps, m = POWER[model]
        m = margin if margin is not None else m
        plan = detect(f"auc={m}", model=model, epsilon=eps, positives_fraction=0.02, auc=0.92)
        n = plan.rows_5_percent_false_failures
        assert n is not None
        fails = {"equal": 0, "worse": 0}
        fixed = model != "federated"
        if fixed:
            y, base, _ = paired_scores(n, rng)
            pairs = {"equal": same_auc(base), "worse": auc_drop(y, base, 2 * m)}
        start = time.perf_counter()
        for name in fails:
            for _ in range(releases):
                if not fixed:
                    y, base, _ = paired_scores(n, rng)
                    while not 0 < y.sum() < n:  # an AUC needs both classes
                        y, base, _ = paired_scores(n, rng)
                cand = (
                    pairs[name]
                    if fixed
                    else (same_auc(base) if name == "equal" else auc_drop(y, base, 2 * m))
                )
                c = compare(
                    y,
                    base,
                    cand,
                    model=model,
                    epsilon=eps,
                    exact=False,
                    ci_draws=100,
                    seed=int(rng.integers(1 << 62)),
                )
                fails[name] += c["auc"].difference.ci95[0] < -m
        took = time.perf_counter() - start
        rows.append(
            f"{model:9s} {'—' if eps is None else f'{eps:g}':>4s} auc={m:<7g} "
            f"{plan.rows_80_power:>10,d} {n:>10,d} {releases:>8d} "
            f"{fails['equal'] / releases:>14.3f} {fails['worse'] / releases:>10.3f}  ({took:.0f} s)"
        )
    return rows


HARD = ("grid", "tree", "squeezed", "rare", "small")
"""Paired data of other shapes (`hard_scenario`): scores on a 0.01 grid, tree-model scores (a
few dozen distinct values per model), scores squeezed into [0.45, 0.55], 0.2% positives, and
2,000 rows."""


def hard_scenario(family: str, shift: float, rng: np.random.Generator):
    """Labels, baseline and candidate scores of one `HARD` family (`paired_scores` transformed;
    the candidate worse, equal or better by `shift` in logit separation)."""
    n = {"rare": 200_000, "small": 2_000}.get(family, 20_000)
    y, b, c = paired_scores(n, rng, shift=shift, positives=0.002 if family == "rare" else 0.02)
    if family == "grid":
        b, c = np.round(b, 2), np.round(c, 2)
    elif family == "squeezed":
        b, c = 0.45 + 0.1 * b, 0.45 + 0.1 * c
    elif family == "tree":
        # Each model's own partition (30-50 leaves at random quantiles of its scores), every
        # example scored by its leaf's mean score, as a tree's leaves are.
        out = []
        for s in (b, c):
            edges = np.quantile(s, np.sort(rng.random(int(rng.integers(30, 51)))))
            leaf = np.searchsorted(edges, s)
            means = np.bincount(leaf, weights=s) / np.maximum(np.bincount(leaf), 1)
            out.append(means[leaf])
        b, c = out
    return y, b, c


def hard(models: list[str], releases: int, seed: int) -> list[str]:
    """Coverage of the difference's interval on the `HARD` families, auto height: three data
    sets per family (a worse, an equal and a better candidate, in turn), fresh noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for family in HARD:
        data = [hard_scenario(family, shift, rng) for shift in (-0.25, 0.0, 0.25)]
        truth = []
        for d in data:
            c = compare(*d, model="federated", thresholds=[0.5], ci_draws=0)
            truth.append({x.metric: x.difference.exact for x in c.differences})
        for model in models:
            eps = SETTINGS[model][0]
            hits: dict[str, list[bool]] = {m: [] for m in METRICS}
            start = time.perf_counter()
            for r in range(releases):
                k = r % len(data)
                c = compare(
                    *data[k],
                    model=model,
                    epsilon=eps,
                    thresholds=[0.5],
                    exact=False,
                    seed=int(rng.integers(1 << 62)),
                    ci_draws=100,
                )
                for m in METRICS:
                    t = truth[k][m]
                    if t is None or not math.isfinite(t):
                        continue
                    lo, hi = c[m].difference.ci95
                    hits[m].append(lo <= t <= hi)
            took = time.perf_counter() - start
            cov = " ".join(f"{np.mean(hits[m]) if hits[m] else math.nan:>8.3f}" for m in METRICS)
            rows.append(
                f"{family:9s} {len(data[0][0]):>8,d} {model:9s} {eps or 0:>4g} "
                f"{c.baseline.config.height:>3d} {releases:>6d} {cov}  ({took:.0f} s)"
            )
    return rows


def shapes(releases: int, seed: int) -> list[str]:
    """RMSE of candidate − baseline (AUC, recall@0.5) over releases of fresh data, 100,000
    rows, a candidate worse by 0.25 in logit separation: two 1-D releases at ε/2 (fedeval's
    evaluate, auto parameters) against a joint L×L histogram per class at ε (Δ = 1)."""
    from sklearn.metrics import roc_auc_score

    from fedeval.estimate.metrics import auc_from_buckets
    from fedeval.privacy.noise import discrete_laplace, oue_sum

    def joint(y, sb, sc, size, model, eps, rng):
        ib = np.minimum((sb * size).astype(int), size - 1)
        ic = np.minimum((sc * size).astype(int), size - 1)
        counts = np.bincount(
            y.astype(int) * size * size + ib * size + ic, minlength=2 * size * size
        ).astype(float)
        if model == "distdp":
            counts = counts + discrete_laplace(math.exp(-eps), counts.shape, rng)
        elif model == "localdp":
            q = 1 / (math.exp(eps) + 1)
            counts = (oue_sum(counts.astype(np.int64), len(y), eps, rng) - len(y) * q) / (0.5 - q)
        j = counts.reshape(2, size, size)
        mb, mc = j.sum(axis=2), j.sum(axis=1)
        h = size // 2
        rec = (j[1, :h, h:].sum() - j[1, h:, :h].sum()) / j[1].sum()
        return auc_from_buckets(mc[0], mc[1]) - auc_from_buckets(mb[0], mb[1]), rec

    rng = np.random.default_rng(seed)
    out = []
    for model, eps in (("federated", None), ("distdp", 1.0), ("localdp", 5.0)):
        errs: dict[str, list[tuple[float, float]]] = {}
        for _ in range(releases):
            y, sb, sc = paired_scores(100_000, rng, shift=-0.25)
            ta = roc_auc_score(y, sc) - roc_auc_score(y, sb)
            tr = (((sc >= 0.5) & y).sum() - ((sb >= 0.5) & y).sum()) / y.sum()
            c = compare(
                y, sb, sc, model=model, epsilon=eps, thresholds=[0.5], ci_draws=0, exact=False
            )
            key = "1-D pair"
            errs.setdefault(key, []).append(
                (c["auc"].difference.estimate - ta, c["recall@0.5"].difference.estimate - tr)
            )
            for size in (2, 8, 16, 32, 64):
                da, dr = joint(y, sb, sc, size, model, eps, rng)
                errs.setdefault(f"joint L={size}", []).append((da - ta, dr - tr))
        for key, e in errs.items():
            a = np.asarray(e)
            rmse = np.sqrt(np.mean(np.square(a), axis=0))
            out.append(
                f"{model:9s} {'—' if eps is None else f'{eps:g}':>4s} {key:12s} "
                f"{rmse[0]:>12.5f} {rmse[1]:>14.5f}"
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=1000, help="releases per coverage row")
    ap.add_argument("--power-releases", type=int, default=200, help="runs per gate rate")
    ap.add_argument("--margin", type=float, help="one AUC margin for every model's power row")
    ap.add_argument("--models", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--only", choices=("coverage", "power", "hard"), help="one table only")
    ap.add_argument("--hard-releases", type=int, default=300, help="releases per --hard row")
    ap.add_argument("--shapes", action="store_true", help="only the release-shape measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--height", default="auto", help="leaf height of both releases (coverage rows; 'auto')"
    )
    args = ap.parse_args()
    if args.shapes:
        print(f"{'model':9s} {'ε':>4s} {'release':12s} {'RMSE ΔAUC':>12s} {'RMSE Δrecall':>14s}")
        for line in shapes(30, args.seed):
            print(line, flush=True)
        return
    if args.only in (None, "coverage"):
        print(
            f"{'model':9s} {'ε':>4s} {'rows':>8s} {'metric':14s} {'runs':>6s} {'covered':>9s} "
            f"{'own':>9s} {'width':>9s}"
        )
        for model in args.models:
            height = args.height if args.height == "auto" else int(args.height)
            for line in coverage(model, args.releases, args.seed, height):
                print(line, flush=True)
        print()
    if args.only in (None, "power"):
        print(
            f"{'model':9s} {'ε':>4s} {'gate':11s} {'n 80% pow':>10s} {'n ≤5% ff':>10s} "
            f"{'runs':>8s} {'false failure':>14s} {'caught 2m':>10s}"
        )
        for line in power(args.models, args.power_releases, args.seed, args.margin):
            print(line, flush=True)
        print()
    if args.only in (None, "hard"):
        noisy = [m for m in args.models if m != "federated"]
        print(
            f"{'family':9s} {'rows':>8s} {'model':9s} {'ε':>4s} {'h':>3s} {'runs':>6s} "
            + " ".join(f"{m.split('@')[0][:8]:>8s}" for m in METRICS)
        )
        for line in hard(noisy, args.hard_releases, args.seed):
            print(line, flush=True)


if __name__ == "__main__":
    main()
