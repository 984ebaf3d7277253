"""A release's 95% interval kept in its parts, so that a difference of two releases can combine
each part as its nature requires (`difference_parts`).

Every bias-aware interval of the curve areas (`fedeval.api.evaluate.auc_interval`,
`fedeval.estimate.average_precision.leaf_ap_interval_parts`) is
`bias_aware_interval(low, high, sd)`:

- [low, high], a **range** the release cannot tell apart: the discretisation readings (ties or
  a smooth density inside a leaf, the Richardson step and, for the AUC, its Romberg step
  (`fedeval.estimate.richardson.romberg_step`), the monotone fit's bias) and the worst
  case of the examples that depart from smooth. These are deterministic errors of the
  reading, not noise: the truth sits anywhere in the range, the same way on every release of
  the same data;
- **noise_sd**, the privacy noise's spread (re-noising the release): fresh and independent on
  every release;
- **order_sd**, the spread of the order of the examples inside a leaf, read as random
  (Mann-Whitney for the AUC, `shuffled_ap` for the AP): a property of the data, not of the
  release;
- **step_sd**, the sampling spread of a smooth correction read from the same data (the AUC's
  Richardson step, `fedeval.estimate.richardson.step_variance`; 0 where none is counted):
  also the data's.

`sd` is what the release's own interval uses (√(noise² + order² + step²), as each builder
combines them, kept bit for bit). `hull`, where set, holds the value for any data consistent
with the (exact) counts: the difference of two hulls bounds the difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedeval.estimate.metric_registry import ThresholdParts
from fedeval.estimate.richardson import (
    richardson_shares,
    romberg_step,
    shrunk_step,
    step_variance,
)
from fedeval.estimate.smoothness import (
    RICHARDSON_MIN_CELLS,
    auc_parts,
    departures,
)
from fedeval.estimate.uncertainty import ROUNDING, bias_aware_interval, noise_sd


@dataclass(frozen=True)
class IntervalParts:
    """One estimate's 95% interval as bias_aware_interval(low, high, sd) (module docstring)."""

    low: float
    high: float
    sd: float
    noise_sd: float
    order_sd: float
    hull: tuple[float, float] | None = None
    step_sd: float = 0.0

    def interval(self) -> np.ndarray:
        """The release's own interval (unclipped): (lo, hi)."""
        return bias_aware_interval(self.low, self.high, self.sd)


