"""95% intervals for estimates made from a private release, from the release alone.

Two sources of error, added as variances:
- privacy noise: its distribution is known, so fresh noise is drawn on the release
  (`ScoreHistogram.noise_draws`, a parametric bootstrap through constrained inference) and every
  estimate is recomputed; their spread is the noise's;
- discretisation: where a threshold falls inside a leaf (or a positive and a negative share a
  leaf), the estimate takes the examples as spread uniformly over it. That is the expectation
  when their positions inside the leaf are unknown, and its variance is binomial: c·u(1 − u)
  examples for a leaf of c examples cut at fraction u; for AUC, the Mann-Whitney variance of the
  pairs that share a leaf, Σ pᵢnᵢ(pᵢ + nᵢ + 1)/12.
Intervals are estimate ± z·√(noise variance + discretisation variance), clipped to [0, 1].
"""

from __future__ import annotations

import numpy as np

from fedeval.estimate.metrics import precision_recall_accuracy, threshold_counts

Z95 = 1.959963984540054
"""The two-sided 95% normal quantile."""

DEFAULT_DRAWS = 200
"""Fresh noise draws per run: the interval's half-width is then known to about ±5%."""

REFIT_DRAWS = 20
"""Draws used where each one means rebuilding a curve or refitting a map: those intervals are
conservative hulls, where a noise spread known to about ±16% is enough."""


def within_leaf_count_variance(leaves: np.ndarray, unit_thresholds: np.ndarray) -> np.ndarray:
    """Variance of the count above each threshold from the unknown positions inside the leaf
    that holds it: c·u(1 − u), with c the (clamped) leaf count and u the cut fraction."""
    n = leaves.shape[-1]
    pos = np.clip(unit_thresholds, 0.0, 1.0) * n
    j = np.minimum(np.floor(pos).astype(np.int64), n - 1)
    u = pos - j
    c = np.clip(leaves[..., j], 0.0, None)
    return c * u * (1.0 - u)


def within_bucket_auc_variance(negatives: np.ndarray, positives: np.ndarray) -> float:
    """Variance of AUC from the order of pairs that share a bucket: Σ pᵢnᵢ(pᵢ + nᵢ + 1)/12 over
    (P·N)² (the Mann-Whitney variance of each bucket under an unknown order)."""
    p = np.clip(positives, 0.0, None)
    n = np.clip(negatives, 0.0, None)
    total = p.sum() * n.sum()
    return float(np.sum(p * n * (p + n + 1)) / 12 / total**2) if total > 0 else 0.0


def threshold_metric_variance(
    leaves: np.ndarray, unit_thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Discretisation variance of precision, recall and accuracy at each threshold (delta
    method on the within-leaf variances of TP and FP, which are independent)."""
    v_tp = within_leaf_count_variance(leaves[1], unit_thresholds)
    v_fp = within_leaf_count_variance(leaves[0], unit_thresholds)
    tp, fp = threshold_counts(leaves, unit_thresholds)
    p_total = max(float(leaves[1].sum()), 1e-12)
    n_total = max(float(leaves[0].sum()), 1e-12)
    predicted = np.maximum(tp + fp, 1e-12)
    v_precision = (fp**2 * v_tp + tp**2 * v_fp) / predicted**4
    v_recall = v_tp / p_total**2
    v_accuracy = (v_tp + v_fp) / (p_total + n_total) ** 2
    return v_precision, v_recall, v_accuracy


def threshold_metrics(
    leaves: np.ndarray, unit_thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall, accuracy at each threshold for leaves of shape (..., 2, L)."""
    tp, fp = threshold_counts(leaves, unit_thresholds)
    p = leaves[..., 1, :].sum(axis=-1)[..., None]
    n = leaves[..., 0, :].sum(axis=-1)[..., None]
    return precision_recall_accuracy(tp, fp, p, n)


def interval(estimate, noise_sd, extra_variance=0.0, extra_width=0.0) -> np.ndarray:
    """estimate ± (z·√(noise_sd² + extra_variance) + extra_width), clipped to [0, 1]; the last
    axis holds (lo, hi)."""
    half = Z95 * np.sqrt(np.asarray(noise_sd) ** 2 + extra_variance) + extra_width
    lo = np.clip(np.asarray(estimate) - half, 0.0, 1.0)
    hi = np.clip(np.asarray(estimate) + half, 0.0, 1.0)
    return np.stack([lo, hi], axis=-1)


def noise_sd(values: np.ndarray) -> np.ndarray:
    """Spread of an estimate over the noise draws (axis 0), ignoring undefined draws."""
    return np.nanstd(values, axis=0, ddof=1)
