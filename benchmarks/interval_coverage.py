"""Coverage of the 95% intervals on the sample data, with their width beside the error.

Over 200 seeded runs per DP model (and, for federated, over 200 random thresholds, since a run
without noise is deterministic): how often each interval holds the exact value, the median
interval width and the median absolute error. For a calibrated normal interval the width is
about 5.8 times the median error (2·1.96σ against 0.674σ).

    .venv/bin/python benchmarks/interval_coverage.py
"""

from __future__ import annotations

import sys
import time

import numpy as np
from common import SAMPLE

from fedeval.api.evaluate import evaluate_data
from fedeval.tables.scored import read_scored

RUNS = 200


def summarise(label: str, estimates: list) -> str:
    cov = np.mean([e.covered for e in estimates])
    width = np.median([e.ci95[1] - e.ci95[0] for e in estimates])
    err = np.median([e.abs_error for e in estimates])
    ratio = width / err
    return f"{label:<22} {len(estimates):>6} {cov:>9.3f} {width:>13.1e} {err:>13.1e} {ratio:>7.1f}"


def main() -> None:
    data = read_scored(SAMPLE)
    print("95% intervals on the sample data (200k rows, auto parameters)")
    print(
        f"{'model · metric':<22} {'n':>6} {'coverage':>9} {'median width':>13} "
        f"{'median error':>13} {'ratio':>7}"
    )
    t0 = time.perf_counter()
    for model in ("distdp", "localdp"):
        print(f"  {model}: {RUNS} seeds …", file=sys.stderr)
        runs = [evaluate_data(data, model=model, seed=s) for s in range(RUNS)]
        print(summarise(f"{model} · AUC", [r.auc for r in runs]))
        for name in ("precision", "recall", "accuracy"):
            ests = [getattr(m, name) for r in runs for m in r.thresholds]
            print(summarise(f"{model} · {name}", ests))
    thresholds = np.sort(np.random.default_rng(0).uniform(0.02, 0.98, RUNS))
    ev = evaluate_data(data, model="federated", thresholds=thresholds, seed=0)
    for name in ("precision", "recall", "accuracy"):
        print(summarise(f"federated · {name}", [getattr(m, name) for m in ev.thresholds]))
    print("federated runs over 200 random thresholds; DP runs over 200 seeds × 10 thresholds")
    print(f"elapsed {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
