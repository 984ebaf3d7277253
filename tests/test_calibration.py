"""Calibration from one release: maps of calibrated scores stay near the identity within their
sampling error, every map is monotone and in [0, 1] under any noise, ECE is scikit-learn's, and
calibrating miscalibrated scores brings the held-out ECE down to the maps' sampling error."""

import math

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from fedeval.api.calibrate import auto_buckets, calibrate
from fedeval.core.config import PrivacyModel
from fedeval.core.errors import UsageError
from fedeval.estimate.calibration import (
    CalibrationMap,
    bbq,
    bbq_bucket_range,
    ece_from_histogram,
    ece_rows,
    exact_ece,
    histogram_binning,
)
from fedeval.estimate.ece import slope_caps, split_gaps, split_geometry
from fedeval.estimate.exact import SortedScores


def calibrated_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Perfectly calibrated scores: s ~ Uniform(0, 1), y ~ Bernoulli(s)."""
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    return (rng.random(n) < s).astype(int), s


def assert_valid_map(m: CalibrationMap) -> None:
    """Edges from 0 to 1, non-decreasing; values non-decreasing probabilities; finite mass; the
    map itself monotone on a fine grid and in [0, 1]."""
    assert m.edges[0] == 0.0 and m.edges[-1] == 1.0
    assert len(m.edges) == len(m.values) + 1 == len(m.mass) + 1
    assert np.all(np.diff(m.edges) >= 0)
    assert np.all(np.isfinite(m.values)) and np.all(np.isfinite(m.mass))
    assert np.all((m.values >= 0) & (m.values <= 1))
    assert np.all(np.diff(m.values) >= 0)
    g = m(np.linspace(0.0, 1.0, 4001))
    assert np.all((g >= 0) & (g <= 1)) and np.all(np.diff(g) >= 0)


# --- calibrated scores map to (nearly) themselves -------------------------------------------------

N_CAL = 200_000


@pytest.mark.parametrize("seed", range(3))
def test_binning_of_calibrated_scores_is_near_the_identity(seed):
    """Bucket b's value is its positive rate: its standard error is √(p(1 − p)/N_b) and its mean
    lies inside the bucket, so at the midpoint |g − mid| ≤ 4·SE + width/2 (4 SE: a few hundred
    buckets over the seeds, each beyond 4 SE with probability 6e-5). Sharper, from the data:
    the rate is within 4 SE of the bucket's mean score."""
    y, s = calibrated_data(N_CAL, seed)
    cal = calibrate(y, s, model="federated", method="binning", seed=0)
    m = cal.map
    assert_valid_map(m)
    b = auto_buckets(PrivacyModel.FEDERATED, N_CAL, None, 1 << cal.run.config.height)
    assert len(m.values) == b == round(N_CAL ** (1 / 3))
    mid, width = (m.edges[:-1] + m.edges[1:]) / 2, np.diff(m.edges)
    # Federated: the bucket masses are the data's, up to the leaf that holds each edge.
    idx = np.searchsorted(m.edges, s, side="right") - 1
    counts = np.bincount(np.clip(idx, 0, b - 1), minlength=b)
    np.testing.assert_allclose(m.mass, counts, atol=2 * N_CAL / (1 << cal.run.config.height))
    se = np.sqrt(mid * (1 - mid) / m.mass)
    assert np.all(np.abs(m.values - mid) <= 4 * se + width / 2)
    mean_score = np.bincount(idx, s, minlength=b) / counts
    se_data = np.sqrt(np.bincount(idx, s * (1 - s), minlength=b)) / counts
    assert np.all(np.abs(m.values - mean_score) <= 4 * se_data)
    # Everywhere, not only at midpoints: one more half width.
    grid = np.linspace(0.0, 1.0, 10_001)
    assert np.max(np.abs(m(grid) - grid)) <= 4 * np.max(se) + np.max(width)


@pytest.mark.parametrize("buckets", [[20], [50], [20, 35, 50]])
def test_bbq_of_calibrated_scores_is_near_the_identity(buckets):
    """BBQ's map is a posterior-weighted average of its binnings' posterior means; each binning
    is within 4·SE_B + w_B/2 of any s in a bucket (as for binning; the prior N′ = 2 moves a
    bucket of ≥ 4000 examples by < 1e-3), so the average is within the worst of them."""
    y, s = calibrated_data(N_CAL, seed=5)
    cal = calibrate(y, s, model="federated", method="binning", seed=0)
    m = bbq(cal.run.histogram.leaves, np.array(buckets))
    assert_valid_map(m)
    grid = np.linspace(0.0, 1.0, 10_001)
    tol = max(4 * math.sqrt(0.25 * b / N_CAL) + 1 / (2 * b) + 1e-3 for b in buckets)
    assert np.max(np.abs(m(grid) - grid)) <= tol


