"""AP and ROC AUC accuracy of the two curve estimators, on smooth and on rare-positive scores.

For each data set, model and estimator: the median over RUNS draws (fresh data and fresh noise
each time) of |AP − exact AP| and |ROC AUC − exact AUC|, at Q = 100 and the curves' auto height
⌈log₂ Q⌉ + 2 = 9. Estimators, all on the same release of each draw:

- leaves    every leaf edge from the cumulated consistent leaves, AP integrated exactly inside
            each leaf (examples mixed uniformly) — `method="leaves"`, the default;
- leaves/st the same curves, AP stepped at the leaf edges (all of a leaf at once, as
            scikit-learn does for tied scores) — `ap_rule="step"`;
- pchip     the papers' estimator: Q class quantiles joined by monotone PCHIP — `method="pchip"`.

Data: (a) "smooth": balanced, negatives ~ Beta(2, 3), positives ~ Beta(4, 3); (b) "rare":
1.5 % positives ~ Beta(5, 2), negatives ~ Beta(1, 6). Models: federated (no noise), distdp ε = 1,
localdp ε = 5.

    .venv/bin/python benchmarks/rare.py            # n = 1M, 10 draws
    .venv/bin/python benchmarks/rare.py --quick    # n = 200k, 10 draws
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from fedeval.api.curves import DEFAULT_QUANTILES, curve_result
from fedeval.estimate.roc_pr import curve_height, estimate_curves
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays

RUNS = 10
Q = DEFAULT_QUANTILES
MODELS: tuple[tuple[str, float | None], ...] = (
    ("federated", None),
    ("distdp", 1.0),
    ("localdp", 5.0),
)
ESTIMATORS = ("leaves", "leaves/st", "pchip")


def smooth(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n)
    return y, rng.beta(2 + 2 * y, 3)


def rare(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < 0.015).astype(np.int64)
    s = np.where(y == 1, rng.beta(5, 2, n), rng.beta(1, 6, n))
    return y, np.clip(s, 0.0, 1.0)


SETS = {"smooth": smooth, "rare 1.5%": rare}


def one_draw(make, n: int, model: str, eps: float | None, seed: int) -> dict[str, tuple]:
    """(|AP err|, |AUC err|, AP, exact AP) of each estimator on one release."""
    rng = np.random.default_rng(seed)
    y, s = make(n, rng)
    h = curve_height(Q)
    data = scored_from_arrays(y, s, resolution=h)
    run = simulate(data, model=model, epsilon=eps, height=h, seed=seed, ci_draws=0)
    out = {}
    for name in ESTIMATORS:
        if name == "leaves/st":
            dense = estimate_curves(run.histogram.leaves, Q, method="leaves", ap_rule="step")[0]
            ap_ex, auc_ex = out["leaves"][3], out["leaves"][4]
            ap, auc = dense.average_precision, dense.roc_auc
        else:
            res = curve_result(run, Q, name)
            ap, auc = res.average_precision.estimate, res.roc_auc.estimate
            ap_ex, auc_ex = res.average_precision.exact, res.roc_auc.exact
        out[name] = (abs(ap - ap_ex), abs(auc - auc_ex), ap, ap_ex, auc_ex)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 200k instead of 1M")
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    n = 200_000 if args.quick else 1_000_000
    print(
        f"n = {n:,}, Q = {Q}, h = {curve_height(Q)}; median over {args.runs} draws "
        "(fresh data and noise); AP and exact AP are medians too"
    )
    header = (
        f"{'data':<10} {'model':<9} {'ε':>3} {'estimator':<10} "
        f"{'|AP err|':>9} {'|AUC err|':>9} {'AP':>7} {'exact':>7}"
    )
    print(header)
    print("-" * len(header))
    t0 = time.perf_counter()
    for label, make in SETS.items():
        for model, eps in MODELS:
            draws = [one_draw(make, n, model, eps, seed) for seed in range(args.runs)]
            for name in ESTIMATORS:
                r = np.array([d[name][:4] for d in draws])
                med = np.median(r, axis=0)
                print(
                    f"{label:<10} {model:<9} {'' if eps is None else f'{eps:g}':>3} {name:<10} "
                    f"{med[0]:>9.1e} {med[1]:>9.1e} {med[2]:>7.4f} {med[3]:>7.4f}",
                    flush=True,
                )
    print(f"elapsed {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
