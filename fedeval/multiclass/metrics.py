"""Multiclass calibration metrics: classwise ECE, top-label ECE, accuracy (seed paper 004).

Both ECEs use M equal-width bins on [0, 1], count-weighted: Σ_m (|B_m|/N)·|mean confidence in
B_m − observed frequency in B_m| = Σ_m |Σ_{i∈B_m} (confidence_i − hit_i)| / N.
- classwise (Definition 3.3, Kull et al. 2019): for each class j, bins on p̂_{i,j} and hit_i =
  1{y_i = j}; averaged over the c classes.
- top-label (Guo et al. 2017): bins on max_j p̂_{i,j} and hit_i = 1{argmax_j p̂_{i,j} = y_i}.
Sums are in float64 and per bin before the absolute value, as the definition requires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_ECE_BINS = 15
"""M = 15 equal-width bins, as Guo et al. (2017) and fedeval's binary ECE use."""


def _bins(x: np.ndarray, n_bins: int) -> np.ndarray:
    return np.minimum((x * n_bins).astype(np.int64), n_bins - 1)


def classwise_ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = DEFAULT_ECE_BINS) -> float:
    """cwECE = (1/c) Σ_j Σ_m |Σ_{i: p̂_ij ∈ B_m} (p̂_ij − 1{y_i = j})| / N (Definition 3.3)."""
    p = np.asarray(probs, dtype=np.float64)
    n, c = p.shape
    hit = labels[:, None] == np.arange(c)
    ids = np.arange(c) * n_bins + _bins(p, n_bins)
    gap = np.bincount(ids.ravel(), (p - hit).ravel(), minlength=c * n_bins)
    return float(np.abs(gap).sum() / (n * c))


def top_label_ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = DEFAULT_ECE_BINS) -> float:
    """Top-label ECE = Σ_m |Σ_{i: max_j p̂_ij ∈ B_m} (max_j p̂_ij − 1{argmax = y_i})| / N."""
    p = np.asarray(probs, dtype=np.float64)
    top = p.argmax(axis=1)
    conf = p[np.arange(len(p)), top]
    gap = np.bincount(_bins(conf, n_bins), conf - (top == labels), minlength=n_bins)
    return float(np.abs(gap).sum() / len(p))


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy (ties go to the lowest class index, as `argmax` breaks them)."""
    return float(np.mean(np.asarray(probs).argmax(axis=1) == labels))


@dataclass(frozen=True)
class Metrics:
    """cwECE, top-label ECE (fractions, not %) and accuracy of one set of probabilities."""

    cw_ece: float
    top_label_ece: float
    accuracy: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "cw_ece": self.cw_ece,
            "top_label_ece": self.top_label_ece,
            "accuracy": self.accuracy,
        }


def measure(probs: np.ndarray, labels: np.ndarray, n_bins: int = DEFAULT_ECE_BINS) -> Metrics:
    """All three metrics of `probs` (n, c) against integer `labels` (n,)."""
    return Metrics(
        classwise_ece(probs, labels, n_bins),
        top_label_ece(probs, labels, n_bins),
        accuracy(probs, labels),
    )
