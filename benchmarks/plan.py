"""Planner against measurement: `fedeval plan`'s predicted |error| beside the error measured on
real data.

Grid: n ∈ {1e4, 3e4, 1e5, 3e5, 1e6}; distdp and localdp (OUE) at ε ∈ {0.5, 1, 5}; federated once
per n. Measured: rows of the 500k-row set (`sample_data/make_sample.py --rows 500000`, made on
first use) subsampled without replacement for n ≤ 5e5, a bootstrap of it for n = 1e6 (seeded by
n), read as `evaluate FILE` reads them (the default thresholds are cell edges, so the P/R/A
errors are noise only, as `plan` predicts); `evaluate_data` with default (auto) parameters over
10 noise seeds; the mean over seeds of
|AUC error| and of the mean over the ten thresholds 1/11 … 10/11 of |precision|, |recall| and
|accuracy| errors against the exact values (the definition `fedeval.api.plan.Prediction` uses).
Predicted: `fedeval.api.plan.plan(n, model, ε, positives_fraction=<the data's>)` with the default
binormal reference (AUC 0.85) and with `like=` the sample data (200k rows, a different draw from
the 500k set). Each row gives the auto height most seeds ran (a "*" where a reference's predicted
releases chose another most often: the probe's noise moves it), the three sets of errors and
r = measured/predicted per metric for each reference. The summary gives, per reference and
metric, the largest max(r, 1/r) over the DP rows
and over all rows (federated errors are ~1e-6, where a ratio says little about the planner), where
it occurs, |log r| in standard errors of the noise draws (from the seed-to-seed spread; a large
value means the gap comes from the population, not from too few draws) and the geometric mean of
r (a bias of the reference).

    .venv/bin/python benchmarks/plan.py            # full grid (≈ 70 s)
    .venv/bin/python benchmarks/plan.py --quick    # without n = 1e6
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
import time

import numpy as np
import pyarrow.parquet as pq
from common import SAMPLE, ensure_big

from fedeval.api.evaluate import evaluate_data, threshold_axis
from fedeval.api.plan import plan
from fedeval.tables.scored import read_scored, scored_from_arrays

SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000)
EPSILONS = (0.5, 1.0, 5.0)
SEEDS = range(10)
PLAN_RUNS = 20  # `plan`'s default noise draws
METRICS = ("auc", "precision", "recall", "accuracy")
LABELS = ("AUC", "P", "R", "A")
REFERENCES = ("binormal", "like")

# Intervals do not change the estimates (their generator is spawned, not drawn from); skip them
# when evaluate_data lets us.
NO_CI = {"ci_draws": 0} if "ci_draws" in inspect.signature(evaluate_data).parameters else {}


def grid(sizes) -> list[tuple[str, float | None, int]]:
    """(model, ε, n) rows: federated, then distdp and localdp by ε, n ascending."""
    rows: list[tuple[str, float | None, int]] = [("federated", None, n) for n in sizes]
    rows += [(m, e, n) for m in ("distdp", "localdp") for e in EPSILONS for n in sizes]
    return rows


def population(y: np.ndarray, s: np.ndarray, n: int):
    """n rows of (y, s): without replacement when there are enough, else a bootstrap."""
    rng = np.random.default_rng([2024, n])
    idx = rng.choice(len(y), n, replace=False) if n <= len(y) else rng.integers(0, len(y), n)
    # read as `evaluate FILE` reads it (the default thresholds are cell edges): the planner
    # predicts that reading's errors, noise only, with no interpolation inside a leaf
    axis = threshold_axis((0.0, 1.0), None)
    return scored_from_arrays(y[idx], s[idx], keep_scores=True, axis=axis)


def mean_abs_error(estimates) -> float:
    """Mean |error| over thresholds, skipping undefined ones (as `Prediction` does)."""
    return float(np.nanmean([np.nan if e.abs_error is None else e.abs_error for e in estimates]))


def measure(data, model: str, eps: float | None) -> tuple[int, dict, dict]:
    """(the auto height most seeds ran, mean over seeds of each metric's |error|, its
    coefficient of variation over the seeds) on `data`."""
    errs, heights = [], []
    for seed in SEEDS:
        ev = evaluate_data(data, model=model, epsilon=eps, seed=seed, **NO_CI)
        heights.append(ev.config.height)
        th = ev.thresholds
        errs.append(
            [
                ev.auc.abs_error,
                mean_abs_error(m.precision for m in th),
                mean_abs_error(m.recall for m in th),
                mean_abs_error(m.accuracy for m in th),
            ]
        )
    errs = np.asarray(errs)
    mean = errs.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = errs.std(axis=0, ddof=1) / mean
    return (
        int(np.bincount(heights).argmax()),  # the smaller of a tie, as `plan` reports
        dict(zip(METRICS, mean.tolist(), strict=True)),
        dict(zip(METRICS, cv.tolist(), strict=True)),
    )


def ratio(measured: float, predicted: float) -> float:
    if predicted == 0:
        return 1.0 if measured == 0 else math.inf
    return measured / predicted


def spread(r: float) -> float:
    """max(r, 1/r): how far a ratio is from 1 either way."""
    return math.inf if r == 0 else max(r, 1 / r)


def fmt_ratio(r: float) -> str:
    return "inf" if math.isinf(r) else f"{r:.2f}" if r < 100 else f"{r:.0f}"


def where(model: str, eps: float | None, n: int) -> str:
    e = "" if eps is None else f" ε={eps:g}"
    return f"{model}{e} n={n:.0e}".replace("e+0", "e")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="drop n = 1e6")
    args = parser.parse_args()
    sizes = SIZES[:-1] if args.quick else SIZES

    t0 = time.perf_counter()
    table = pq.read_table(ensure_big(), columns=["score", "label"])
    y = table["label"].to_numpy()
    s = table["score"].to_numpy().astype(np.float64)
    pilot = read_scored(SAMPLE, keep_scores=False)
    populations = {}
    for n in sizes:
        print(f"drawing n = {n:,} rows …", file=sys.stderr, flush=True)
        populations[n] = population(y, s, n)

    w = 8  # error columns
    groups = [
        ("measured |error|", 4 * w),
        ("predicted, binormal AUC .85", 4 * w),
        ("predicted, like sample data", 4 * w),
        (" measured / binormal", 4 * 6),
        (" measured / like", 4 * 6),
    ]
    print(
        "mean over 10 noise seeds (predicted: 20 draws) of |error|; P/R/A: mean over the "
        "thresholds 1/11…10/11; h = auto height"
    )
    print(f"{'':<26}" + "".join(f"{g:>{width}}" for g, width in groups))
    header = (
        f"{'model':<9} {'ε':>3} {'n':>9} {'h':>2} "
        + "".join(f"{lab:>{w}}" for lab in LABELS * 3)
        + "".join(f"{lab:>6}" for lab in LABELS * 2)
    )
    print(header)
    print("-" * len(header))

    results = []  # (model, ε, n, {reference: [r per metric]}, [se of log r per metric])
    for model, eps, n in grid(sizes):
        data = populations[n]
        h, meas, cv = measure(data, model, eps)
        preds = {}
        moved = False
        for ref in REFERENCES:
            pred, _ = plan(
                n,
                model=model,
                epsilon=eps,
                positives_fraction=data.positives / data.rows,
                like=pilot if ref == "like" else None,
            )
            # the planner predicts what runs: the height its draws chose most often (a probe's
            # noise may choose another in some releases); "*" where it is not evaluate's
            moved |= pred.config.height != h
            preds[ref] = {m: getattr(pred, m) for m in METRICS}
        ratios = {ref: [ratio(meas[m], preds[ref][m]) for m in METRICS] for ref in REFERENCES}
        # Monte-Carlo standard error of log r: the seeds' spread, for 10 measured and 20
        # predicted draws (the prediction's spread taken equal to the measurement's).
        # Federated runs repeat exactly (cv at rounding level): no noise, se = 0.
        se = [
            cv[m] * math.sqrt(1 / len(SEEDS) + 1 / PLAN_RUNS) if cv[m] > 1e-6 else 0.0
            for m in METRICS
        ]
        results.append((model, eps, n, ratios, se))
        print(
            f"{model:<9} {'' if eps is None else f'{eps:g}':>3} {n:>9,} {h:>2}"
            + ("*" if moved else " ")
            + "".join(f"{meas[m]:>{w}.1e}" for m in METRICS)
            + "".join(f"{preds[r][m]:>{w}.1e}" for r in REFERENCES for m in METRICS)
            + "".join(f"{fmt_ratio(x):>6}" for r in REFERENCES for x in ratios[r]),
            flush=True,
        )

    print()
    print(
        "summary: r = measured / predicted; largest max(r, 1/r) over the rows, where, |log r| "
        "in standard errors of the noise draws (seed-to-seed spread; not counting the population "
        "itself), and the geometric mean of r over the rows"
    )
    head = (
        f"{'reference':<9} {'rows':<16} {'metric':<6} {'max(r,1/r)':>10}  {'at':<24}"
        f"{'|log r|/se':>10} {'geo-mean r':>11}"
    )
    print(head)
    print("-" * len(head))
    subsets = (
        ("distdp + localdp", lambda m: m != "federated"),
        ("all", lambda m: True),
    )
    for ref in REFERENCES:
        for subset, keep in subsets:
            for k, lab in enumerate(LABELS):
                rows = [
                    (spread(r[ref][k]), r[ref][k], se[k], mod, e, n)
                    for mod, e, n, r, se in results
                    if keep(mod)
                ]
                worst, r_worst, se_worst, mod, e, n = max(rows, key=lambda t: t[0])
                # Federated runs have no noise (se = 0): the gap there is the populations'.
                z = "–"
                if 0 < r_worst < math.inf and se_worst > 0:
                    z = f"{abs(math.log(r_worst)) / se_worst:.1f}"
                finite = [x[1] for x in rows if 0 < x[1] < math.inf]
                gm = math.exp(np.mean(np.log(finite)))
                print(
                    f"{ref:<9} {subset:<16} {lab:<6} {fmt_ratio(worst):>10}  "
                    f"{where(mod, e, n):<24}{z:>10} {gm:>11.2f}"
                )
    print(f"elapsed {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
