"""Federated multiclass calibration on the sample: cwECE and accuracy change, with and without DP.

Seed paper 004's experiment (section 5, Tables 2–3, Figures 2–3) on `sample_data/multiclass.
parquet` (10 classes, 50k rows, an overconfident MLP's logits). The rows are split 50/50 at random
with a fixed seed; the fitting half is spread over K = 100 clients with Dirichlet(β) label skew
(β ∈ {0.1, 0.5, 1}; a fresh partition per seed), each method is trained over T ∈ {1, 12, 30}
rounds with participation p = 0.1, without DP and with user-level (ε, δ) = (1, 1e-5) at the
default clip norms (C = 0.5 for FedTemp, (C₊, C₋) = (10, 50) for binning), and measured on the
other half: classwise ECE (15 bins, in %) and the change in top-1 accuracy (points). Each cell is
the median over 10 seeds (partition, participation and noise). Methods: the base model, FedBin and
FedBBQ with the heterogeneity weighting ("all weight") and without it, and FedTemp (server step
1/t). Central rows fit histogram binning, BBQ and temperature scaling on the whole fitting half
(the paper's dashed lines).

The summary checks the paper's findings (without forcing them): weighted FedBBQ has the lowest
cwECE without DP given enough rounds (T = 30); FedTemp has the lowest cwECE under DP among the
methods that keep accuracy; unweighted binning can cost accuracy under skew (β = 0.1) where the
weighted version does not.

    .venv/bin/python benchmarks/multiclass.py            # about a minute on 2 cores
    .venv/bin/python benchmarks/multiclass.py --seeds 3  # quicker
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from common import ROOT

from fedeval.multiclass.binning import central_binning, fed_binning
from fedeval.multiclass.data import read_multiclass, softmax
from fedeval.multiclass.federation import assign
from fedeval.multiclass.metrics import measure
from fedeval.multiclass.privacy import (
    DEFAULT_NEGATIVE_CLIP,
    DEFAULT_POSITIVE_CLIP,
    DEFAULT_TEMPERATURE_CLIP,
    dp_statement,
)
from fedeval.multiclass.temperature import fed_temperature, fit_temperature

SAMPLE = ROOT / "sample_data" / "multiclass.parquet"
SPLIT_SEED = 2024
CLIENTS = 100
PARTICIPATION = 0.1
BINS = 128
BETAS = (0.1, 0.5, 1.0)
ROUNDS = (1, 12, 30)
EPSILON, DELTA = 1.0, 1e-5
ACC_DROP = -0.5
"""An accuracy change below this many points counts as a cost (the paper flags > 1 point at
CIFAR scale; our test half has 25k rows, so 0.5 points is ≈ 2 standard errors of a difference)."""
TIE = 0.02
"""cwECE (in % points) within which two methods count as tied for best."""

METHODS = (
    ("FedBin all weight", "bin", True),
    ("FedBin unweighted", "bin", False),
    ("FedBBQ all weight", "bbq", True),
    ("FedBBQ unweighted", "bbq", False),
    ("FedTemp", "temp", None),
)


def load(path: Path):
    d = read_multiclass(path)
    order = np.random.default_rng(SPLIT_SEED).permutation(d.rows)
    fit, test = order[: d.rows // 2], order[d.rows // 2 :]
    return d.take(fit), d.take(test)


def run_method(kind, weighted, fit, client, rounds, dp, seed):
    """One federated run; returns the calibrated test probabilities as a function of the test."""
    r_rounds, r_noise = np.random.default_rng([seed, rounds]).spawn(2)
    if kind == "temp":
        res = fed_temperature(
            fit.logits,
            fit.labels,
            client,
            CLIENTS,
            rounds=rounds,
            participation=PARTICIPATION,
            participation_rng=r_rounds,
            noise_rng=r_noise,
            dp=dp,
        )
        return lambda test: res.calibrator(test.logits)
    res = fed_binning(
        fit.probabilities(),
        fit.labels,
        client,
        CLIENTS,
        n_bins=BINS,
        bbq=kind == "bbq",
        weighted=weighted,
        rounds=rounds,
        participation=PARTICIPATION,
        participation_rng=r_rounds,
        noise_rng=r_noise,
        dp=dp,
    )
    return lambda test: res.calibrator(test.probabilities())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    t0 = time.perf_counter()
    fit, test = load(SAMPLE)
    base = measure(test.probabilities(), test.labels)

    # The noise each setting needs, once per (method family, T).
    dps = {}
    for t in ROUNDS:
        dps[("temp", t)] = dp_statement(
            EPSILON,
            DELTA,
            releases=t,
            clip={"temperature": DEFAULT_TEMPERATURE_CLIP},
            rounds=t,
            participation=PARTICIPATION,
        )
        dps[("bin", t)] = dps[("bbq", t)] = dp_statement(
            EPSILON,
            DELTA,
            releases=2 * fit.n_classes * t,
            clip={"positive": DEFAULT_POSITIVE_CLIP, "negative": DEFAULT_NEGATIVE_CLIP},
            rounds=t,
            participation=PARTICIPATION,
        )

    # cell[(dp, β, method, T)] = list of (cwECE %, accuracy change in points) over seeds
    cell: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for beta in BETAS:
        for seed in range(args.seeds):
            client = assign(fit.labels, CLIENTS, beta, np.random.default_rng([seed, 7]))
            for private in (False, True):
                for t in ROUNDS:
                    for name, kind, weighted in METHODS:
                        dp = dps[(kind, t)] if private else None
                        f = run_method(kind, weighted, fit, client, t, dp, seed)
                        m = measure(f(test), test.labels)
                        cell[(private, beta, name, t)].append(
                            (100 * m.cw_ece, 100 * (m.accuracy - base.accuracy))
                        )
        print(f"β = {beta:g} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    med = {
        k: (float(np.median([a for a, _ in v])), float(np.median([b for _, b in v])))
        for k, v in cell.items()
    }

    p_fit = fit.probabilities()
    central = {
        "central binning": central_binning(p_fit, fit.labels, n_bins=BINS, bbq=False)(
            test.probabilities()
        ),
        "central BBQ": central_binning(p_fit, fit.labels, n_bins=BINS, bbq=True)(
            test.probabilities()
        ),
        "central temperature": softmax(test.logits, fit_temperature(fit.logits, fit.labels)),
    }

    print(
        f"multiclass.parquet: fit {fit.rows:,} rows / test {test.rows:,} rows, {fit.n_classes} "
        f"classes, K = {CLIENTS} clients, p = {PARTICIPATION:g}, B = {BINS} bins; "
        f"median over {args.seeds} seeds"
    )
    print("cells: test cwECE % (15 bins) / accuracy change in points")
    print(
        f"base model: cwECE {100 * base.cw_ece:.3f} %, top-label ECE "
        f"{100 * base.top_label_ece:.2f} %, accuracy {100 * base.accuracy:.2f} %"
    )
    for name, p in central.items():
        m = measure(p, test.labels)
        print(
            f"{name}: cwECE {100 * m.cw_ece:.3f} %, accuracy change "
            f"{100 * (m.accuracy - base.accuracy):+.2f}"
        )
    head = f"{'privacy':<16} {'β':>4} {'method':<18}" + "".join(f"{f'T = {t}':>17}" for t in ROUNDS)
    print()
    print(head)
    print("-" * len(head))
    for private in (False, True):
        label = f"(ε,δ)=({EPSILON:g},{DELTA:g})" if private else "no DP"
        for beta in BETAS:
            print(
                f"{label:<16} {beta:>4g} {'base':<18}"
                + "".join(f"{f'{100 * base.cw_ece:.3f} / +0.00':>17}" for _ in ROUNDS)
            )
            for name, _, _ in METHODS:
                cells = []
                for t in ROUNDS:
                    e, a = med[(private, beta, name, t)]
                    cells.append(f"{f'{e:.3f} / {a:+.2f}':>17}")
                print(f"{label:<16} {beta:>4g} {name:<18}" + "".join(cells))
    summary(med, base)
    print(f"elapsed {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def best(med, private, beta, t, keep_accuracy: bool) -> str:
    names = [n for n, _, _ in METHODS]
    if keep_accuracy:
        names = [n for n in names if med[(private, beta, n, t)][1] >= ACC_DROP]
    return min(names, key=lambda n: med[(private, beta, n, t)][0])


def summary(med, base) -> None:
    print()
    print(
        f"Findings (methods whose median accuracy change is below {ACC_DROP:g} points are "
        "excluded from 'best'):"
    )
    for private, claim in ((False, "FedBBQ all weight"), (True, "FedTemp")):
        for t in ROUNDS:
            parts, ok = [], True
            for b in BETAS:
                w = best(med, private, b, t, True)
                gap = med[(private, b, claim, t)][0] - med[(private, b, w, t)][0]
                ok &= gap <= TIE
                parts.append(f"β = {b:g}: {w}" + (f" (+{gap:.3f} for {claim})" if gap else ""))
            print(
                f"  {'DP' if private else 'no DP':<5} T = {t:>2}: lowest cwECE {'; '.join(parts)}"
                f" → {claim} best (within {TIE:g}): {'yes' if ok else 'no'}"
            )
    for private in (False, True):
        for t in ROUNDS:
            costs = []
            for kind in ("FedBin", "FedBBQ"):
                un = med[(private, 0.1, f"{kind} unweighted", t)][1]
                w = med[(private, 0.1, f"{kind} all weight", t)][1]
                costs.append(f"{kind} unweighted {un:+.2f} vs all weight {w:+.2f}")
            print(
                f"  β = 0.1, {'DP' if private else 'no DP'}, T = {t}: accuracy " + "; ".join(costs)
            )
    drops = [
        f"{n} ({'DP' if p else 'no DP'}, β = {b:g}, T = {t}: {a:+.2f})"
        for (p, b, n, t), (_, a) in med.items()
        if a < ACC_DROP and "unweighted" not in n
    ]
    print(
        f"  weighted binning or FedTemp losing more than {-ACC_DROP:g} points: "
        + ("none" if not drops else "; ".join(drops))
    )
    temp_changes = {a for (_, _, n, _), (_, a) in med.items() if n == "FedTemp"}
    print(f"  FedTemp accuracy changes seen: {sorted(temp_changes)} (order-preserving)")


if __name__ == "__main__":
    main()
