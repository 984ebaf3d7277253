"""The threshold metrics, by name: how each is computed from the counts a release gives at a
threshold t (TP and FP: each class's mass with score ≥ t; P and N: the class totals), how its
95% interval's worst case over the leaf that holds t is bounded, and how it is shown.

Everything that lists threshold metrics iterates `THRESHOLD_METRICS`: the evaluation
(`fedeval.api.evaluate`: estimate, noise spread, interval, exact value), the report's JSON
(`fedeval.views.dicts`: one key per name in each threshold row), the table (`fedeval.views.
terminal`: one column per label), and the quality gates (`fedeval.api.gates`: ``name@t``).
Adding a metric is its formula on (TP, FP, P, N) as a ratio A/D of sums of counts (its
numerator and denominator), its worst case (`worst_case` for one that rises with TP and falls
with FP), and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from fedeval.core.release import ScoreHistogram
from fedeval.estimate.metrics import accuracy, clip_unit, precision, recall, threshold_counts
from fedeval.estimate.ratio_interval import RatioPivot, noise_moments, ratio_interval
from fedeval.estimate.uncertainty import (
    BoundsFormula,
    CountFormula,
    count_corners,
    interval_around,
    noise_sd,
    precision_bounds,
    worst_case,
)

RatioFormula = Callable[[Any, Any, Any, Any], tuple[Any, Any]]
"""A threshold metric's (numerator A, denominator D) from (TP, FP, P, N), each a sum of counts:
the metric is A/D, and its interval Fieller's pivot on them (`fedeval.estimate.ratio_interval`)."""


def precision_ratio(tp: Any, fp: Any, positives: Any, negatives: Any) -> tuple[Any, Any]:
    """Precision = TP/(TP + FP)."""
    return tp, tp + fp


def recall_ratio(tp: Any, fp: Any, positives: Any, negatives: Any) -> tuple[Any, Any]:
    """Recall = TP/P."""
    return tp, positives


def accuracy_ratio(tp: Any, fp: Any, positives: Any, negatives: Any) -> tuple[Any, Any]:
    """Accuracy = (TP + N − FP)/(P + N)."""
    return tp + negatives - fp, positives + negatives


@dataclass(frozen=True)
class ThresholdMetric:
    """One metric of the classifier "positive iff score ≥ t".

    `name`: the report's key in each threshold row, the gate's name before '@' and the key of
    `fedeval.api.evaluate.ThresholdMetrics`; `label`: the table's column (before "± 95%");
    `value`: the formula on (TP, FP, P, N), nan where undefined; `bounds`: its worst case
    (T, 2) from the corners of `fedeval.estimate.uncertainty.count_corners`; `ratio` (optional):
    the same as (numerator, denominator), each rising with TP and falling with FP or not moving
    with them, for Fieller's pivot (without it, the interval is z·σ about the estimate over the
    worst case, `interval_around`).

    `sparse_limit`: where few or no examples are predicted positive the metric is noise
    divided by noise, and is reported as its limit from the top scores with the full [0, 1]
    interval and a note (`fedeval.api.evaluate.sparse_precision`). Otherwise, where a class
    total it divides by is estimated at ≤ 0, it is reported as the uninformative 0.5 with [0, 1]
    and a note naming it."""

    name: str
    label: str
    value: CountFormula
    bounds: BoundsFormula
    sparse_limit: bool = False
    ratio: RatioFormula | None = None


THRESHOLD_METRICS: tuple[ThresholdMetric, ...] = (
    ThresholdMetric(
        "precision", "precision", precision, precision_bounds, True, ratio=precision_ratio
    ),
    ThresholdMetric("recall", "recall", recall, worst_case(recall), ratio=recall_ratio),
    ThresholdMetric("accuracy", "accuracy", accuracy, worst_case(accuracy), ratio=accuracy_ratio),
)
"""In the order the report's threshold rows and the table's columns show them."""

THRESHOLD_METRIC_NAMES: tuple[str, ...] = tuple(m.name for m in THRESHOLD_METRICS)


def threshold_values(hist: ScoreHistogram, unit_thresholds: np.ndarray) -> dict[str, np.ndarray]:
    """Each threshold metric's estimate at each threshold (in [0, 1]; nan where undefined), by
    name: its formula on the leaves' counts ≥ t (uniform inside the leaf that holds t) and the
    release's class totals."""
    tp, fp = threshold_counts(hist.leaves, unit_thresholds)
    return {
        m.name: clip_unit(m.value(tp, fp, hist.positives, hist.negatives))
        for m in THRESHOLD_METRICS
    }


