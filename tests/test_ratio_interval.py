"""Fieller's pivot for precision, recall and accuracy at a threshold (issue 25): the interval
does not read the noise's spread at the release's own noisy denominator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedeval.estimate.metric_registry import (
    THRESHOLD_METRICS,
    ThresholdParts,
    precision_ratio,
    threshold_interval,
    threshold_parts_of,
)
from fedeval.estimate.metrics import clip_unit, precision, threshold_counts
from fedeval.estimate.ratio_interval import RatioPivot, fieller_roots, noise_moments
from fedeval.estimate.uncertainty import (
    Z95,
    count_bounds,
    interval_around,
    noise_sd,
    precision_bounds,
)

RELEASES = 10_000
DRAWS = 200
# The pivot's variance is read from 200 draws: at the bound the belt accepts w ≤ 1.645 of a
# Student t with 199 df, not a normal (P(t₁₉₉ > 1.645) = 0.0508): 0.002 on top of 4 binomial
# standard errors of 10,000 releases (±0.0087).
TOLERANCE = 4 * math.sqrt(0.95 * 0.05 / RELEASES) + 0.002


@pytest.mark.parametrize("truth", [0.0, 1.0])
def test_precision_on_its_bound_is_held_95_percent_where_its_denominator_is_noisy(truth):
    """Precision at a threshold on a leaf edge where it is exactly 0 (no positive above t, 6
    negatives) or exactly 1 (6 positives, no negative): the predicted-positive count D is 6
    with noise of sd 1.1, so D/σ_D ≈ 5 (never sparse). The old interval, the estimate's spread
    over draws around the release's own counts in the bounded belt, reads a small σ wherever
    the noisy D came out large, and holds 0.92; Fieller's pivot tests A − μD, whose spread does
    not depend on the release, and holds 0.95 (10,000 releases, fixed seed)."""
    rng = np.random.default_rng(25)
    # (TP, FP) and their noise sds: the count that is 0 noisier, as the mirror of each other.
    (tp_true, fp_true), (sd_tp, sd_fp) = (
        ((0.0, 6.0), (1.0, 0.5)) if truth == 0 else ((6.0, 0.0), (0.5, 1.0))
    )
    tp = tp_true + sd_tp * rng.standard_normal(RELEASES)
    fp = fp_true + sd_fp * rng.standard_normal(RELEASES)
    draw_tp = tp + sd_tp * rng.standard_normal((DRAWS, RELEASES))
    draw_fp = fp + sd_fp * rng.standard_normal((DRAWS, RELEASES))
    estimate = clip_unit(precision(tp, fp, 0, 0))
    at_release = precision_bounds(tp, tp, fp, fp, 0.0, 0.0)  # a point: t on a leaf edge
    sd = noise_sd(precision(draw_tp, draw_fp, 0, 0))
    num, den = precision_ratio(tp, fp, 0, 0)
    pivot = RatioPivot(num, den, num, den, *noise_moments(*precision_ratio(draw_tp, draw_fp, 0, 0)))
    new = threshold_interval(estimate, ThresholdParts(sd, at_release, pivot))
    old = interval_around(estimate, sd, at_release)
    held_new = np.mean((new[:, 0] <= truth) & (truth <= new[:, 1]))
    held_old = np.mean((old[:, 0] <= truth) & (truth <= old[:, 1]))
    assert abs(held_new - 0.95) <= TOLERANCE, held_new
    assert held_old < 0.95 - TOLERANCE, held_old  # what main's interval held on these releases
    assert np.all((0.0 <= new[:, 0]) & (new[:, 0] <= estimate) & (estimate <= new[:, 1]))
    assert np.all(new[:, 1] <= 1.0)


def test_fieller_roots_bound_the_set_of_ratios_the_pivot_accepts():
    """{μ : |A − μD| ≤ z·s(μ)} on a fine grid is [low, high] where D is significantly above 0
    (precision-, recall- and accuracy-like moments, a covariance of either sign); where it is
    not (D ≤ z·sd(δD)), the interval's end there falls back to the bound."""
    rng = np.random.default_rng(7)
    n = 60
    den = rng.uniform(5.0, 50.0, n)
    num = den * rng.uniform(-0.2, 1.2, n)
    var_num, var_den = rng.uniform(0.5, 20.0, n), rng.uniform(0.5, 20.0, n)
    cov = rng.uniform(-0.9, 0.9, n) * np.sqrt(var_num * var_den)
    pivot = RatioPivot(num, den, num, den, var_num, cov, var_den)
    significant, low, high = fieller_roots(num, den, pivot)
    mu = np.linspace(-3.0, 4.0, 20_001)[:, None]
    accepted = np.abs(num - mu * den) <= Z95 * np.sqrt(var_num - 2 * mu * cov + mu**2 * var_den)
    step = mu[1, 0] - mu[0, 0]
    for i in np.flatnonzero(significant & (low > -3) & (high < 4)):
        grid = mu[accepted[:, i], 0]
        assert grid.min() == pytest.approx(low[i], abs=step) and grid.max() == pytest.approx(
            high[i], abs=step
        )
        assert np.all(np.diff(grid) < 1.5 * step)  # one interval, holding A/D
        assert low[i] <= num[i] / den[i] <= high[i]
    assert np.array_equal(significant, den > Z95 * np.sqrt(var_den))
    weak = RatioPivot(num[:1], 0.5 * np.sqrt(var_den[:1]), num[:1], den[:1], *(
        v[:1] for v in (var_num, cov, var_den)
    ))  # fmt: skip
    parts = ThresholdParts(np.ones(1), np.array([[0.0, 1.0]]), weak)
    assert threshold_interval(np.array([0.5]), parts)[0, 0] == 0.0