def test_default_bbq_of_calibrated_scores_is_near_the_identity():
    # The same bound with B over BBQ's whole range: the coarsest binning's half width dominates.
    y, s = calibrated_data(N_CAL, seed=6)
    cal = calibrate(y, s, model="federated", method="bbq", seed=0)
    assert_valid_map(cal.map)
    grid = np.linspace(0.0, 1.0, 10_001)
    bs = bbq_bucket_range(N_CAL, 1 << cal.run.config.height)
    tol = max(4 * math.sqrt(0.25 * b / N_CAL) + 1 / (2 * b) + 1e-3 for b in bs)
    assert tol < 0.12  # informative: a swapped or flattened map is off by up to 1
    assert np.max(np.abs(cal.map(grid) - grid)) <= tol
    # And the raw ECE of calibrated scores is only sampling noise (≈ √(M/N)·0.4 ≈ 0.004).
    assert cal.ece_raw.exact <= 4 * math.sqrt(0.25 * 15 / N_CAL)


# --- valid maps under heavy noise -----------------------------------------------------------------


@pytest.mark.parametrize(("model", "epsilon"), [("distdp", 0.1), ("localdp", 1.0)])
@pytest.mark.parametrize("method", ["binning", "bbq"])
def test_maps_are_monotone_probabilities_under_heavy_noise(model, epsilon, method):
    for seed in range(12):
        rng = np.random.default_rng(seed)
        n = 3000
        s = rng.beta(2, 5, n)  # most leaves above 0.6 are empty: noise only
        y = (rng.random(n) < s).astype(int)
        cal = calibrate(y, s, model=model, epsilon=epsilon, method=method, seed=seed)
        assert_valid_map(cal.map)
        assert np.all((cal.apply(s) >= 0) & (cal.apply(s) <= 1))
        assert math.isfinite(cal.ece_calibrated.estimate) and math.isfinite(cal.ece_raw.estimate)


# --- ECE: a direct implementation and scikit-learn agree -----------------------------------------


def slow_ece(y: np.ndarray, p: np.ndarray, n_bins: int) -> float:
    """ECE = Σ_b (N_b/N)·|mean(y)_b − mean(p)_b| with bins [k/M, (k+1)/M), the last closed."""
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        inside = [i for i in range(len(p)) if lo <= p[i] < hi or (k == n_bins - 1 and p[i] == 1)]
        if inside:
            total += abs(sum(y[i] for i in inside) - sum(p[i] for i in inside))
    return total / len(p)


def sklearn_ece(y: np.ndarray, p: np.ndarray, n_bins: int) -> float:
    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy="uniform")
    counts = np.histogram(p, bins=np.linspace(0.0, 1.0, n_bins + 1))[0]
    weights = counts[counts > 0] / len(p)
    return float(np.sum(weights * np.abs(prob_true - prob_pred)))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_bins", [1, 5, 15, 40])
def test_exact_ece_equals_direct_and_sklearn(seed, n_bins):
    rng = np.random.default_rng(seed)
    n = 1500
    p = np.concatenate([[0.0, 1.0], rng.beta(0.7, 0.9, n - 2)])  # both ends included
    y = (rng.random(n) < p**1.5).astype(int)  # miscalibrated: ECE well above 0
    ece = exact_ece(SortedScores.from_arrays(p, y == 1), n_bins)
    assert ece == pytest.approx(slow_ece(y, p, n_bins), abs=1e-12)
    assert ece == pytest.approx(sklearn_ece(y, p, n_bins), abs=1e-12)
    if n_bins > 1:
        assert ece > 0.01
    # With a transform: the ECE of the transformed scores.
    t = np.sqrt
    assert exact_ece(SortedScores.from_arrays(p, y == 1), n_bins, transform=t) == pytest.approx(
        sklearn_ece(y, t(p), n_bins), abs=1e-12
    )


