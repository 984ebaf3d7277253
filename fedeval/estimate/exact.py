"""Exact metrics from the raw scores, computed centrally: the truth a simulation reports beside
every estimate. Same semantics as scikit-learn's ``roc_auc_score`` and ``precision_score``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class SortedScores:
    """Each class's scores, sorted ascending."""

    negatives: np.ndarray
    positives: np.ndarray

    @classmethod
    def from_arrays(cls, y_score: np.ndarray, y_positive: np.ndarray) -> SortedScores:
        return cls(np.sort(y_score[~y_positive]), np.sort(y_score[y_positive]))


def exact_auc(s: SortedScores) -> float:
    """Mann-Whitney AUC with ties counted ½: for each positive, negatives below plus ½ equal.

    Counts are summed as int64 (exact) before one float division.
    """
    below = np.searchsorted(s.negatives, s.positives, side="left")
    at_or_below = np.searchsorted(s.negatives, s.positives, side="right")
    twice = int(below.sum(dtype=np.int64)) + int(at_or_below.sum(dtype=np.int64))
    denom = 2 * len(s.positives) * len(s.negatives)
    return twice / denom if denom else float("nan")


def exact_threshold_counts(
    s: SortedScores, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(TP, FP) at each threshold: examples of each class with score ≥ t."""
    tp = len(s.positives) - np.searchsorted(s.positives, thresholds, side="left")
    fp = len(s.negatives) - np.searchsorted(s.negatives, thresholds, side="left")
    return tp.astype(np.float64), fp.astype(np.float64)
