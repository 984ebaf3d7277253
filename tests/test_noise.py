"""Noise samplers: distributions checked against their exact pmf with fixed seeds.

Goodness-of-fit tests reject at p < 1e-3; each one also shows it can fail (a slightly wrong
parameter is rejected with the same number of draws).
"""

import math

import numpy as np
import pytest
from scipy import stats

from fedeval.privacy.noise import (
    discrete_laplace,
    discrete_laplace_variance,
    laplace_alpha,
    oue_count_variance,
    oue_perturb,
    oue_probabilities,
    oue_sum,
    polya_share,
    polya_sum,
)

P_REJECT = 1e-3


def dlap_pmf(k: np.ndarray, alpha: float) -> np.ndarray:
    return (1 - alpha) / (1 + alpha) * alpha ** np.abs(k)


def gof_pvalue(draws: np.ndarray, alpha: float, kmax: int = 12) -> float:
    """Chi-square goodness of fit to the discrete Laplace, tails pooled beyond ±kmax."""
    k = np.arange(-kmax, kmax + 1)
    probs = dlap_pmf(k, alpha)
    tail = (1 - probs.sum()) / 2
    probs = np.concatenate([[tail], probs, [tail]])
    observed = np.concatenate(
        [[np.sum(draws < -kmax)], [np.sum(draws == v) for v in k], [np.sum(draws > kmax)]]
    )
    return stats.chisquare(observed, probs * len(draws)).pvalue


def test_summed_polya_shares_are_discrete_laplace():
    rng = np.random.default_rng(11)
    alpha = laplace_alpha(1.0, 2)
    shares = polya_share(7, alpha, (100_000, 7), rng)
    total = shares.sum(axis=1)
    assert gof_pvalue(total, alpha) > P_REJECT
    # The same test rejects a discrete Laplace with a 5% different α: it has power.
    assert gof_pvalue(total, alpha * 1.05) < P_REJECT


def test_direct_discrete_laplace_and_partial_sums():
    rng = np.random.default_rng(12)
    alpha = laplace_alpha(0.5, 1)
    assert gof_pvalue(discrete_laplace(alpha, 100_000, rng), alpha) > P_REJECT
    # Three parts of 2, 3 and 5 of 10 clients add up to the full discrete Laplace.
    parts = sum(polya_sum(m, 10, alpha, 100_000, rng) for m in (2, 3, 5))
    assert gof_pvalue(parts, alpha) > P_REJECT


@pytest.mark.parametrize("epsilon,sensitivity", [(1.0, 15), (0.1, 1), (5.0, 2), (1.0, 1)])
def test_geometric_draws_are_numpys_own(epsilon, sensitivity):
    """The in-place geometric sampler gives numpy's `geometric` draws bit for bit, so a seed
    gives the release it gave before (α near 1, and α small where numpy searches instead)."""
    from fedeval.privacy.noise import _geometric

    p = 1.0 - laplace_alpha(epsilon, sensitivity)
    for seed in range(3):
        ours = _geometric(p, (40, 5000), np.random.default_rng(seed))
        theirs = np.random.default_rng(seed).geometric(p, (40, 5000))
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


def test_discrete_laplace_variance():
    rng = np.random.default_rng(13)
    alpha = laplace_alpha(1.0, 3)
    r = 200_000
    draws = discrete_laplace(alpha, r, rng).astype(float)
    var = discrete_laplace_variance(alpha)
    # Exact fourth moment from the pmf bounds the standard error of the sample variance.
    k = np.arange(-400, 401)
    mu4 = float(np.sum(k.astype(float) ** 4 * dlap_pmf(k, alpha)))
    se = math.sqrt((mu4 - var**2) / r)
    assert abs(draws.var() - var) < 4 * se
    assert abs(draws.mean()) < 4 * math.sqrt(var / r)


def test_oue_probabilities_give_epsilon():
    for eps in (0.5, 1.0, 5.0):
        p, q = oue_probabilities(eps)
        assert math.isclose(p * (1 - q) / (q * (1 - p)), math.exp(eps))


def test_oue_fast_sum_matches_per_client_bits():
    rng = np.random.default_rng(14)
    eps, n, width = 2.0, 40, 4
    true = np.array([25, 10, 5, 0])
    onehot = np.zeros((n, width), bool)
    onehot[np.arange(n), np.repeat(np.arange(width), true)] = True
    r = 20_000
    slow = np.stack([oue_perturb(onehot, eps, rng).sum(axis=0) for _ in range(r)])
    fast = np.stack([oue_sum(true, n, eps, rng) for _ in range(r)])
    for j in range(width):
        values = np.union1d(slow[:, j], fast[:, j])
        table = np.array([[np.sum(x[:, j] == v) for v in values] for x in (slow, fast)])
        table = table[:, table.sum(axis=0) >= 10]  # drop cells too rare for chi-square
        assert stats.chi2_contingency(table).pvalue > P_REJECT


def test_oue_decoded_count_is_unbiased_with_predicted_variance():
    rng = np.random.default_rng(15)
    eps, n, c = 1.0, 5_000, 700
    p, q = oue_probabilities(eps)
    r = 40_000
    est = (oue_sum(np.full(r, c), n, eps, rng) - n * q) / (p - q)
    var = oue_count_variance(n, c, eps)
    assert abs(est.mean() - c) < 4 * math.sqrt(var / r)
    # Binomial sums are close to normal here: SE of the sample variance ≈ var·√(2/r).
    assert abs(est.var() / var - 1) < 4 * math.sqrt(2 / r)


@pytest.mark.parametrize("with_padding", [False, True])
def test_oue_perturb_at_draws_the_same_bits_as_the_one_hot_form(with_padding):
    from fedeval.privacy.noise import oue_perturb_at

    rng = np.random.default_rng(11)
    cols = rng.integers(0, 16, 500)
    on = rng.random(500) < 0.7 if with_padding else None
    onehot = np.zeros((500, 16), bool)
    onehot[np.arange(500), cols] = True
    if on is not None:
        onehot &= on[:, None]
    want = oue_perturb(onehot, 1.5, np.random.default_rng(5))
    got = oue_perturb_at(cols, 16, 1.5, np.random.default_rng(5), on)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("alpha", [0.9, 0.5])  # inversion (p < 1/3) and numpy's own sampler
def test_discrete_laplace_as_floats_is_the_same_draws(alpha):
    # The float form used for interval resamples: the same values from the same generator
    # state, and the generator left in the same state.
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    ints = discrete_laplace(alpha, (50, 2, 64), a)
    floats = discrete_laplace(alpha, (50, 2, 64), b, np.float64)
    assert ints.dtype == np.int64 and floats.dtype == np.float64
    np.testing.assert_array_equal(floats, ints)
    assert np.any(ints != 0)
    assert a.random() == b.random()
