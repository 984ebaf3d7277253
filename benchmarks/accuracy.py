"""Accuracy against the papers' settings: median absolute error over 10 runs.

Reproduces Cormode & Markov's experiments (PVLDB 2023, section 7; long version appendix C): the
ten thresholds 1/11 … 10/11, federated (h = 14), distdp ε = 1 (h = 6 … 14), localdp OUE ε = 5
(h = 4 … 10), on the sample data and on a 500k-row set made by the same script. For each
setting: the median over 10 noise draws of |AUC error| and, for precision, recall and accuracy,
of the worst error over the 10 thresholds. Rows compare the papers' hierarchical release with
the flat release and with what `--height auto` picks.

    .venv/bin/python benchmarks/accuracy.py            # both data sets
    .venv/bin/python benchmarks/accuracy.py --quick    # sample data only
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from common import SAMPLE, ensure_big

from fedeval.api.evaluate import evaluate_data, threshold_axis
from fedeval.core.params import resolve_config
from fedeval.tables.scored import read_scored

RUNS = 10


def settings() -> list[tuple[str, float | None, str, object, object]]:
    """(model, ε, shape, height, buckets) rows of the table."""
    rows: list[tuple[str, float | None, str, object, object]] = [
        ("federated", None, "hierarchy", 14, "auto"),
        ("federated", None, "auto", "auto", "auto"),
    ]
    rows += [("distdp", 1.0, "hierarchy", h, "auto") for h in (6, 8, 10, 12, 14)]
    rows += [("distdp", 1.0, "hierarchy", 10, 32)]  # the papers' AUC: B quantile buckets
    rows += [("distdp", 1.0, "flat", h, "auto") for h in (6, 8, 9, 10, 12, 14)]
    rows += [("distdp", 1.0, "auto", "auto", "auto")]
    rows += [("localdp", 5.0, "hierarchy", h, "auto") for h in (4, 6, 8, 10)]
    rows += [("localdp", 5.0, "hierarchy", 10, 16)]
    rows += [("localdp", 5.0, "flat", h, "auto") for h in (4, 5, 6, 7, 8, 10)]
    rows += [("localdp", 5.0, "auto", "auto", "auto")]
    return rows


def measure(data, model, eps, shape, height, buckets) -> dict:
    auc, p, r, a = [], [], [], []
    for run in range(RUNS):
        ev = evaluate_data(
            data, model=model, epsilon=eps, shape=shape, height=height, buckets=buckets, seed=run
        )
        auc.append(ev.auc.abs_error)
        p.append(max(m.precision.abs_error for m in ev.thresholds))
        r.append(max(m.recall.abs_error for m in ev.thresholds))
        a.append(max(m.accuracy.abs_error for m in ev.thresholds))
    return {
        "h": ev.config.height,
        "shape": ev.config.shape.value,
        "auc": float(np.median(auc)),
        "precision": float(np.median(p)),
        "recall": float(np.median(r)),
        "accuracy": float(np.median(a)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sample data only")
    args = parser.parse_args()
    sets = [("sample 200k", SAMPLE)] + ([] if args.quick else [("500k", ensure_big())])

    header = (
        f"{'data':<12} {'model':<9} {'ε':>4} {'shape':<9} {'h':>4} {'AUC on':<9} "
        f"{'|AUC err|':>10} {'precision':>10} {'recall':>10} {'accuracy':>10}"
    )
    print("median over 10 runs of |error|; P/R/A: worst of the 10 thresholds 1/11…10/11")
    print(header)
    print("-" * len(header))
    t0 = time.perf_counter()
    for label, path in sets:
        # Read as `evaluate` reads it: the default thresholds are cell edges (fedeval.core.axis).
        data = read_scored(path, axis=threshold_axis((0.0, 1.0), None))
        for model, eps, shape, height, buckets in settings():
            res = measure(data, model, eps, shape, height, buckets)
            h = f"{res['h']}" + ("*" if height == "auto" else "")
            on = "leaves" if buckets == "auto" else f"B={buckets}"
            print(
                f"{label:<12} {model:<9} {'' if eps is None else f'{eps:g}':>4} {res['shape']:<9} "
                f"{h:>4} {on:<9} {res['auc']:>10.1e} {res['precision']:>10.1e} "
                f"{res['recall']:>10.1e} {res['accuracy']:>10.1e}",
                flush=True,
            )
        # The one-phase rule from n: what the probe of a two-phase auto lands near.
        cfg = {m: resolve_config(m, n=data.rows, probe=False).height for m in ("distdp", "localdp")}
        print(f"{label}: n = {data.rows}; auto heights {cfg} (* = chosen by --height auto)")
    print(
        "papers at n ≈ 500k: P/R/A ≈ 1e-4 federated, 1e-3 distdp, 5e-3 localdp; "
        "AUC ≈ 1e-3 distdp, 5e-3 localdp"
    )
    print(f"elapsed {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