def leaf_auc_parts(
    leaves: np.ndarray,
    draws: np.ndarray | None,
    edges: np.ndarray | None = None,
    departing: np.ndarray | None = None,
) -> IntervalParts:
    """The parts of the leaves' AUC interval (`fedeval.api.evaluate.auc_interval`, whose
    docstring gives the argument): range min/max(raw, R₁, R₂) ∓ the departing pairs'
    half-width, with R₁ = raw − bias (the Richardson step) and R₂ = R₁ + (R₁(h) − R₁(h−1))/15
    (the Romberg step, `romberg_step`, on the smooth parts; R₁ where the parents number fewer
    than RICHARDSON_MIN_CELLS; with noise draws, less ROMBERG_SDS of its re-noised spread,
    `shrunk_step`, and so on each draw); order variance the smooth leaves' Mann-Whitney
    Σ pᵢnᵢ(pᵢ + nᵢ + 1)/12/(PN)² plus the Richardson step's sampling variance
    (`step_variance`, on the smooth parts), noise the largest re-noised spread of the range's
    six ends (raw, R₁ and R₂, each ∓ the half-width). `departing`: `departures` of these
    leaves, draws and edges where already computed.

    R₂ is the range's far end where the Richardson step has not reached its O(w²) rate: scores
    squeezed into [0.45, 0.55] with thresholds 0.47 … 0.53 fill a few dozen of 256 leaves, R₁
    still errs by 1.9e-5 (0.7σ at 100k rows; its error falls 26-fold from h = 7 to h = 8, not
    16-fold) and R₂ overshoots by 1.3e-5, so the truth sits inside [R₁, R₂]: the interval held
    it in 0.850 of 400 federated data draws with [raw, R₁], 0.983 with [raw, R₂], 1.11× as
    wide (`benchmarks/hard.py --quick --families squeezed --models federated --height 8`).
    Where R₁ has converged R₁(h) − R₁(h−1) is its sampling spread alone (a smooth density's
    expected counts: 2e-10 at 256 leaves), a sixteenth of which moves the far end by ~0.15σ
    of exact leaves. Under DP noise the step is mostly noise (distdp ε = 0.5, 38,000 rows, 2%
    positives, 16 leaves: |step| 0-1.7× its re-noised spread), and counted in full it widened
    the planner's difference of two such releases 2.6% (`fedeval.api.compare_plan`); shrunk by
    2 spreads it counts where the release shows it beyond its noise."""
    if departing is None:
        departing = departures(leaves, draws, edges, RICHARDSON_MIN_CELLS)
    shares = richardson_shares(edges)
    coarse = None if edges is None else richardson_shares(np.asarray(edges)[::2])
    romberg = _romberg(leaves, departing, shares, coarse)
    raw, bias, half, order_variance = (
        float(x) for x in auc_parts(leaves, departing, shares=shares)
    )
    ends: list[np.ndarray] = []
    if draws is not None:
        resampled = leaves + draws
        moved = departures(leaves, draws, edges, RICHARDSON_MIN_CELLS, resampled)
        r, b, w, _ = auc_parts(resampled, moved, order_variance=False, shares=shares)
        steps = _romberg(resampled, moved, shares, coarse)
        spread = float(noise_sd(steps)) if len(steps) > 1 else 0.0
        spread = spread if math.isfinite(spread) else 0.0
        romberg = shrunk_step(romberg, spread)
        f = r - b + shrunk_step(steps, spread)
        ends = [noise_sd(x) for x in (r - w, r - b - w, f - w, r + w, r - b + w, f + w)]
    far = raw - bias + float(romberg)
    # A truth exactly at the worst case (all of a leaf on one side) must not fall out by rounding.
    slack = half + ROUNDING if half > 0 else 0.0
    lo, hi = min(raw, raw - bias, far) - slack, max(raw, raw - bias, far) + slack
    # The Richardson step's own sampling error (a data property, as the order inside leaves).
    clamped = np.clip(leaves, 0.0, None)
    smooth = clamped - np.minimum(departing, clamped)
    pairs = clamped[0].sum() * clamped[1].sum()
    step = float(step_variance(smooth[0], smooth[1], shares, pairs))
    variance = order_variance + step
    noise_variance = 0.0
    if ends:
        noise_variance = float(np.square(np.fmax.reduce(ends)))
        variance += noise_variance
    return IntervalParts(
        lo,
        hi,
        float(np.sqrt(variance)),
        math.sqrt(noise_variance),
        math.sqrt(order_variance),
        step_sd=math.sqrt(step),
    )


def _romberg(
    leaves: np.ndarray,
    departing: np.ndarray,
    shares: np.ndarray | None,
    coarse: np.ndarray | None,
) -> np.ndarray:
    """The Romberg step (R₁(h) − R₁(h−1))/15 (`romberg_step`) of the smooth parts of leaves
    (..., 2, L) (less their `departing` examples, as `auc_parts` reads them), over the noisy
    P·N as the Richardson step's; 0 where the parents number fewer than RICHARDSON_MIN_CELLS
    (the coarse level's own step is not read there) or L is not a multiple of 4. `shares`,
    `coarse`: `richardson_shares` of the leaves' and of their parents' edges (None: ⅓)."""
    leaves = np.asarray(leaves, dtype=np.float64)
    n_leaves = leaves.shape[-1]
    if n_leaves // 2 < RICHARDSON_MIN_CELLS or n_leaves % 4:
        return np.zeros(leaves.shape[:-2])
    # leaves − min(departing, max(leaves, 0)), each step written over the last (the same values)
    clamped = np.clip(leaves, 0.0, None)
    same = np.shape(departing) == clamped.shape
    smooth = np.minimum(departing, clamped, out=clamped if same else None)
    np.subtract(leaves, smooth, out=smooth)
    pairs = leaves[..., 0, :].sum(axis=-1) * leaves[..., 1, :].sum(axis=-1)
    return romberg_step(smooth[..., 0, :], smooth[..., 1, :], shares, coarse, pairs)