class ThresholdParts(NamedTuple):
    """The parts of one threshold metric's interval at each threshold: the noise σ (T,) (the
    metric's spread over the re-noised releases), its worst-case bounds (T, 2) (the formula at
    the corners of `count_corners`), and its Fieller pieces (`RatioPivot`): `threshold_interval`
    makes the interval of them; a difference of two releases reads σ and the bounds."""

    sd: np.ndarray
    bounds: np.ndarray
    pivot: RatioPivot | None


def threshold_parts_of(
    leaves: np.ndarray,
    draws: np.ndarray | None,
    unit_thresholds: np.ndarray,
    noisy_counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[ThresholdParts, ...]:
    """`ThresholdParts` of each threshold metric, in the registry's order, from consistent
    leaves (2, L) and fresh noise draws on them (draws, 2, L) or None: σ is the metric's spread
    over the re-noised releases (`noise_sd`), the bounds its formula at the corners of
    `count_corners`, the pivot its numerator and denominator at the low and high corners and
    their noise's moments over the same re-noised releases (zeros without draws).
    `noisy_counts`: `threshold_counts(leaves + draws, unit_thresholds)` where already taken."""
    corners = count_corners(leaves, unit_thresholds)
    tp_lo, tp_hi, fp_lo, fp_hi, p_total, n_total = corners
    zero = np.zeros(len(unit_thresholds))
    sds = [zero] * len(THRESHOLD_METRICS)
    moments = [(zero, zero, zero)] * len(THRESHOLD_METRICS)
    if draws is not None:
        noisy = leaves + draws
        if noisy_counts is None:
            noisy_counts = threshold_counts(noisy, unit_thresholds)
        tp, fp = noisy_counts
        p = noisy[..., 1, :].sum(axis=-1)[..., None]
        n = noisy[..., 0, :].sum(axis=-1)[..., None]
        sds = [noise_sd(m.value(tp, fp, p, n)) for m in THRESHOLD_METRICS]
        moments = [
            moments[i] if m.ratio is None else noise_moments(*m.ratio(tp, fp, p, n))
            for i, m in enumerate(THRESHOLD_METRICS)
        ]
    out = []
    for sd, moment, m in zip(sds, moments, THRESHOLD_METRICS, strict=True):
        if m.ratio is None:
            out.append(ThresholdParts(sd, m.bounds(*corners), None))
            continue
        a_lo, d_lo = m.ratio(tp_lo, fp_hi, p_total, n_total)
        a_hi, d_hi = m.ratio(tp_hi, fp_lo, p_total, n_total)
        a_lo, d_lo, a_hi, d_hi = (
            np.broadcast_to(np.asarray(v, dtype=np.float64), zero.shape)
            for v in (a_lo, d_lo, a_hi, d_hi)
        )
        pivot = RatioPivot(a_lo, d_lo, a_hi, d_hi, *moment)
        out.append(ThresholdParts(sd, m.bounds(*corners), pivot))
    return tuple(out)


def threshold_interval(estimate: npt.ArrayLike, parts: ThresholdParts) -> npt.NDArray[np.float64]:
    """95% interval (T, 2) of a threshold metric at each threshold from its estimate and parts
    (`threshold_parts_of`): Fieller's pivot over the worst case of the threshold's leaf
    (`fedeval.estimate.ratio_interval.ratio_interval`). Without noise (no draws: federated)
    the pivot's roots are the range's ends, and the interval is the range around the estimate
    (`interval_around` with σ = 0), computed as it always was; with noise, the hull of the
    pivot's interval and the ratio's σ-interval (`interval_around`): both rest on normal noise,
    and at few examples under localdp each misses where the other holds."""
    pivot = parts.pivot
    if pivot is None:  # a metric registered without its ratio
        return interval_around(np.asarray(estimate, dtype=np.float64), parts.sd, parts.bounds)
    est = np.asarray(estimate, dtype=np.float64)
    out = ratio_interval(estimate, pivot)
    noiseless = (pivot.var_num == 0) & (pivot.var_den == 0) & (parts.sd == 0)
    if np.any(noiseless):
        out[noiseless] = interval_around(est[noiseless], 0.0, parts.bounds[noiseless])
    # The hull with the ratio's own σ-interval where there is noise: each rests on normal
    # noise, which a few examples' randomised reports are not (300 rows under localdp ε = 5:
    # recall at t = 0.3 held 0.916-0.923 by the pivot alone, 0.938-0.943 by the σ-interval,
    # while at a precision of 0 the σ-interval alone held 0.929 and the pivot 0.947).
    noisy = ~noiseless
    if np.any(noisy):
        sigma = interval_around(est[noisy], parts.sd[noisy], parts.bounds[noisy])
        out[noisy, 0] = np.fmin(out[noisy, 0], sigma[:, 0])
        out[noisy, 1] = np.fmax(out[noisy, 1], sigma[:, 1])
    return out
