"""Classifier metrics from per-class score histograms (Cormode & Markov, sections 3.2 and 4).

Inputs are histogram counts sorted by score (last axis), possibly noisy; leading axes broadcast.
Semantics follow scikit-learn: predicted positive means score ≥ threshold; in AUC a positive and
a negative in the same bucket count ½.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from fedeval.core.hierarchy import mass_at_or_above


def auc_from_buckets(negatives: np.ndarray, positives: np.ndarray) -> np.ndarray:
    """AUC = Σ_i n_i · (Σ_{j>i} p_j + p_i/2) / (P·N) (Cormode & Markov, eq. 6).

    Unbiased in the numerator under independent zero-mean noise on each count, since every term
    multiplies counts of the two (independently noised) classes.
    """
    neg = np.asarray(negatives, dtype=np.float64)
    pos = np.asarray(positives, dtype=np.float64)
    p_total = pos.sum(axis=-1)
    n_total = neg.sum(axis=-1)
    above = p_total[..., None] - np.cumsum(pos, axis=-1)  # positives in buckets after i
    numerator = (neg * (above + 0.5 * pos)).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        auc: npt.NDArray[np.float64] = numerator / (p_total * n_total)
    return auc


def threshold_counts(leaves: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(TP, FP) at each threshold in [0, 1]: class mass with score ≥ t, uniform inside a leaf."""
    tp = mass_at_or_above(leaves[..., 1, :], thresholds)
    fp = mass_at_or_above(leaves[..., 0, :], thresholds)
    return tp, fp


def precision(
    tp: ArrayLike, fp: ArrayLike, positives: ArrayLike, negatives: ArrayLike
) -> np.ndarray:
    """Precision TP/(TP + FP), nan where nothing is predicted positive (section 3.2)."""
    tp, fp = np.asarray(tp, float), np.asarray(fp, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
    return out


def recall(tp: ArrayLike, fp: ArrayLike, positives: ArrayLike, negatives: ArrayLike) -> np.ndarray:
    """Recall TP/P, nan where P ≤ 0 (section 3.2)."""
    tp, p = np.asarray(tp, float), np.asarray(positives, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(p > 0, tp / p, np.nan)
    return out


def accuracy(
    tp: ArrayLike, fp: ArrayLike, positives: ArrayLike, negatives: ArrayLike
) -> np.ndarray:
    """Accuracy (TP + N − FP)/(P + N), nan where P + N ≤ 0 (section 3.2)."""
    tp, fp = np.asarray(tp, float), np.asarray(fp, float)
    p, n = np.asarray(positives, float), np.asarray(negatives, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(p + n > 0, (tp + n - fp) / (p + n), np.nan)
    return out


def precision_recall_accuracy(
    tp: ArrayLike, fp: ArrayLike, positives: ArrayLike, negatives: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision TP/(TP+FP), recall TP/P, accuracy (TP + N − FP)/(P + N) (section 3.2).

    `nan` where a denominator is not positive (e.g. nothing predicted positive), as scikit-learn
    warns and does; callers decide what to print. Totals must broadcast against the counts
    (a scalar, or shape (..., 1) for counts of shape (..., T)). Each is a threshold metric of
    `fedeval.estimate.metric_registry`, whose formulas all take (TP, FP, P, N).
    """
    return (
        precision(tp, fp, positives, negatives),
        recall(tp, fp, positives, negatives),
        accuracy(tp, fp, positives, negatives),
    )


def clip_unit(x: np.ndarray) -> np.ndarray:
    """Clamp an estimated rate into [0, 1]: the last step, after every sum (nan stays nan)."""
    clipped: np.ndarray = np.clip(x, 0.0, 1.0)
    return clipped


def top_region_precision(leaves: np.ndarray, min_mass: np.ndarray | float = 0.0) -> float:
    """Precision of the highest-scoring examples: of the smallest top region of leaves (the last
    k + 1) whose estimated mass exceeds `min_mass[k]` (an array over k, or one value).

    The answer where precision at t is undefined or noise (few or nothing predicted positive):
    precision as t comes down to where the first examples are, the limit of TP/(TP + FP) from
    above. Counts are clamped at 0; the whole histogram's precision (the prevalence) if no region
    is large enough, ½ if nothing is there at all.
    """
    leaves = np.asarray(leaves, dtype=np.float64)
    pos = np.clip(np.cumsum(leaves[1, ::-1]), 0.0, None)  # mass of the top k + 1 leaves
    neg = np.clip(np.cumsum(leaves[0, ::-1]), 0.0, None)
    big = np.flatnonzero(pos + neg > np.asarray(min_mass, dtype=np.float64))
    k = big[0] if len(big) else len(pos) - 1
    mass = pos[k] + neg[k]
    return float(pos[k] / mass) if mass > 0 else 0.5
