"""Precision where few or no examples are predicted positive: where a threshold's precision
is barely determined by a release, and the value reported there instead (the precision of the
top region of leaves that holds enough examples), from consistent leaves and noise draws."""

from __future__ import annotations

import numpy as np

from fedeval.estimate.metrics import threshold_counts, top_region_precision
from fedeval.estimate.uncertainty import count_bounds, noise_sd

SPARSE_SDS = 2.0
"""Precision is barely determined where the predicted-positive count TP + FP, at its lowest
over where the examples of t's leaf sit, is at most this many noise standard deviations of it
(or ≤ 0 without noise)."""


def sparse_precision_of(
    leaves: np.ndarray,
    draws: np.ndarray | None,
    unit_thresholds: np.ndarray,
    noisy_counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, float, np.ndarray]:
    """`sparse_precision` from consistent leaves (2, L) and fresh noise draws on them
    (draws, 2, L) or None; `noisy_counts` as `sparse_thresholds` takes them."""
    sparse, predicted = sparse_thresholds(leaves, draws, unit_thresholds, noisy_counts)
    region_sd: float | np.ndarray = 0.0
    if draws is not None:
        region_sd = noise_sd(np.cumsum(draws.sum(axis=1)[:, ::-1], axis=-1))
    return sparse, top_region_precision(leaves, SPARSE_SDS * region_sd), predicted


def sparse_thresholds(
    leaves: np.ndarray,
    draws: np.ndarray | None,
    unit_thresholds: np.ndarray,
    noisy_counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Where `sparse_precision_of` calls the precision sparse, and the predicted-positive
    counts: what the planner asks of every release it draws (without the top region's
    precision and the spread of its counts, a third of the work). `noisy_counts`:
    `threshold_counts(leaves + draws, unit_thresholds)` where already taken."""
    tp, fp = threshold_counts(leaves, unit_thresholds)
    low = count_bounds(leaves[1], unit_thresholds)[0] + count_bounds(leaves[0], unit_thresholds)[0]
    if draws is None:
        sd = np.zeros_like(low)
    else:
        if noisy_counts is None:
            noisy_counts = threshold_counts(leaves + draws, unit_thresholds)
        tp_d, fp_d = noisy_counts
        sd = noise_sd(tp_d + fp_d)
    sparse = ~(low > SPARSE_SDS * sd)
    return sparse, tp + fp


def sparse_note(threshold: float, predicted: float) -> str:
    """The reason shown with a barely determined precision."""
    return (
        f"few or no examples score ≥ {threshold:.4g} (≈ {max(predicted, 0.0):,.0f} predicted "
        "positive): precision is barely determined"
    )
