"""`--height auto` against the best fixed height, per metric: is one release height good for
every estimate made from it?

For each data family (smooth binormal scores; 1.5% positives) and DP model (distdp ε = 1,
localdp ε = 5), every height in a range is run on the same data for R noise draws; the table
gives, per metric (ROC AUC from the leaves, average precision from the leaves, worst P/R/A error
over the ten default thresholds), the median absolute error at the height `auto` picks, the
best fixed height and its error, and their ratio (the issue's target: AUC at auto within 1.2×
of the best fixed height).

`auto` is two-phase under DP (`fedeval.privacy.probe`): a share of the budget (distdp) or of
the reports (localdp) buys noisy class totals first, and the height is chosen from them
(`fedeval.core.params.probe_height`); its column shows the median height the probe chose.

    .venv/bin/python benchmarks/height.py            # n = 1M, R = 40 (a few minutes)
    .venv/bin/python benchmarks/height.py --quick    # n = 200k, R = 8
    .venv/bin/python benchmarks/height.py --families rare --models localdp --heights 3-5 --draws 200
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from fedeval.api.evaluate import evaluate_data, threshold_axis
from fedeval.tables.scored import scored_from_arrays

MODELS = (("distdp", 1.0, range(6, 15)), ("localdp", 5.0, range(3, 12)))


def family(name: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(labels, scores) of a family: 'smooth' binormal (AUC ≈ 0.86), or 'rare' 1.5% positives
    with positives ~ Beta(5, 2) and negatives ~ Beta(1, 6)."""
    if name == "smooth":
        y = rng.random(n) < 0.5
        z = rng.normal(np.where(y, 0.75, -0.75), 1.0)
        return y.astype(int), 1.0 / (1.0 + np.exp(-z))
    y = rng.random(n) < 0.015
    s = np.where(y, rng.beta(5, 2, n), rng.beta(1, 6, n))
    return y.astype(int), s


def metric_errors(ev, exact=None) -> tuple[float, float, float]:
    """|error| of AUC, AP and the worst P/R/A of one evaluation (against `exact`'s values if
    given: the whole data's, where `ev` saw a subsample)."""
    ref = exact or ev
    pra = max(
        abs(e.estimate - x.exact)
        for m, mx in zip(ev.thresholds, ref.thresholds, strict=True)
        for e, x in zip(
            (m.precision, m.recall, m.accuracy), (mx.precision, mx.recall, mx.accuracy), strict=True
        )
        if x.exact is not None and e.estimate is not None and np.isfinite(x.exact)
    )
    ap = abs(ev.curves.average_precision.estimate - ref.curves.average_precision.exact)
    return abs(ev.auc.estimate - ref.auc.exact), ap, pra


def errors(data, model: str, eps: float, height, draws: int) -> tuple[float, np.ndarray]:
    """(median height used, median |error| of AUC, AP, worst P/R/A) over `draws` noise draws
    (under `auto` the height is the probe's choice, so it may differ between draws)."""
    out, used = [], []
    for r in range(draws):
        ev = evaluate_data(data, model=model, epsilon=eps, height=height, seed=1000 + r, ci_draws=0)
        used.append(ev.config.height)
        out.append(metric_errors(ev))
    return float(np.median(used)), np.median(np.asarray(out), axis=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 200k, R = 8")
    ap.add_argument("--draws", type=int, help="noise draws per height (default 40; quick 8)")
    ap.add_argument("--verbose", action="store_true", help="print every height's errors")
    ap.add_argument("--families", nargs="+", choices=("smooth", "rare"), default=["smooth", "rare"])
    ap.add_argument("--models", nargs="+", choices=[m for m, _, _ in MODELS], default=None)
    ap.add_argument("--heights", help="fixed heights to compare, e.g. 3-6 (default the model's)")
    args = ap.parse_args()
    n, draws = (200_000, 8) if args.quick else (1_000_000, 40)
    draws = args.draws or draws
    rng = np.random.default_rng(2026)
    names = ("ROC AUC", "AP", "worst P/R/A")
    print(f"n = {n:,}, {draws} noise draws per height; median |error|")
    print(f"{'data':<7} {'model':<12} {'metric':<12} {'auto h':>6} {'error':>9} "
          f"{'best h':>6} {'error':>9} {'auto/best':>9}")  # fmt: skip
    for fam in ("smooth", "rare"):
        y, s = family(fam, n, rng)  # drawn for both families, so each keeps its data
        if fam not in args.families:
            continue
        # Read as evaluate reads it: the default thresholds declared, so they are cell edges.
        data = scored_from_arrays(
            y, s, keep_scores=True, resolution=14, axis=threshold_axis((0.0, 1.0), None)
        )
        for model, eps, heights in MODELS:
            if args.models is not None and model not in args.models:
                continue
            if args.heights:
                lo, _, hi = args.heights.partition("-")
                heights = range(int(lo), int(hi or lo) + 1)
            t0 = time.perf_counter()
            auto_h, auto_err = errors(data, model, eps, "auto", draws)
            table = {h: errors(data, model, eps, h, draws)[1] for h in heights}
            if args.verbose:
                for h, e in table.items():
                    print(f"  {fam} {model} h={h}: " + " ".join(f"{x:.2e}" for x in e))
            for i, metric in enumerate(names):
                best = min(table, key=lambda h: table[h][i])
                ratio = auto_err[i] / table[best][i] if table[best][i] > 0 else float("nan")
                print(
                    f"{fam:<7} {f'{model} ε={eps:g}':<12} {metric:<12} {auto_h:>6g} "
                    f"{auto_err[i]:>9.2e} {best:>6} {table[best][i]:>9.2e} {ratio:>9.2f}",
                    flush=True,
                )
            print(f"  ({fam}, {model}: {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
