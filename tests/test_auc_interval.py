"""The AUC interval's spread includes the noise of its discretisation correction: at small n the
corrected end of its range is noisier than the raw AUC, and σ from the raw AUC alone falls short."""

import math

import numpy as np
import pytest
from families import family_scores
from sklearn.metrics import roc_auc_score

from fedeval.api.evaluate import auc_buckets, auc_discretisation_bias, auc_interval
from fedeval.estimate.metrics import auc_from_buckets
from fedeval.estimate.richardson import romberg_step, shrunk_step, step_variance
from fedeval.estimate.uncertainty import (
    bias_aware_interval,
    noise_sd,
    within_bucket_auc_variance,
)
from fedeval.privacy.decode import noise_draws
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays

RELEASES = 2000
DRAWS = 200
# ±3 binomial sd of a calibrated 95% interval's coverage over RELEASES: ±0.0146. The old σ
# (the raw AUC's spread alone) covers about 0.925 here, 5 sd below 0.95, outside it.
TOLERANCE = 3 * math.sqrt(0.95 * 0.05 / RELEASES)


def _rare_release_noise(height: int):
    """(exact leaves, truth, RELEASES × (1 + DRAWS) draws of distdp ε = 1 noise on the
    consistent leaves): 3% positives, 20,000 rows. A release is the exact leaves plus one
    draw (the release's noise law, `ScoreHistogram.noise_draws`), its bootstrap the next
    DRAWS."""
    y, s = family_scores("rare", 20_000, np.random.default_rng(0))
    data = scored_from_arrays(y, s, keep_scores=False)
    exact = simulate(data, model="federated", height=height).histogram.leaves
    hist = simulate(data, model="distdp", epsilon=1.0, height=height, seed=0, ci_draws=0).histogram
    noise = noise_draws(hist, RELEASES * (1 + DRAWS), np.random.default_rng(1))
    return exact, roc_auc_score(y, s), noise.reshape(RELEASES, 1 + DRAWS, *exact.shape)


@pytest.mark.slow
def test_auc_interval_covers_rare_positives_at_small_n():
    # 32 leaves (h = 5), AUC ≈ 0.99, ~600 positives: the Richardson term (AUC over 16 cells −
    # AUC)/3 has noise of its own, not all shared with the AUC's. At h = 5 the release reads as
    # smooth everywhere; at h = 3 the parents depart and the interval is the worst case instead
    # (tests/test_rough_intervals.py), so this calibration is checked where it applies.
    exact, truth, noise = _rare_release_noise(height=5)
    hits = 0
    for k in range(RELEASES):
        lo, hi = auc_interval(exact + noise[k, 0], noise[k, 1:], None)
        hits += lo <= truth <= hi
    assert abs(hits / RELEASES - 0.95) <= TOLERANCE, hits / RELEASES


def test_auc_discretisation_bias_of_stacked_leaves_is_each_ones():
    # The draws' corrections are computed at once over the leading axis; each equals the
    # correction of its own leaves, and an undefined AUC (no positives) gives 0.
    rng = np.random.default_rng(2)
    leaves = rng.random((5, 2, 16)) * 100
    leaves[3, 1] = 0.0
    stacked = auc_discretisation_bias(leaves, None)
    assert stacked.shape == (5,)
    for k in range(5):
        assert stacked[k] == float(auc_discretisation_bias(leaves[k], None))
    assert stacked[3] == 0.0
    assert np.all(stacked[[0, 1, 2, 4]] != 0.0)
    assert auc_discretisation_bias(leaves[:, :, :4], None).shape == (5,)


def _romberg(leaves):
    """The Romberg step (R₁(h) − R₁(h−1))/15 of leaves (..., 2, L) read as smooth throughout."""
    pairs = leaves[..., 0, :].sum(axis=-1) * leaves[..., 1, :].sum(axis=-1)
    return romberg_step(leaves[..., 0, :], leaves[..., 1, :], None, None, pairs)


