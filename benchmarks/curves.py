"""ROC and PR curve accuracy against Q: median area error over 10 runs.

Reproduces Xu & Cormode's experiment ("Federated Computation of ROC and PR Curves", arXiv
2510.04979) with their estimator (`method="pchip"`; the default 'leaves' estimator does not use
Q for its areas, see benchmarks/rare.py): Q ∈ {16, 32, 64, 128, 256} quantiles per class at the
papers' default height ⌈log₂ Q⌉ + 2 and default shape, federated and distdp ε ∈ {0.1, 1, 10}, on
the sample data and on a 500k-row set made by the same script. For each setting: the median over
10 noise draws of the area between the estimated and the exact ROC curve, the same for the PR
curve, and |ROC AUC error| and |AP error| of the estimated curves. A summary then gives, for
each data set, model and ε, the Q with the lowest ROC area error, whether the error plateaus
(error at Q = 256 not below 0.8× the error at Q = 64), and checks the paper's noiseless claim
(ROC area error < 1e-3, PR < 1e-2 at Q ≈ 100) at Q = 128 federated.

    .venv/bin/python benchmarks/curves.py            # both data sets
    .venv/bin/python benchmarks/curves.py --quick    # sample data only
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from common import SAMPLE, ensure_big

from fedeval.api.curves import curves_data
from fedeval.estimate.roc_pr import curve_height
from fedeval.tables.scored import ScoredData, read_scored

RUNS = 10
QS = (16, 32, 64, 128, 256)
MODELS: tuple[tuple[str, float | None], ...] = (
    ("federated", None),
    ("distdp", 0.1),
    ("distdp", 1.0),
    ("distdp", 10.0),
)
RESOLUTION = 16  # ≥ ⌈log₂ 256⌉ + 2 = 10, the largest height used
PLATEAU_RATIO = 0.8
PAPER_Q = 128
PAPER_ROC, PAPER_PR = 1e-3, 1e-2


def measure(data: ScoredData, q: int, model: str, eps: float | None) -> dict[str, float]:
    """Medians over RUNS noise draws of the four errors for one setting."""
    roc, pr, auc, ap = [], [], [], []
    for run in range(RUNS):
        res = curves_data(data, quantiles=q, method="pchip", model=model, epsilon=eps, seed=run)
        assert res.roc_area_error is not None and res.pr_area_error is not None
        roc.append(res.roc_area_error)
        pr.append(res.pr_area_error)
        auc.append(res.roc_auc.abs_error)
        ap.append(res.average_precision.abs_error)
    return {
        "roc": float(np.median(roc)),
        "pr": float(np.median(pr)),
        "auc": float(np.median(auc)),
        "ap": float(np.median(ap)),
    }


def eps_label(eps: float | None) -> str:
    return "" if eps is None else f"{eps:g}"


def plateau_from(errors: dict[int, float]) -> int | None:
    """The smallest Q beyond which no larger Q improves the error by 20 % or more (None if the
    error still falls at the largest Q)."""
    qs = sorted(errors)
    for i, q in enumerate(qs[:-1]):
        if min(errors[r] for r in qs[i + 1 :]) >= PLATEAU_RATIO * errors[q]:
            return q
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sample data only")
    args = parser.parse_args()
    sets = [("sample 200k", SAMPLE)] + ([] if args.quick else [("500k", ensure_big())])

    header = (
        f"{'data':<12} {'model':<9} {'ε':>4} {'Q':>4} {'h':>3} "
        f"{'ROC area':>10} {'PR area':>10} {'|AUC err|':>10} {'|AP err|':>10}"
    )
    print(f"median over {RUNS} runs; height ⌈log₂Q⌉+2, default shape; areas between curves")
    print(header)
    print("-" * len(header))
    t0 = time.perf_counter()
    results: dict[tuple[str, str, float | None], dict[int, dict[str, float]]] = {}
    for label, path in sets:
        print(f"reading {path.name} …", file=sys.stderr)
        data = read_scored(path, resolution=RESOLUTION)
        for model, eps in MODELS:
            per_q = results.setdefault((label, model, eps), {})
            for q in QS:
                res = per_q[q] = measure(data, q, model, eps)
                print(
                    f"{label:<12} {model:<9} {eps_label(eps):>4} {q:>4} {curve_height(q):>3} "
                    f"{res['roc']:>10.1e} {res['pr']:>10.1e} {res['auc']:>10.1e} "
                    f"{res['ap']:>10.1e}",
                    flush=True,
                )
            print(f"  {model} {eps_label(eps)} done", file=sys.stderr)

    print()
    print(
        f"best Q by ROC area error; plateau: error at Q={QS[-1]} not below "
        f"{PLATEAU_RATIO:g}× error at Q=64; 'flat from' = smallest Q no larger Q beats by 20 %"
    )
    for (label, model, eps), per_q in results.items():
        roc = {q: r["roc"] for q, r in per_q.items()}
        best = min(roc, key=lambda q: roc[q])
        plateau = roc[QS[-1]] >= PLATEAU_RATIO * roc[64]
        onset = plateau_from(roc)
        print(
            f"{label:<12} {model:<9} {eps_label(eps):>4}  best Q={best:<4} "
            f"ROC {roc[best]:.1e}  Q256/Q64 = {roc[QS[-1]] / roc[64]:.2f}  "
            f"{'plateaus' if plateau else 'still falls'}"
            + ("" if onset is None else f" (flat from Q={onset})")
        )
    for (label, model, _), per_q in results.items():
        if model != "federated":
            continue
        r = per_q[PAPER_Q]
        ok = r["roc"] < PAPER_ROC and r["pr"] < PAPER_PR
        print(
            f"paper check, {label}, federated Q={PAPER_Q}: ROC area {r['roc']:.1e} "
            f"(< {PAPER_ROC:g}: {r['roc'] < PAPER_ROC}), PR area {r['pr']:.1e} "
            f"(< {PAPER_PR:g}: {r['pr'] < PAPER_PR}) → {'meets' if ok else 'MISSES'} the paper",
            flush=True,
        )
    print(f"elapsed {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
