"""Fieller's pivot: the 95% interval of a ratio metric μ = A/D (precision, recall, accuracy at a
threshold) from a noisy release, with the noise's spread read from fresh draws on it.

The interval of x = A/D ± z·σ reads σ, the ratio's spread over the re-noised releases, at the
release's own noisy D: where D's noise is large beside D (precision at a threshold with few
examples above it), a release whose D came out high reads a smaller σ, and the interval misses
more often than 5% (onevalue localdp precision at a threshold where it is 0: 0.929 over 1,000
releases). Fieller's pivot does not divide by the noisy D: for each candidate μ the statistic
A − μ·D is a linear sum of the noisy counts with mean A_true − μ·D_true (0 at the truth) and
variance s(μ)² = var(δA) − 2μ·cov(δA, δD) + μ²·var(δD), read from the draws; μ is kept iff
|A − μ·D| ≤ z·s(μ) (Fieller, "Some problems in interval estimation", J. R. Stat. Soc. B 16,
1954; for a ratio of means, e.g. von Luxburg & Franz 2009, "A geometric approach to confidence
sets for ratios: Fieller's theorem, generalizations and bootstrap", Statistica Sinica 19).
(A − μD)² = z²·s(μ)² is a quadratic in μ; where D is significantly above 0 (D > z·sd(δD)) its
two roots bound the set, which holds A/D; otherwise the set is unbounded (or two rays) and
the end falls back to the metric's bound (0 below, 1 above).

With a worst case over where the examples of the threshold's leaf sit (the count corners of
`fedeval.estimate.uncertainty.count_corners`), A − μD is linear in (TP, FP) and, for μ in
[0, 1], lowest at the corner (TP low, FP high) and highest at (TP high, FP low) for every
metric that rises with TP and falls with FP: μ below the low corner's lower root misses with
probability ≤ 2.5% wherever the truth sits in the range, and likewise above the high corner's
upper root, so the interval [low corner's lower root, high corner's upper root] ∩ [0, 1]
covers ≥ 95%. Where the range is one value (a threshold on a leaf edge) and near 0 or 1, the
acceptance region of each μ is Feldman & Cousins' belt (`fedeval.estimate.uncertainty.
bounded_normal_interval`) in the pivot's units, (A − μD)/s(μ) ∈ [y1, y2]: 95% at every μ,
the bounds included (clipping holds a metric on its bound 97.5% of the time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedeval.estimate.uncertainty import BISECTIONS, ROUNDING, Z95, belt_edge


@dataclass(frozen=True)
class RatioPivot:
    """A ratio metric's Fieller pieces at each threshold (each (T,)): numerator and denominator
    at the low corner of the worst case (TP low, FP high) and at the high corner (TP high, FP
    low), and the noise's var(δA), cov(δA, δD), var(δD) over the re-noised releases (zeros
    without noise)."""

    num_low: np.ndarray
    den_low: np.ndarray
    num_high: np.ndarray
    den_high: np.ndarray
    var_num: np.ndarray
    cov: np.ndarray
    var_den: np.ndarray


def noise_moments(
    num_draws: np.ndarray, den_draws: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(var(δA), cov(δA, δD), var(δD)) over the draws (axis 0, n − 1 in the denominator, as
    `fedeval.estimate.uncertainty.noise_sd`); zeros with fewer than two draws."""
    a = np.asarray(num_draws, dtype=np.float64)
    d = np.asarray(den_draws, dtype=np.float64)
    a, d = np.broadcast_arrays(a, d)
    k = a.shape[0]
    if k < 2:
        zero = np.zeros(a.shape[1:])
        return zero, zero, zero
    da, dd = a - a.mean(axis=0), d - d.mean(axis=0)
    return (
        np.sum(da * da, axis=0) / (k - 1),
        np.sum(da * dd, axis=0) / (k - 1),
        np.sum(dd * dd, axis=0) / (k - 1),
    )