def difference_parts(baseline: IntervalParts, candidate: IntervalParts) -> IntervalParts:
    """The parts of candidate − baseline for two releases of the same examples.

    - ranges add linearly: [low_c − high_b, high_c − low_b]. They are deterministic and the
      two releases' readings can err the same way or opposite ways (one model's scores tied
      inside a leaf, the other's smooth; one ordered within its leaves, the other reversed:
      `tests/test_compare_limits.py` builds both from identical releases);
    - noise in quadrature: each release draws its own, independently (σ² of a difference of
      independent estimates is the sum);
    - order spreads add linearly, σ_b + σ_c: both are the order inside leaves of the same
      examples, and the releases do not hold how the two orders relate. Two correlated models
      err alike (their spreads cancel in the difference), but a candidate whose order inside
      each leaf reverses the baseline's gives the same releases and errs by −2× the baseline
      (correlation −1, the Cauchy–Schwarz bound |cov| ≤ σ_bσ_c);
    - step spreads add linearly too, for the same reason (each Richardson step is read from
      its own model's leaves of the same examples), apart from the order's: given the counts
      the order inside the leaves is independent of the step read from them.

    The difference's interval is then bias-aware over that range with
    sd = √(noise² + order² + step²): it covers at ≥ 95% wherever both truths sit in their
    ranges, and exactly 95% where they sit at opposite ends with the spreads at correlation −1
    (where the two steps' errors are alike, as for two models with the same leaves, more). The
    two hulls (exact counts) bound the difference: [hull_c lo − hull_b hi, hull_c hi − hull_b
    lo]."""
    noise = math.hypot(baseline.noise_sd, candidate.noise_sd)
    order = baseline.order_sd + candidate.order_sd
    step = baseline.step_sd + candidate.step_sd
    hull = None
    if baseline.hull is not None and candidate.hull is not None:
        hull = (candidate.hull[0] - baseline.hull[1], candidate.hull[1] - baseline.hull[0])
    return IntervalParts(
        candidate.low - baseline.high,
        candidate.high - baseline.low,
        math.hypot(noise, order, step),
        noise,
        order,
        hull,
        step,
    )


def difference_interval(baseline: IntervalParts, candidate: IntervalParts) -> tuple[float, float]:
    """95% interval of candidate − baseline from both releases' parts (`difference_parts`),
    inside the hulls' difference where both have one, widened by ROUNDING and clipped to
    [−1, 1]."""
    d = difference_parts(baseline, candidate)
    sd = d.sd if math.isfinite(d.sd) else 0.0
    lo, hi = (float(x) for x in bias_aware_interval(d.low, d.high, sd))
    if d.hull is not None:
        lo, hi = max(lo, d.hull[0]), min(hi, d.hull[1])
    return max(lo - ROUNDING, -1.0), min(hi + ROUNDING, 1.0)


@dataclass(frozen=True, eq=False)
class ReleaseParts:
    """The parts of one release's intervals, kept where the evaluation computes them so that a
    difference of two releases reuses them instead of reading the release again: the AUC's and
    the 'leaves' AP's (None where not computed: the 'pchip' curves), and at each threshold
    (precision, recall, accuracy) × (noise σ (T,), worst-case bounds (T, 2), Fieller pieces)
    (`fedeval.api.evaluate.threshold_parts`)."""

    auc: IntervalParts
    ap: IntervalParts | None
    thresholds: tuple[ThresholdParts, ...]