def test_without_noise_the_interval_is_the_worst_case_range_as_before():
    """Federated (no draws): the interval is the worst case over the threshold's leaf around the
    estimate, bit for bit as `interval_around` with σ = 0 made it, and the pivot's corners are
    each metric's bounds."""
    rng = np.random.default_rng(3)
    leaves = rng.integers(0, 40, size=(2, 16)).astype(np.float64)
    unit = np.array([0.0, 0.1, 0.25, 0.33, 0.5, 0.77, 0.999, 1.0])
    for m, parts in zip(THRESHOLD_METRICS, threshold_parts_of(leaves, None, unit), strict=True):
        tp, fp = threshold_counts(leaves, unit)
        estimate = clip_unit(m.value(tp, fp, leaves[1].sum(), leaves[0].sum()))
        got = threshold_interval(estimate, parts)
        assert np.array_equal(got, interval_around(estimate, 0.0, parts.bounds), equal_nan=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            corners = np.stack([parts.pivot.num_low / parts.pivot.den_low,
                                parts.pivot.num_high / parts.pivot.den_high], axis=-1)  # fmt: skip
        defined = (parts.pivot.den_low > 0) & (parts.pivot.den_high > 0)  # else [0, 1]
        np.testing.assert_allclose(corners[defined], parts.bounds[defined], rtol=1e-12)


def test_the_pivot_reads_the_draws_moments_at_the_worst_cases_corners():
    """`threshold_parts_of`'s pivot: numerator and denominator at (TP low, FP high) and (TP
    high, FP low) of the threshold's leaf, and the covariance of the re-noised releases'
    numerators and denominators; a threshold inside a leaf widens the interval beyond the
    estimate ± the pivot's noise on both sides."""
    rng = np.random.default_rng(9)
    leaves = rng.uniform(50.0, 200.0, size=(2, 8))
    draws = rng.normal(0.0, 3.0, size=(DRAWS, 2, 8))
    unit = np.array([0.25, 0.3])  # an edge, then inside the third leaf
    (tp_lo, tp_hi), (fp_lo, fp_hi) = (count_bounds(leaves[c], unit) for c in (1, 0))
    tp_d, fp_d = threshold_counts(leaves + draws, unit)
    p_d, n_d = (leaves + draws)[:, 1].sum(-1)[:, None], (leaves + draws)[:, 0].sum(-1)[:, None]
    for m, parts in zip(THRESHOLD_METRICS, threshold_parts_of(leaves, draws, unit), strict=True):
        p, n = leaves[1].sum(), leaves[0].sum()
        pv = parts.pivot
        np.testing.assert_allclose(
            (pv.num_low, pv.den_low), np.broadcast_arrays(*m.ratio(tp_lo, fp_hi, p, n))
        )
        np.testing.assert_allclose(
            (pv.num_high, pv.den_high), np.broadcast_arrays(*m.ratio(tp_hi, fp_lo, p, n))
        )
        a, d = np.broadcast_arrays(*m.ratio(tp_d, fp_d, p_d, n_d))
        for i in range(len(unit)):
            c = np.cov(a[:, i], d[:, i])
            np.testing.assert_allclose(
                (pv.var_num[i], pv.cov[i], pv.var_den[i]),
                (c[0, 0], c[0, 1], c[1, 1]),
                rtol=1e-9,
                atol=1e-12,
            )
        ci = threshold_interval(m.value(*threshold_counts(leaves, unit), p, n), parts)
        assert np.all(ci[1, 1] - ci[1, 0] > ci[0, 1] - ci[0, 0])
        assert np.all((ci[:, 0] <= parts.bounds[:, 0]) & (parts.bounds[:, 1] <= ci[:, 1]))