def test_auc_interval_spread_is_the_noisier_end_of_its_range():
    # σ is the largest sd over the draws of the range's ends (raw, corrected, and corrected +
    # the Romberg step less 2 of its sds), with the within-leaf variance (and the step's,
    # `step_variance`): the lower end (the upper is clipped at 1 here) is the bias-aware one
    # at that σ, and lower than at the raw AUC's spread, which the corrected end's exceeds by
    # its own noise.
    exact, _, noise = _rare_release_noise(height=5)
    release, draws = exact + noise[0, 0], noise[0, 1:]
    resampled = release + draws
    raw = auc_from_buckets(resampled[:, 0], resampled[:, 1])
    corrected = raw - auc_discretisation_bias(resampled, None)
    spread = float(noise_sd(_romberg(resampled)))
    far = corrected + shrunk_step(_romberg(resampled), spread)
    sd_raw, sd_corrected = float(noise_sd(raw)), float(noise_sd(corrected))
    sd_ends = max(sd_raw, sd_corrected, float(noise_sd(far)))
    assert sd_corrected > 1.03 * sd_raw  # the term the raw AUC's spread leaves out
    ends = auc_from_buckets(release[0], release[1])
    one_up = ends - auc_discretisation_bias(release, None)
    ends = sorted(
        [float(ends), float(one_up), float(one_up + shrunk_step(_romberg(release), spread))]
    )
    within = within_bucket_auc_variance(release[0], release[1])
    clamped = np.clip(release, 0.0, None)  # and the Richardson step's own sampling variance
    within += float(step_variance(*clamped, None, clamped[0].sum() * clamped[1].sum()))
    lo, _ = auc_interval(release, draws, None)
    expected = bias_aware_interval(ends[0], ends[-1], math.sqrt(sd_ends**2 + within))[0]
    assert lo == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert lo < bias_aware_interval(ends[0], ends[-1], math.sqrt(sd_raw**2 + within))[0] - 1e-4


@pytest.mark.parametrize("buckets", [2, 3, 4, 7])
def test_auc_interval_below_eight_cells_holds_every_order_inside_them(buckets):
    """With fewer cells than a bias estimate needs, the interval is the worst case over the
    order inside the cells: it holds the truth on smooth scores, where counting shared pairs as
    ½ is far off (4 buckets: 0.903 against 0.924, and the old interval was ±0.0007)."""
    y, s = family_scores("smooth", 50_000, np.random.default_rng(buckets))
    data = scored_from_arrays(y, s, keep_scores=False)
    leaves = simulate(data, model="federated", height=10).histogram.leaves
    lo, hi = auc_interval(leaves, None, buckets)
    truth = roc_auc_score(y, s)
    assert lo <= truth <= hi, (lo, truth, hi)
    # Exactly the hull: every pair sharing a bucket counted for and against.
    neg, pos = auc_buckets(leaves, buckets)
    half = np.sum(neg * pos) / (2 * neg.sum() * pos.sum())
    raw = float(auc_from_buckets(neg, pos))
    np.testing.assert_allclose([lo, hi], [raw - half, raw + half], rtol=0, atol=1e-12)


def test_richardson_shares_follow_the_leaves_widths():
    """A leaf's own bias is c·w³ (pairs ∝ w², each O(w) from ½): ⅓ of its parent's extra
    ordering for equal halves (None: read as before), ½ for leaves of widths 2:1, capped at the
    O(w) worst case where one leaf is most of its parent."""
    from fedeval.estimate.richardson import RICHARDSON_SHARE_CAP, richardson_shares

    assert richardson_shares(None) is None
    assert richardson_shares(np.linspace(0.0, 1.0, 17)) is None
    shares = richardson_shares(np.array([0.0, 2.0, 3.0, 4.0, 5.0, 5.1, 6.0]) / 6.0)
    assert shares is not None
    # (8 + 1)/(27 − 9) = ½; equal halves ⅓; widths 0.1:0.9 → (0.001 + 0.729)/(1 − 0.73) > 1.
    np.testing.assert_allclose(shares, [0.5, 1.0 / 3.0, RICHARDSON_SHARE_CAP], rtol=1e-12)


@pytest.mark.parametrize(
    ("positives", "negatives", "share"), [((2, 1), (1, 2), 0.3), ((3, 2), (2, 3), 0.1)]
)
def test_auc_interval_holds_smooth_scores_on_leaves_cut_at_the_thresholds(
    positives, negatives, share
):
    """At the thresholds' alignment level (h = 4 for the default thresholds k/11) the leaves are
    cut at the thresholds, widths 1/11 and 1/22, and a parent's leaves are unequal: read with
    the Richardson step's ⅓, the smooth AUC's bias (here ≈ 2e-3) was left short of the
    interval on exact counts (400,000 rows, where the order's spread is ≈ 1e-4), with each
    parent's share of its widths it is held."""
    from fedeval import evaluate

    rng = np.random.default_rng(3)
    y = (rng.random(400_000) < share).astype(int)
    s = np.where(y == 1, rng.beta(*positives, y.size), rng.beta(*negatives, y.size))
    result = evaluate(y, s, model="federated", height=4, seed=1)
    assert result.run.axis.leaf_edges(16)[1] != 1 / 16  # the leaves are the thresholds'
    lo, hi = result.auc.ci95
    assert lo <= result.auc.exact <= hi
