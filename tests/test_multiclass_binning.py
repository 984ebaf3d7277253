"""FedBin and FedBBQ: one client with all the data and no DP is central binning / BBQ exactly;
the vectorised histograms equal the per-client protocol; clipping bounds every client's
histograms; the heterogeneity weights follow appendix B.5."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedeval.multiclass.binning import (
    BinningCalibrator,
    bbq_values,
    central_binning,
    class_weights,
    client_cells,
    fed_binning,
    reference_round,
    sum_round,
)
from fedeval.multiclass.data import softmax
from fedeval.multiclass.federation import schedule


def data(n=600, c=4, seed=0, clients=7):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    z = 2.5 * np.eye(c)[y] + rng.normal(0, 1.5, (n, c))
    return softmax(z), y, rng.integers(0, clients, n)


def binning_reference(p, y, n_bins):
    """Histogram binning, one class and one bin at a time (appendix B.3); empty bins → midpoint."""
    c = p.shape[1]
    values = np.empty((c, n_bins))
    for j in range(c):
        for m in range(n_bins):
            lo, hi = m / n_bins, (m + 1) / n_bins
            inside = (p[:, j] >= lo) & ((p[:, j] < hi) | ((m == n_bins - 1) & (p[:, j] <= 1)))
            pos = int(np.sum(inside & (y == j)))
            neg = int(np.sum(inside & (y != j)))
            values[j, m] = pos / (pos + neg) if pos + neg else (m + 0.5) / n_bins
    return values


def bbq_reference(pos, neg):
    """FedBBQ with math.lgamma, one class, binning and bin at a time (appendix B.4)."""
    c, n_bins = pos.shape
    bits = int(math.log2(n_bins))
    out = np.zeros((c, n_bins))
    for j in range(c):
        scores, maps = [], []
        for k in range(1, bits + 1):
            nb, width = 2**k, n_bins // 2**k
            prior = 2.0 / nb
            log_score, vals = 0.0, []
            for b in range(nb):
                m = float(pos[j, b * width : (b + 1) * width].sum())
                n = float(neg[j, b * width : (b + 1) * width].sum())
                s = (b + 0.5) / nb
                a, bb = prior * s, prior * (1 - s)
                log_score += (
                    math.lgamma(prior)
                    - math.lgamma(m + n + prior)
                    + math.lgamma(m + a)
                    - math.lgamma(a)
                    + math.lgamma(n + bb)
                    - math.lgamma(bb)
                )
                vals.append((m + a) / (m + n + prior))
            scores.append(log_score)
            maps.append(np.repeat(vals, width))
        w = np.exp(np.array(scores) - max(scores))
        w /= w.sum()
        out[j] = sum(wk * mk for wk, mk in zip(w, maps, strict=True))
    return out


def central_histograms(p, y, n_bins):
    c = p.shape[1]
    pos = np.zeros((c, n_bins))
    neg = np.zeros((c, n_bins))
    for j in range(c):
        b = np.minimum((p[:, j] * n_bins).astype(int), n_bins - 1)
        np.add.at(pos[j], b[y == j], 1)
        np.add.at(neg[j], b[y != j], 1)
    return pos, neg


def fed(p, y, client, k, **kw):
    opts = dict(
        n_bins=32,
        bbq=False,
        weighted=True,
        rounds=1,
        participation=1.0,
        participation_rng=np.random.default_rng(1),
        noise_rng=np.random.default_rng(2),
    )
    return fed_binning(p, y, client, k, **(opts | kw))


@pytest.mark.parametrize("bbq", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_one_client_no_dp_equals_central(bbq, weighted):
    p, y, _ = data()
    one = np.zeros(len(y), np.int64)
    fit = fed(p, y, one, 1, bbq=bbq, weighted=weighted)
    pos, neg = central_histograms(p, y, 32)
    expected = bbq_reference(pos, neg) if bbq else binning_reference(p, y, 32)
    np.testing.assert_allclose(fit.calibrator.values, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(fit.calibrator.alpha, np.ones(4))  # Ñ_j = N_j at T = 1, p = 1
    central = central_binning(p, y, n_bins=32, bbq=bbq)
    np.testing.assert_allclose(fit.calibrator(p), central(p), rtol=1e-12, atol=1e-15)
    # and central binning, applied by hand: values looked up, renormalised over classes
    b = np.minimum((p * 32).astype(int), 31)
    g = expected[np.arange(4), b]
    np.testing.assert_allclose(central(p), g / g.sum(1, keepdims=True), rtol=1e-12)


def test_fedbin_with_full_participation_is_central_for_any_rounds():
    # Every client is sampled in every round but its histograms are summed once.
    p, y, client = data()
    fit = fed(p, y, client, 7, rounds=5)
    np.testing.assert_allclose(fit.calibrator.values, binning_reference(p, y, 32), rtol=1e-12)
    pos, neg = central_histograms(p, y, 32)
    np.testing.assert_allclose(fit.histograms[:, 1], pos)
    np.testing.assert_allclose(fit.histograms[:, 0], neg)


@pytest.mark.parametrize("clip", [None, (2.0, 5.0)])
def test_vectorised_round_equals_per_client_protocol(clip):
    p, y, client = data()
    cells = client_cells(p, y, client, 7, 16)
    taking_part = np.array([True, False, True, True, False, True, True])
    fast = sum_round(cells, taking_part, clip)
    slow = reference_round(p, y, client, taking_part, 16, clip)
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


def test_clipping_bounds_each_clients_histograms():
    p, y, client = data(n=2000)
    cells = client_cells(p, y, client, 7, 16)
    c_pos, c_neg = 3.0, 7.0
    for k in range(7):
        alone = np.arange(7) == k
        raw = sum_round(cells, alone, None)
        clipped = sum_round(cells, alone, (c_pos, c_neg))
        pos_norm = np.linalg.norm(clipped[:, 1], axis=1)
        neg_norm = np.linalg.norm(clipped[:, 0], axis=1)
        assert np.all(pos_norm <= c_pos * (1 + 1e-12)) and np.all(neg_norm <= c_neg * (1 + 1e-12))
        # clipping only scales, by one factor per class for both signs (the ratio P/(P+N) of
        # every bin is kept), and histograms inside both bounds are untouched
        for j in range(4):
            r_pos, r_neg = np.linalg.norm(raw[j, 1]), np.linalg.norm(raw[j, 0])
            factor = min(1.0, c_pos / r_pos if r_pos else 1.0, c_neg / r_neg if r_neg else 1.0)
            np.testing.assert_allclose(clipped[j], raw[j] * factor, rtol=1e-12)


@pytest.mark.parametrize("bbq", [False, True])
def test_fast_and_per_client_paths_agree_with_dp_and_sampling(bbq):
    from fedeval.multiclass.privacy import DPStatement

    p, y, client = data()
    dp = DPStatement(
        epsilon=1.0,
        delta=1e-5,
        rho=0.1,
        noise_multiplier=2.0,
        releases=24,
        clip={"positive": 3.0, "negative": 6.0},
        sigma={"positive": 6.0, "negative": 12.0},
        rounds=3,
        participation=0.5,
    )
    kw = dict(bbq=bbq, rounds=3, participation=0.5, dp=dp, n_bins=16)
    a = fed(p, y, client, 7, **kw)
    b = fed(p, y, client, 7, per_client=True, **kw)
    np.testing.assert_allclose(a.histograms, b.histograms, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(a.calibrator.values, b.calibrator.values, rtol=1e-9)


def test_bbq_values_match_reference_on_noisy_counts():
    rng = np.random.default_rng(3)
    pos = rng.normal(5, 8, (3, 64))  # negative counts are clamped at 0 first
    neg = rng.normal(40, 30, (3, 64))
    expected = bbq_reference(np.clip(pos, 0, None), np.clip(neg, 0, None))
    np.testing.assert_allclose(bbq_values(pos, neg), expected, rtol=1e-10)


def test_weights_without_dp():
    seen = np.array([0.0, 50.0, 200.0, 10.0])
    totals = np.array([100.0, 100.0, 100.0, 0.0])
    alpha = class_weights(seen, totals, noise_sd=None, n_bins=8)
    np.testing.assert_array_equal(alpha, [0.0, 0.5, 1.0, 0.0])


def test_weights_under_dp_compare_counts_with_expected_noise():
    sd, bins = 3.0, 8
    noise = math.sqrt(2 / math.pi) * sd * bins  # E Σ_m |N(0, sd²)|
    seen = np.array([-5.0, 0.25 * noise, 2 * noise])
    alpha = class_weights(seen, None, noise_sd=sd, n_bins=bins)
    np.testing.assert_allclose(alpha, [0.0, 0.25, 1.0])


def test_weighted_map_mixes_with_the_input_and_renormalises():
    values = np.array([[0.9, 0.9], [0.1, 0.1], [0.5, 0.5]])
    cal = BinningCalibrator(values, np.array([1.0, 0.0, 0.5]), "fedbin")
    p = np.array([[0.2, 0.3, 0.5]])
    g = np.array([0.9, 0.3, 0.5 * 0.5 + 0.5 * 0.5])
    np.testing.assert_allclose(cal(p), [g / g.sum()], rtol=1e-15)


def test_a_row_whose_maps_are_all_zero_keeps_its_input():
    cal = BinningCalibrator(np.zeros((2, 4)), np.ones(2), "fedbin")
    p = np.array([[0.3, 0.7]])
    np.testing.assert_array_equal(cal(p), p)


def test_partial_participation_counts_and_weights():
    # With p < 1 and one round, Ñ_j counts only the sampled clients' class-j examples.
    p, y, client = data()
    fit = fed(p, y, client, 7, participation=0.5, participation_rng=np.random.default_rng(5))
    part = schedule(7, 1, 0.5, np.random.default_rng(5))[0]
    assert part.sum() == 4  # m = round(p·K)
    rows = part[client]
    seen = np.bincount(y[rows], minlength=4)
    np.testing.assert_array_equal(fit.seen, seen)
    np.testing.assert_allclose(fit.calibrator.alpha, seen / np.bincount(y, minlength=4))


def test_sparse_cells_equal_dense_cells(monkeypatch):
    import fedeval.multiclass.binning as binning

    p, y, client = data()
    dense = client_cells(p, y, client, 7, 16)
    monkeypatch.setattr(binning, "DENSE_CELLS", 0)
    sparse = client_cells(p, y, client, 7, 16)
    for field in ("client", "group", "slot", "count"):
        np.testing.assert_array_equal(getattr(dense, field), getattr(sparse, field))


def test_monotone_values_make_the_shrunk_map_non_decreasing():
    from scipy.optimize import isotonic_regression

    from fedeval.multiclass.binning import monotone_values

    rng = np.random.default_rng(4)
    b = 16
    mid = (np.arange(b) + 0.5) / b
    values = np.clip(mid + rng.normal(0, 0.2, (3, b)), 0, 1)  # noisy, crossing bins
    weights = rng.uniform(0, 1, (3, b))
    weights[:, 0] = 0.0
    mass = rng.uniform(1, 100, (3, b))
    g, w = monotone_values(values, weights, mass)
    assert np.all((g >= 0) & (g <= 1) & (w >= 0) & (w <= 1))
    eff = w * g + (1 - w) * mid
    assert np.all(np.diff(eff[:, 1:], axis=1) >= -1e-12)  # bin 0 (w = 0) is the identity
    for j in range(3):  # and the effective values are the weighted isotonic fit
        before = weights[j] * values[j] + (1 - weights[j]) * mid
        iso = isotonic_regression(before[1:], weights=weights[j, 1:] * mass[j, 1:]).x
        np.testing.assert_allclose(eff[j, 1:], iso, atol=1e-12)