@pytest.mark.parametrize("method", ["binning", "bbq"])
@pytest.mark.parametrize("height", [6, 9])
def test_ece_from_histogram_is_exact_on_leaf_midpoints(method, height):
    # Federated leaves are exact; with every score on its leaf's midpoint, the histogram ECE
    # (mass at midpoints) is the data's ECE, after the map and by `ece_from_histogram`. The
    # release's raw ECE reads the leaves as smooth (a leaf across a bin edge split by the
    # overlap: `fedeval.estimate.ece.split_gaps`), which ties on the midpoints are not: its
    # interval holds the data's ECE.
    rng = np.random.default_rng(height)
    n = 20_000
    leaf = rng.integers(0, 1 << height, n)
    s = (leaf + 0.5) / (1 << height)
    y = (rng.random(n) < s**2).astype(int)
    cal = calibrate(y, s, model="federated", height=height, method=method, seed=0)
    assert cal.ece_raw.exact > 0.05  # miscalibrated
    assert cal.ece_raw.ci95 is not None
    assert cal.ece_raw.ci95[0] <= cal.ece_raw.exact <= cal.ece_raw.ci95[1]
    # ...and the estimate is exactly that smooth reading of the exact leaves (slopes a density
    # cannot have across a leaf at the bound: `slope_caps`).
    leaves = cal.run.histogram.leaves
    edges = cal.run.axis.leaf_edges(leaves.shape[-1])
    caps = slope_caps(leaves, split_geometry(edges, 15))
    smooth = float(np.abs(split_gaps(leaves, edges, 15, caps=caps)).sum() / leaves.sum())
    assert cal.ece_raw.estimate == pytest.approx(smooth, abs=1e-12)
    assert cal.ece_calibrated.estimate == pytest.approx(cal.ece_calibrated.exact, abs=1e-12)
    direct = exact_ece(SortedScores.from_arrays(s, y == 1), 15)
    assert ece_from_histogram(cal.run.histogram.leaves, 15) == pytest.approx(direct, abs=1e-12)


# --- calibration reduces the held-out ECE ---------------------------------------------------------


def held_out_ece_bound(b: int, n_train: int, n_test: int) -> float:
    """ECE ≤ Σ_bucket (N_b/N)|ȳ_b(test) − v_b| (triangle inequality: the map is constant per
    bucket), and |ȳ − v| ≤ |ȳ − p_b| + |p_b − v| has mean ≤ 0.8·(SE_test + SE_train) at
    p = ½; 2·(SE_train + SE_test) leaves a margin of 2.5 on the mass-weighted average."""
    return 2 * (math.sqrt(0.25 * b / n_train) + math.sqrt(0.25 * b / n_test))