def _scaled(
    num: np.ndarray, den: np.ndarray, pivot: RatioPivot
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(significant, x = A/D, var(δA)/D², cov/D², var(δD)/D²): the pivot in the ratio's units,
    where D > z·sd(δD) (elsewhere D is taken as 1, and the values are not used)."""
    with np.errstate(invalid="ignore"):
        significant = np.isfinite(num) & (den > Z95 * np.sqrt(np.maximum(pivot.var_den, 0.0)))
    d = np.where(significant, den, 1.0)
    d2 = d * d
    return significant, num / d, pivot.var_num / d2, pivot.cov / d2, pivot.var_den / d2


def fieller_roots(
    num: np.ndarray, den: np.ndarray, pivot: RatioPivot, z: float = Z95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(significant, low, high): the roots of (x − μ)² = z²·(σA² − 2μ·c + μ²·σD²) in the ratio's
    units (x = A/D, each moment over D²), which bound {μ : |A − μD| ≤ z·s(μ)} where D is
    significantly above 0 (`_scaled`): there 1 − z²σD² > 0, and the quadratic is ≤ 0 at μ = x,
    so both roots are real and x lies between them."""
    significant, x, va, c, vd = _scaled(num, den, pivot)
    z2 = z * z
    a = 1.0 - z2 * vd
    b = x - z2 * c
    root = np.sqrt(np.maximum(b * b - a * (x * x - z2 * va), 0.0))
    a = np.where(significant, a, 1.0)
    return significant, (b - root) / a, (b + root) / a


def ratio_interval(estimate: npt.ArrayLike, pivot: RatioPivot) -> npt.NDArray[np.float64]:
    """95% interval (T, 2) of a ratio metric at each threshold by Fieller's pivot (the module's
    docstring): the low corner's lower root and the high corner's upper root, 0 and 1 where
    that corner's D is not significantly above 0, a rounding slack where the range is wider
    than a point (a truth exactly on its worst case stays in), clipped to [0, 1] and stretched
    to hold the estimate (clipped); on a leaf edge near 0 or 1 the bounded belt
    (`bounded_ratio_interval`)."""
    est = np.clip(np.asarray(estimate, dtype=np.float64), 0.0, 1.0)
    sig_lo, low, _ = fieller_roots(pivot.num_low, pivot.den_low, pivot)
    sig_hi, _, high = fieller_roots(pivot.num_high, pivot.den_high, pivot)
    point = (pivot.num_low == pivot.num_high) & (pivot.den_low == pivot.den_high)
    low = np.where(sig_lo, low - np.where(point, 0.0, ROUNDING), 0.0)
    high = np.where(sig_hi, high + np.where(point, 0.0, ROUNDING), 1.0)
    lo = np.fmin(np.clip(low, 0.0, 1.0), est)
    hi = np.fmax(np.clip(high, 0.0, 1.0), est)
    out = np.stack([lo, hi], axis=-1)
    significant, x, va, c, vd = _scaled(pivot.num_low, pivot.den_low, pivot)
    with np.errstate(invalid="ignore"):
        sd_x = np.sqrt(np.maximum(va - 2 * x * c + x * x * vd, 0.0))
        near = (x - 2 * Z95 * sd_x < 0.0) | (x + 2 * Z95 * sd_x > 1.0)
    bounded = point & significant & near & (sd_x > 0)
    if np.any(bounded):
        ends = bounded_ratio_interval(x[bounded], va[bounded], c[bounded], vd[bounded])
        out[bounded] = np.stack(
            [np.fmin(ends[:, 0], est[bounded]), np.fmax(ends[:, 1], est[bounded])], axis=-1
        )
    return out


def bounded_ratio_interval(
    x: np.ndarray, var_num: np.ndarray, cov: np.ndarray, var_den: np.ndarray
) -> npt.NDArray[np.float64]:
    """{μ in [0, 1] : (x − μ)/σ(μ) in Feldman-Cousins' acceptance region of μ} with
    σ(μ)² = var_num − 2μ·cov + μ²·var_den (the pivot over D², `_scaled`): the belt of
    `fedeval.estimate.uncertainty.bounded_normal_interval` with the spread the pivot gives
    each μ. Each μ's region holds 95% of its pivot's draws, so the set covers 95% at every μ,
    0 and 1 included. Both ends by bisection (the belt's edges rise with μ where σ(μ) is small
    beside 1, which is where the belt differs from ±z); the bounds themselves where the belt
    reaches x there."""
    x = np.asarray(x, dtype=np.float64)

    def sd_at(mu: np.ndarray) -> np.ndarray:
        sd: np.ndarray = np.sqrt(np.maximum(var_num - 2 * mu * cov + mu * mu * var_den, 1e-300))
        return sd

    upper = np.arange(2).reshape(2, 1) == 0  # the lower end reads the belt's upper edge
    xx = np.broadcast_to(x, (2, *x.shape))
    lo, hi = np.zeros(xx.shape), np.ones(xx.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(BISECTIONS):
            mid = (lo + hi) / 2
            reach = belt_edge(mid, sd_at(mid), upper)
            move_up = np.where(upper, reach < xx, reach <= xx)
            lo, hi = np.where(move_up, mid, lo), np.where(move_up, hi, mid)
        zero, one = np.zeros(x.shape), np.ones(x.shape)
        low = np.where(belt_edge(zero, sd_at(zero), np.ones(x.shape, bool)) >= x, 0.0, hi[0])
        high = np.where(belt_edge(one, sd_at(one), np.zeros(x.shape, bool)) <= x, 1.0, lo[1])
    return np.stack([low, high], axis=-1)
