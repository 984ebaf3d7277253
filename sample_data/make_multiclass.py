"""Make the multiclass sample: a real network's logits on held-out synthetic data, overconfident.

Seed paper 004 calibrates networks that, like most modern ones (Guo et al. 2017), are
overconfident. Here a scikit-learn MLP (two hidden layers of 128 ReLUs, almost no weight decay)
is trained on a 12k-row draw of a 10-class `make_classification` problem until it fits its
training set almost perfectly (≈ 99.7 % training accuracy); on fresh rows from the same
distribution it is right ≈ 73 % of the time but its mean top probability is ≈ 0.90. That
overconfidence comes from the model's own overfitting: no temperature is applied here.

Columns: `label` (int8, 0..9) and `logit_0..logit_9` (float32, the network's output layer before
the softmax). Probabilities are the softmax of the logits, so they are not stored (the file stays
small; fedeval derives them).

    python sample_data/make_multiclass.py                 # sample_data/multiclass.parquet, 50k rows
    python sample_data/make_multiclass.py --rows 200000 -o big.parquet

Needs scikit-learn (a dev extra). Seeded: the same arguments give the same file.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

CLASSES = 10
TRAIN_ROWS = 12_000
EPOCHS = 150


def make_logits(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train on one synthetic draw, return (logits, labels) of `rows` fresh rows."""
    x, y = make_classification(
        n_samples=TRAIN_ROWS + rows,
        n_features=30,
        n_informative=16,
        n_redundant=6,
        n_classes=CLASSES,
        n_clusters_per_class=2,
        class_sep=1.0,
        flip_y=0.05,
        random_state=seed,
    )
    scaler = StandardScaler().fit(x[:TRAIN_ROWS])
    x = scaler.transform(x)
    model = MLPClassifier(
        hidden_layer_sizes=(128, 128),
        alpha=1e-5,
        batch_size=256,
        max_iter=EPOCHS,
        random_state=seed,
    )
    with warnings.catch_warnings():
        # Stopping at a fixed epoch count before "convergence" is the point: it overfits.
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x[:TRAIN_ROWS], y[:TRAIN_ROWS])
    # The output layer's pre-activations, i.e. what predict_proba feeds to its softmax.
    h = x[TRAIN_ROWS:]
    for w, b in zip(model.coefs_[:-1], model.intercepts_[:-1], strict=True):
        h = np.maximum(h @ w + b, 0.0)
    logits = h @ model.coefs_[-1] + model.intercepts_[-1]
    return logits, y[TRAIN_ROWS:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("-o", "--output", type=Path, default=Path("sample_data/multiclass.parquet"))
    args = parser.parse_args()

    logits, labels = make_logits(args.rows, args.seed)
    names = [f"logit_{j}" for j in range(CLASSES)]
    table = pa.table(
        {"label": pa.array(labels.astype(np.int8))}
        | {n: pa.array(logits[:, j].astype(np.float32)) for j, n in enumerate(names)}
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_suffix(args.output.suffix + ".tmp")
    # Floats of distinct values: no dictionary, and byte-stream split, which lets zstd find the
    # shared exponent bytes (1.7 MB instead of 2.8 MB).
    pq.write_table(
        table,
        tmp,
        compression="zstd",
        compression_level=19,
        use_dictionary=["label"],
        use_byte_stream_split=names,
    )
    tmp.replace(args.output)

    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    print(
        f"{args.output}: {len(labels)} rows, {CLASSES} classes, accuracy "
        f"{np.mean(p.argmax(1) == labels):.4f}, mean top probability {p.max(1).mean():.4f}"
    )


if __name__ == "__main__":
    main()