@pytest.mark.parametrize("seed", range(3))
def test_binning_fixes_miscalibrated_scores_on_held_out_data(seed):
    n = 200_000
    y, s = calibrated_data(n, seed)
    s2 = s**2  # over-confident low, under-confident high: ECE ≈ E[s − s²] = 1/6
    train = np.arange(n) < n // 2
    cal = calibrate(y[train], s2[train], model="federated", method="binning", seed=0)
    test = SortedScores.from_arrays(s2[~train], y[~train] == 1)
    before, after = exact_ece(test), exact_ece(test, transform=cal.apply)
    assert before == pytest.approx(1 / 6, abs=0.01)
    b = len(cal.map.values)
    bound = held_out_ece_bound(b, n // 2, n // 2)
    assert bound < 0.05
    assert after <= bound


@pytest.mark.parametrize("seed", range(3))
def test_bbq_fixes_miscalibrated_scores_on_held_out_data(seed):
    n = 200_000
    y, s = calibrated_data(n, seed)
    s2 = s**2
    train = np.arange(n) < n // 2
    cal = calibrate(y[train], s2[train], model="federated", method="bbq", seed=0)
    test = SortedScores.from_arrays(s2[~train], y[~train] == 1)
    before, after = exact_ece(test), exact_ece(test, transform=cal.apply)
    # A weighted average of binnings: no worse than the finest binning BBQ may choose.
    finest = int(bbq_bucket_range(n // 2, 1 << cal.run.config.height).max())
    assert after <= held_out_ece_bound(finest, n // 2, n // 2) < before
    # BBQ restricted to binnings up to 50 buckets: the sharp bound of binning.
    leaves = cal.run.histogram.leaves
    m = bbq(leaves, np.array([10, 20, 35, 50]))
    assert exact_ece(test, transform=m) <= held_out_ece_bound(50, n // 2, n // 2)


# --- choices and edge cases -----------------------------------------------------------------------


def test_auto_buckets_grows_with_n():
    ns = [100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    for model, eps in (
        (PrivacyModel.FEDERATED, None),
        (PrivacyModel.DISTDP, 1.0),
        (PrivacyModel.LOCALDP, 1.0),
    ):
        b = [auto_buckets(model, n, eps, 1 << 20) for n in ns]
        assert np.all(np.diff(b) > 0), (model, b)
        # Never more than half the leaves, never fewer than 2.
        assert auto_buckets(model, 10**9, eps, 64) == 32
        assert auto_buckets(model, 2, eps, 1 << 20) == 2
    assert auto_buckets(PrivacyModel.FEDERATED, 1_000_000, None, 1 << 20) == 100  # n^{1/3}
    assert auto_buckets(PrivacyModel.LOCALDP, 10_000, 4.0, 1 << 20) == 20  # √ε·n^{1/4}


def test_buckets_option():
    y, s = calibrated_data(5000, seed=1)
    with pytest.raises(UsageError, match="does not apply to bbq"):
        calibrate(y, s, method="bbq", buckets=10, model="federated")
    cal = calibrate(y, s, method="binning", buckets=7, model="federated")
    assert len(cal.map.values) == 7
    for bad in (0, -3, "many"):
        with pytest.raises(UsageError, match="buckets"):
            calibrate(y, s, method="binning", buckets=bad, model="federated")
    with pytest.raises(UsageError, match="unknown method"):
        calibrate(y, s, method="platt", model="federated")
    with pytest.raises(UsageError, match="n_bins"):
        calibrate(y, s, n_bins=0, model="federated")


@pytest.mark.parametrize(
    "leaves",
    [
        np.array([[1.0, 0.0], [0.0, 1.0]]),  # two examples, two leaves
        np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),  # nothing at all
        np.array([[0.0, 3.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),  # no positive
        np.array([[-2.0, 1.0, 0.5, -0.5], [0.3, -1.0, 2.0, -4.0]]),  # noisy, negative total
    ],
)
def test_tiny_histograms_give_valid_maps(leaves):
    for m in (bbq(leaves), histogram_binning(leaves, 2)):
        assert_valid_map(m)
    ece = ece_from_histogram(leaves, 15, bbq(leaves))
    assert math.isnan(ece) if leaves.sum() <= 0 else math.isfinite(ece)


def test_bbq_on_a_tiny_sample_has_no_nan():
    y = np.array([0, 1, 0, 1, 1])
    s = np.array([0.1, 0.2, 0.4, 0.8, 0.9])
    for model, eps in (("federated", None), ("distdp", 0.5), ("localdp", 1.0)):
        cal = calibrate(y, s, model=model, epsilon=eps, method="bbq", seed=3)
        assert_valid_map(cal.map)
        assert np.all(np.isfinite(cal.apply(s)))


def test_apply_uses_the_score_range():
    y, s = calibrated_data(20_000, seed=2)
    unit = calibrate(y, s, model="federated", seed=0)
    scaled = calibrate(y, 10 * s - 5, model="federated", score_range=(-5, 5), seed=0)
    np.testing.assert_array_equal(scaled.map.values, unit.map.values)
    np.testing.assert_array_equal(scaled.apply(10 * s - 5), unit.apply(s))
    assert scaled.ece_raw is None  # scores that are not probabilities have no raw ECE


def test_ece_from_noisy_leaves_stays_at_most_one():
    """Noisy counts (a few examples, one class estimated below zero) can put Σ|pos − Σscore|
    past the total; no data set has an ECE above 1, so neither does the estimate."""
    leaves = np.array([[5.0, -3.0, 4.0, 6.0], [-4.0, 6.0, -5.0, 2.0]])  # total 11
    mid = (np.arange(4) + 0.5) / 4  # one leaf per bin
    assert np.sum(np.abs(leaves[1] - (leaves[0] + leaves[1]) * mid)) / leaves.sum() > 1.6
    assert ece_from_histogram(leaves, n_bins=4) == 1.0


def test_ece_rows_are_each_rows_ece():
    """The stacked ECE (the noise draws behind the raw ECE's interval) is each row's
    `ece_from_histogram`, bit for bit, warped midpoints, empty and noisy rows included."""
    rng = np.random.default_rng(4)
    stack = rng.normal(40.0, 30.0, (50, 2, 256))
    stack[7] = 0.0  # no mass: nan
    stack[9] = -stack[9]  # a total below 0: nan
    scores = np.sort(rng.random(256))
    for s in (None, scores):
        want = [ece_from_histogram(x, 15, scores=s) for x in stack]
        np.testing.assert_array_equal(ece_rows(stack, 15, scores=s), want)
