"""The noisy AP interval's two ends, each read with its own noise (`end_spreads`,
`ends_interval`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr

from fedeval.estimate.ap_order import shuffled_ap
from fedeval.estimate.average_precision import (
    AP_DRAWS,
    end_spreads,
    ends_interval,
    leaf_ap_interval_parts,
)
from fedeval.estimate.roc_pr import leaf_ap, leaf_tails, within_leaf_bounds
from fedeval.estimate.smoothness import rough_ap_reach, with_end_leaves
from fedeval.estimate.uncertainty import bias_aware_interval, noise_sd


def test_ends_interval_misses_at_most_5_percent_with_the_truth_at_either_end():
    # Exact miss probabilities (no simulation): with the truth at one end of a range of
    # half-width h, a miss on that side is that end's noise beyond its extension, a miss on the
    # other side the other end's noise beyond the whole range and its extension; their sum
    # (a bound whatever the two noises' correlation) must stay within 5% for every h and pair
    # of spreads. Reading t at the smaller spread instead misses up to 9.2% at the quieter end.
    half = np.geomspace(1e-3, 10.0, 24)[:, None, None]
    sd_low = np.geomspace(0.2, 5.0, 9)[None, :, None]
    sd_high = np.geomspace(0.2, 5.0, 9)[None, None, :]
    h, s_lo, s_hi = np.broadcast_arrays(half, sd_low, sd_high)
    worst = 0.0
    for hh, a, b in zip(h.ravel(), s_lo.ravel(), s_hi.ravel(), strict=True):
        lo, hi = ends_interval(-hh, hh, a, b)
        ext_lo, ext_hi = -hh - lo, hi - hh
        at_low = (1 - ndtr(ext_lo / a)) + ndtr(-(2 * hh + ext_hi) / b)
        at_high = (1 - ndtr(ext_hi / b)) + ndtr(-(2 * hh + ext_lo) / a)
        worst = max(worst, at_low, at_high)
    assert worst <= 0.05 + 1e-9, worst
    assert worst > 0.0499  # and no wider than it must be: 5% where the truth sits at an end


def test_ends_interval_is_the_symmetric_one_where_the_spreads_are_equal():
    for low, high, sd in ((0.3, 0.31, 0.004), (0.5, 0.5, 0.01), (0.2, 0.6, 0.0)):
        assert np.array_equal(ends_interval(low, high, sd, sd), bias_aware_interval(low, high, sd))
    lo, hi = ends_interval(0.3, 0.31, 0.006, 0.002)  # the quieter end reaches less far
    sym_lo, sym_hi = bias_aware_interval(0.3, 0.31, 0.006)
    assert lo == pytest.approx(sym_lo, abs=1e-15) and 0.31 < hi < sym_hi


def test_ap_interval_reads_each_ends_reach_noise_on_its_own_side():
    # Smooth Beta(2, 1)/(1, 2) scores, 30% positives, at 128 leaves under noise of spread 10 per
    # count: the top leaf's ~9 negatives may all sit above its ~1,400 positives, a reach below
    # the integral rule whose noise is the top leaf's; the reach above is quieter. Before, both
    # ends took the larger reach noise; now the high end takes its own (a narrower high end).
    rng = np.random.default_rng(5)
    n, cells = 100_000, 128
    y = rng.random(n) < 0.3
    s = np.where(y, rng.beta(2, 1, n), rng.beta(1, 2, n))
    leaves = np.stack([np.histogram(s[y == c], cells, (0, 1))[0] for c in (False, True)])
    release = leaves.astype(float) + rng.normal(0.0, 10.0, (2, cells))
    draws = rng.normal(0.0, 10.0, (AP_DRAWS, 2, cells))
    estimate = leaf_ap(*leaf_tails(release), "integral")
    _, _, ap_lo, ap_hi = within_leaf_bounds(release)
    departing = with_end_leaves(np.zeros((2, cells)))
    (lo, hi), parts = leaf_ap_interval_parts(
        release, estimate, (ap_lo, ap_hi), draws, departing=departing
    )
    below, above = rough_ap_reach(release + draws, departing)
    reach_lo, reach_hi = float(noise_sd(below)), float(noise_sd(above))
    assert reach_lo > 1.5 * reach_hi  # the case: a noisy reach on one side only
    order_sd = shuffled_ap(release)[1]
    candidate_sd = np.sqrt(parts.noise_sd**2 - reach_lo**2)  # noise = hypot(candidates, reach)
    sd_lo, sd_hi = end_spreads(float(candidate_sd), order_sd, reach_lo, reach_hi)
    assert parts.ends_sd == pytest.approx((sd_lo, sd_hi), rel=1e-9)
    assert parts.sd == pytest.approx(sd_lo, rel=1e-9)  # what a difference reads: the larger
    expected = ends_interval(parts.low, parts.high, sd_lo, sd_hi)
    assert (lo, hi) == pytest.approx(tuple(np.clip(expected, 0, 1)), abs=1e-15)
    sym_lo, sym_hi = bias_aware_interval(parts.low, parts.high, parts.sd)
    assert lo == pytest.approx(sym_lo, abs=1e-15) and hi < sym_hi - 0.1 * (sd_lo - sd_hi)
