"""`fedeval compare`: coverage of the difference's interval, and the gate's error rates at the
population the planner calls sufficient; `--shapes`, the release-shape measurement that chose
two 1-D releases over a joint one.

    .venv/bin/python benchmarks/compare.py                      # coverage and power (≈ 3 min)
    .venv/bin/python benchmarks/compare.py --releases 2000      # tighter coverage figures
    .venv/bin/python benchmarks/compare.py --shapes             # 1-D pair against joint 2-D

Coverage: paired scores of correlated models (`tests/paired.py`: 2% positives; a candidate worse,
equal, better, and worse on tied scores, one data set each, used in turn), fresh noise per
release; the interval must hold the exact candidate − baseline. Beside it, how often the
baseline's own interval holds its exact value (the difference's interval inherits its
conservatism where that is above 95%). Federated releases have no noise: their coverage is over
fresh data per release, and P/R/A at declared thresholds are exact (interval of width 0).

Power: distdp ε = 1, the gate ``--fail-if-worse auc=m`` at the population
`fedeval.api.compare_plan.detect` calls sufficient for ≤ 5% false failures (its binormal reference
population at the data's positive share and AUC): how often it fails a candidate of exactly the
same AUC (false failures), and one exactly 2m worse (caught).
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


def power(margins: list[float], releases: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    rows = []
    for m in margins:
        plan = detect(f"auc={m}", model="distdp", epsilon=1.0, positives_fraction=0.02, auc=0.92)
        n = plan.rows_5_percent_false_failures
        assert n is not None
        y, base, _ = paired_scores(n, rng)
        equal, worse = same_auc(base), auc_drop(y, base, 2 * m)
        fails = {"equal": 0, "worse": 0}
        for cand, name in ((equal, "equal"), (worse, "worse")):
            for _ in range(releases):
                c = compare(
                    y,
                    base,
                    cand,
                    model="distdp",
                    epsilon=1.0,
                    exact=False,
                    ci_draws=100,
                    seed=int(rng.integers(1 << 62)),
                )
                fails[name] += c["auc"].difference.ci95[0] < -m
        rows.append(
            f"auc={m:<7g} {plan.rows_80_power:>10,d} {n:>10,d} {releases:>8d} "
            f"{fails['equal'] / releases:>14.3f} {fails['worse'] / releases:>10.3f}"
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
    ap.add_argument("--power-releases", type=int, default=400)
    ap.add_argument("--margins", type=float, nargs="+", default=[0.02, 0.05])
    ap.add_argument("--models", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
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
    print(
        f"{'model':9s} {'ε':>4s} {'rows':>8s} {'metric':14s} {'runs':>6s} {'covered':>9s} "
        f"{'own':>9s} {'width':>9s}"
    )
    for model in args.models:
        releases = args.releases if model != "federated" else max(args.releases // 4, 100)
        height = args.height if args.height == "auto" else int(args.height)
        for line in coverage(model, releases, args.seed, height):
            print(line, flush=True)
    print()
    print(
        f"{'gate':11s} {'n 80% pow':>10s} {'n ≤5% ff':>10s} {'releases':>8s} "
        f"{'false failure':>14s} {'caught 2m':>10s}"
    )
    for line in power(args.margins, args.power_releases, args.seed):
        print(line, flush=True)


if __name__ == "__main__":
    main()
