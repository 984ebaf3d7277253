"""Make the sample scored test set: a real model's scores on held-out synthetic data.

Like the Kaggle "tabular playground" sets the papers use: a roughly balanced binary target, a
gradient-boosted model trained on one synthetic draw, scored on a separate draw. The model is
good (ROC AUC ≈ 0.85) and, as boosted trees with label noise tend to be, not perfectly calibrated.

A second column, `score_new`, holds a slightly worse candidate model's scores on the same rows
(for `fedeval compare`): the same learner trained on half of the training rows, chosen by a
generator of its own (`CANDIDATE_STREAM`), so `score` and `label` are the same bit for bit as
without it.

    python sample_data/make_sample.py                       # sample_data/scores.parquet, 200k rows
    python sample_data/make_sample.py --rows 500000 -o big.parquet

Needs scikit-learn (a dev extra). Seeded: the same arguments give the same file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier

TRAIN_ROWS = 60_000
CANDIDATE_ROWS = 30_000
"""Training rows of the candidate model: half the baseline's, so it is slightly worse."""
CANDIDATE_STREAM = 1
"""The candidate's rows are drawn by `default_rng(SeedSequence([seed, CANDIDATE_STREAM]))`: a
stream of its own, so nothing the baseline draws changes."""


def _data(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = make_classification(
        n_samples=TRAIN_ROWS + rows,
        n_features=20,
        n_informative=6,
        n_redundant=4,
        n_clusters_per_class=3,
        class_sep=0.65,
        flip_y=0.18,
        weights=[0.52],
        random_state=seed,
    )
    return x, y


def _model(seed: int) -> HistGradientBoostingClassifier:
    return HistGradientBoostingClassifier(
        max_iter=60, learning_rate=0.3, max_leaf_nodes=15, random_state=seed
    )


def make_scores(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train on one synthetic draw, score `rows` fresh rows from the same distribution."""
    scores, _, labels = make_pair(rows, seed)
    return scores, labels


def make_pair(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(baseline scores, candidate scores, labels) of the same `rows` fresh rows: the baseline
    trained on all TRAIN_ROWS training rows, the candidate on CANDIDATE_ROWS of them."""
    x, y = _data(rows, seed)
    model = _model(seed)
    model.fit(x[:TRAIN_ROWS], y[:TRAIN_ROWS])
    scores = model.predict_proba(x[TRAIN_ROWS:])[:, 1]
    rng = np.random.default_rng(np.random.SeedSequence([seed, CANDIDATE_STREAM]))
    pick = np.sort(rng.choice(TRAIN_ROWS, CANDIDATE_ROWS, replace=False))
    candidate = _model(seed).fit(x[pick], y[pick]).predict_proba(x[TRAIN_ROWS:])[:, 1]
    return scores, candidate, y[TRAIN_ROWS:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("-o", "--output", type=Path, default=Path("sample_data/scores.parquet"))
    args = parser.parse_args()

    scores, candidate, labels = make_pair(args.rows, args.seed)
    table = pa.table(
        {
            # float32 keeps the file small; fedeval reads it back as float64 exactly.
            "score": pa.array(scores.astype(np.float32)),
            "label": pa.array(labels.astype(np.int8)),
            "score_new": pa.array(candidate.astype(np.float32)),
        }
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_suffix(args.output.suffix + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(args.output)

    from sklearn.metrics import roc_auc_score

    print(
        f"{args.output}: {len(labels)} rows, positives {labels.mean():.3f}, "
        f"ROC AUC {roc_auc_score(labels, scores):.4f} (score_new: "
        f"{roc_auc_score(labels, candidate):.4f})"
    )


if __name__ == "__main__":
    main()
