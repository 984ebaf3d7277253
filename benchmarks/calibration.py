"""Calibration from one private release, measured out of sample: median exact ECE over 10 runs.

Follows Cormode & Markov's protocol (PVLDB 2023, section 5 and appendix C.3): each data set (the
sample data and a 500k-row set made by the same script) is split 50/50 at random with a fixed
seed; the private release is simulated on the train half, a map is fitted from it by histogram
binning (B = 10, 20, 50 and 'auto') or BBQ, and the exact ECE (15 equal-width bins) of the
calibrated test-half scores is measured. Models: federated, distdp ε = 1, localdp (OUE) ε = 5,
at the default height and shape. Baselines on the same split: the uncalibrated test scores and
scikit-learn's central `IsotonicRegression(out_of_bounds="clip")` fitted on the train half.

For each setting, medians over 10 noise draws (the split stays fixed) of: `test`, the ECE of the
calibrated test half; `floor`, the ECE the same test probabilities would show if they were
exactly right (test labels redrawn as Bernoulli(p)), which is the sampling floor of the
measurement on a test half of this size and depends on how many distinct values the map takes;
and the in-sample ECE of the train half, as estimated from the release (`ece_calibrated.estimate`)
and exactly (`ece_calibrated.exact`), to show how optimistic in-sample figures are. The last
lines compare with the paper's ≈ 0.01 (federated, distdp) and ≈ 0.02 (localdp), using the
defaults (binning with B = 'auto', and BBQ).

    .venv/bin/python benchmarks/calibration.py            # both data sets
    .venv/bin/python benchmarks/calibration.py --quick    # sample data only
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from common import SAMPLE, ensure_big
from sklearn.isotonic import IsotonicRegression

from fedeval.api.calibrate import auto_buckets, calibrate_data
from fedeval.estimate.calibration import exact_ece
from fedeval.estimate.exact import SortedScores
from fedeval.tables.scored import read_scored, scored_from_arrays

RUNS = 10
SPLIT_SEED = 2024
N_BINS = 15
MODELS: tuple[tuple[str, float | None], ...] = (
    ("federated", None),
    ("distdp", 1.0),
    ("localdp", 5.0),
)
METHODS: tuple[tuple[str, int | str], ...] = (
    ("binning", 10),
    ("binning", 20),
    ("binning", 50),
    ("binning", "auto"),
    ("bbq", "auto"),
)
COLUMNS = {"test": 9, "floor": 9, "in-sample est": 14, "in-sample exact": 16}
PAPER = {"federated": 0.01, "distdp": 0.01, "localdp": 0.02}


def load(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(scores, 0/1 labels) of a file, read once through fedeval's own reader."""
    s = read_scored(path).sorted_scores
    assert s is not None
    scores = np.concatenate([s.negatives, s.positives]).astype(np.float64)
    labels = np.repeat(np.array([0, 1], np.int8), [len(s.negatives), len(s.positives)])
    return scores, labels


def split(
    scores: np.ndarray, labels: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(s_train, y_train, s_test, y_test): a random 50/50 split."""
    order = np.random.default_rng(seed).permutation(len(scores))
    tr, te = order[: len(order) // 2], order[len(order) // 2 :]
    return scores[tr], labels[tr], scores[te], labels[te]


def row(
    label: str, model: str, eps: str, method: str, h: str, eces: dict[str, float | None]
) -> None:
    cols = " ".join(
        f"{'' if eces.get(k) is None else f'{eces[k]:.1e}':>{w}}" for k, w in COLUMNS.items()
    )
    print(f"{label:<12} {model:<9} {eps:>3} {method:<13} {h:>3} {cols}", flush=True)


def floor_ece(p_test: np.ndarray, rng: np.random.Generator) -> float:
    """Test ECE these probabilities would show if they were exactly right: labels ~ Bernoulli(p).
    The measurement's own sampling floor on a test half of this size."""
    y = rng.random(len(p_test)) < p_test
    return exact_ece(SortedScores.from_arrays(p_test, y), N_BINS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sample data only")
    args = parser.parse_args()
    sets = [("sample 200k", SAMPLE)] + ([] if args.quick else [("500k", ensure_big())])

    header = f"{'data':<12} {'model':<9} {'ε':>3} {'method':<13} {'h':>3} " + " ".join(
        f"{k:>{w}}" for k, w in COLUMNS.items()
    )
    print(
        f"ECE with {N_BINS} bins; fit on a fixed random half, test on the other; "
        f"median over {RUNS} noise draws"
    )
    print(header)
    print("-" * len(header))
    t0 = time.perf_counter()
    found: dict[tuple[str, str], dict[str, float]] = {}
    for label, path in sets:
        print(f"reading {path.name} …", file=sys.stderr)
        scores, labels = load(path)
        s_train, y_train, s_test, y_test = split(scores, labels, SPLIT_SEED)
        test = SortedScores.from_arrays(s_test, y_test == 1)
        train = scored_from_arrays(y_train, s_train)

        train_sorted = SortedScores.from_arrays(s_train, y_train == 1)
        rng = np.random.default_rng(SPLIT_SEED)
        iso = IsotonicRegression(out_of_bounds="clip").fit(s_train, y_train)
        for name, f in (("uncalibrated", None), ("isotonic", iso.predict)):
            p_test = s_test if f is None else f(s_test)
            eces: dict[str, float | None] = {
                "test": exact_ece(test, N_BINS, transform=f),
                "floor": float(np.median([floor_ece(p_test, rng) for _ in range(RUNS)])),
                "in-sample exact": exact_ece(train_sorted, N_BINS, transform=f),
            }
            row(label, "central", "", name, "", eces)

        for model, eps in MODELS:
            for method, buckets in METHODS:
                runs: dict[str, list[float]] = {k: [] for k in COLUMNS}
                for run in range(RUNS):
                    res = calibrate_data(
                        train, model=model, epsilon=eps, method=method, buckets=buckets, seed=run
                    )
                    assert res.ece_calibrated.exact is not None
                    runs["test"].append(exact_ece(test, N_BINS, transform=res.map))
                    runs["floor"].append(floor_ece(res.map(s_test), rng))
                    runs["in-sample est"].append(res.ece_calibrated.estimate)
                    runs["in-sample exact"].append(res.ece_calibrated.exact)
                cfg = res.run.config
                if method == "bbq":
                    name = "bbq"
                elif buckets == "auto":
                    b = auto_buckets(cfg.model, train.rows, cfg.epsilon, 1 << cfg.height)
                    name = f"binning {b}*"
                else:
                    name = f"binning {buckets}"
                eces = {k: float(np.median(v)) for k, v in runs.items()}
                row(label, model, "" if eps is None else f"{eps:g}", name, str(cfg.height), eces)
                key = method if buckets == "auto" else name
                found.setdefault((label, model), {})[key] = eces["test"]
            print(f"  {model} done", file=sys.stderr)
        print(f"{label}: n = {len(scores)} (train {train.rows}); * = B chosen by 'auto'")

    print()
    for (label, model), eces in found.items():
        best = min(eces, key=lambda k: eces[k])
        default = max(eces["binning"], eces["bbq"])
        print(
            f"paper check, {label}, {model}: test ECE binning auto {eces['binning']:.4f}, "
            f"bbq {eces['bbq']:.4f}, best {eces[best]:.4f} ({best}) vs paper ≈ {PAPER[model]:g}"
            f" → {'at least as good' if default <= PAPER[model] else 'WORSE'}",
            flush=True,
        )
    print(f"elapsed {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
