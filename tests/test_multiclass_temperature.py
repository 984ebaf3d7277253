"""FedTemp: the central temperature is the NLL minimiser found directly by scipy; every client's
local optimum matches a per-client scipy fit; one client with all the data and no DP is central
temperature scaling; temperature scaling never changes a top-1 prediction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from fedeval.multiclass.data import softmax
from fedeval.multiclass.temperature import (
    T_MAX,
    T_MIN,
    check_temperature,
    fed_temperature,
    fit_temperature,
    local_temperatures,
    nll,
    nll_gain,
    reference_local_temperatures,
)


def data(n=800, c=5, seed=0, scale=4.0, clients=9):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    z = scale * (np.eye(c)[y] + rng.normal(0, 0.8, (n, c)))  # confident, often wrong
    return z, y, rng.integers(0, clients, n)


def scipy_temperature(z, y):
    """NLL minimised directly over log T (Brent), no derivatives involved."""

    def f(u):
        t = math.exp(u)
        s = z / t
        s = s - s.max(axis=1, keepdims=True)
        return float(np.sum(np.log(np.exp(s).sum(axis=1)) - s[np.arange(len(y)), y]))

    res = minimize_scalar(f, bracket=(-2.0, 2.0), method="brent", options={"xtol": 1e-12})
    return math.exp(res.x)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scale", [0.5, 4.0])
def test_central_temperature_matches_a_direct_scipy_fit(seed, scale):
    z, y, _ = data(seed=seed, scale=scale)
    t = fit_temperature(z, y)
    assert t == pytest.approx(scipy_temperature(z, y), rel=1e-6)
    # and it is a minimum of the NLL
    assert nll(z, y, t) <= min(nll(z, y, t * 1.001), nll(z, y, t / 1.001))


def test_local_temperatures_match_per_client_scipy():
    z, y, client = data(clients=12)
    fast = local_temperatures(z, y, client, 13)  # client 12 holds nothing
    slow = reference_local_temperatures(z, y, client, 13)
    assert np.isnan(fast[12]) and np.isnan(slow[12])
    np.testing.assert_allclose(fast[:12], slow[:12], rtol=1e-6)


def test_clients_at_the_bounds():
    # All right with a margin: NLL falls as T → 0; all wrong: NLL falls as T → ∞.
    y = np.array([0, 1, 0, 1])
    right = 0.3 * np.eye(2)[y]  # a small margin: the NLL is not flat in float64 above T_MIN
    wrong = 3.0 * np.eye(2)[1 - y]
    z = np.vstack([right, wrong])
    t = local_temperatures(z, np.r_[y, y], np.repeat([0, 1], 4), 2)
    np.testing.assert_allclose(t, [T_MIN, T_MAX])
    ref = reference_local_temperatures(z, np.r_[y, y], np.repeat([0, 1], 4), 2)
    np.testing.assert_allclose(ref, [T_MIN, T_MAX], rtol=1e-6)


@pytest.mark.parametrize("rounds", [1, 7])
def test_one_client_no_dp_equals_central(rounds):
    z, y, _ = data()
    one = np.zeros(len(y), np.int64)
    fit = fed_temperature(
        z, y, one, 1, rounds=rounds, participation=1.0, participation_rng=np.random.default_rng(0)
    )
    assert fit.calibrator.temperature == pytest.approx(fit_temperature(z, y), rel=1e-14)
    np.testing.assert_allclose(fit.calibrator(z), softmax(z, fit_temperature(z, y)), rtol=1e-13)


def test_one_round_full_participation_averages_log_optima_by_information():
    z, y, client = data()
    fit = fed_temperature(
        z, y, client, 9, rounds=1, participation=1.0, participation_rng=np.random.default_rng(0)
    )
    local = reference_local_temperatures(z, y, client, 9)
    # H_k = ∂²NLL_k/∂u² at the client's optimum, by central differences of the NLL in u.
    h = np.empty(9)
    for k in range(9):
        u, e = math.log(local[k]), 1e-4
        f = [nll(z[client == k], y[client == k], math.exp(u + d)) for d in (-e, 0.0, e)]
        h[k] = (f[0] - 2 * f[1] + f[2]) / e**2
    np.testing.assert_allclose(fit.information, h, rtol=1e-4)
    expected = math.exp(h @ np.log(local) / h.sum())
    assert fit.calibrator.temperature == pytest.approx(expected, rel=1e-6)


def test_information_weighted_mean_is_close_to_the_pooled_optimum_under_skew():
    # The first-order argument: Σ_k H_k (u_k − u*) ≈ 0 at the pooled optimum u*. Under label
    # skew the local optima spread (0.05 to 3.1 here, a client at T_MIN among them), yet the
    # weighted mean lands within 1e-4 of T* (tolerance 1e-3), where the plain mean of the T_k
    # is 2 % low.
    rng = np.random.default_rng(7)
    n, c, k = 20_000, 10, 50
    y = rng.integers(0, c, n)
    z = 2.5 * 2.3 * (2.3 * np.eye(c)[y] + rng.standard_normal((n, c)))
    from fedeval.multiclass.federation import assign

    client = assign(y, k, 0.1, rng)
    fit = fed_temperature(
        z, y, client, k, rounds=1, participation=1.0, participation_rng=np.random.default_rng(0)
    )
    central = fit_temperature(z, y)
    assert fit.calibrator.temperature == pytest.approx(central, rel=1e-3)
    assert abs(np.nanmean(fit.local) / central - 1) > 0.01


def test_temperature_keeps_every_top1_prediction():
    z, y, client = data(n=5000, seed=4)
    fit = fed_temperature(
        z, y, client, 9, rounds=5, participation=0.5, participation_rng=np.random.default_rng(1)
    )
    assert fit.calibrator.temperature != 1.0
    np.testing.assert_array_equal(fit.calibrator(z).argmax(axis=1), z.argmax(axis=1))


def test_fast_and_per_client_paths_agree_under_sampling_and_dp():
    from fedeval.multiclass.privacy import DPStatement

    z, y, client = data()
    dp = DPStatement(1.0, 1e-5, 0.1, 2.0, 4, {"temperature": 0.5}, {"temperature": 1.0}, 4, 0.5)
    # (the per-client path must draw the same schedule and noise, and give the same steps)
    kw = dict(rounds=4, participation=0.5, dp=dp)
    a = fed_temperature(
        z,
        y,
        client,
        9,
        participation_rng=np.random.default_rng(3),
        noise_rng=np.random.default_rng(4),
        **kw,
    )
    b = fed_temperature(
        z,
        y,
        client,
        9,
        participation_rng=np.random.default_rng(3),
        noise_rng=np.random.default_rng(4),
        per_client=True,
        **kw,
    )
    np.testing.assert_allclose(a.history, b.history, rtol=1e-6)


def test_clipped_updates_move_log_temperature_at_most_clip_per_round():
    z, y, client = data(scale=8.0)  # overconfident: the optimum is far above T = 1
    fit = fed_temperature(
        z,
        y,
        client,
        9,
        rounds=3,
        participation=1.0,
        participation_rng=np.random.default_rng(0),
        clip=0.1,
        server_lr=1.0,
    )
    steps = np.diff(np.log(np.r_[1.0, fit.history]))
    assert np.all(np.abs(steps) <= 0.1 + 1e-12)
    assert steps[0] == pytest.approx(0.1)  # every client wants more than +0.1


def test_check_without_dp_is_the_exact_held_out_nll_gain():
    z, y, client = data(scale=8.0)
    for t, keep in ((3.0, True), (0.3, False)):
        g = check_temperature(z, y, client, 9, t)
        exact = (nll(z, y, 1.0) - nll(z, y, t)) / len(y)
        assert g.gain == pytest.approx(exact, rel=1e-12) and g.sd == 0.0
        assert g.kept is keep and g.released == (t if keep else 1.0) and g.fitted == t


def test_check_under_dp_has_the_claimed_noise_and_clips_each_clients_sum():
    from scipy.stats import chi2

    from fedeval.multiclass.privacy import dp_statement

    z, y, client = data(scale=8.0)
    st = dp_statement(
        1.0, 1e-5, releases=2, clip={"temperature": 0.5, "evaluation": 2.0}, rounds=1,
        participation=1.0,
    )  # fmt: skip
    per = np.bincount(client, nll_gain(z, y, 3.0), minlength=9)
    assert np.abs(per).max() > 2.0  # the clip binds
    exact = np.clip(per, -2.0, 2.0).sum() / 9
    rng = np.random.default_rng(0)
    draws = 2000
    x = np.array(
        [check_temperature(z, y, client, 9, 3.0, dp=st, noise_rng=rng).gain for _ in range(draws)]
    )
    sd = st.sigma["evaluation"] / 9
    stat = float(np.sum(((x - exact) / sd) ** 2))
    assert chi2.ppf(1e-6, draws) < stat < chi2.isf(1e-6, draws)
    g = check_temperature(z, y, client, 9, 3.0, dp=st, noise_rng=rng)
    assert g.sd == pytest.approx(sd) and g.lower == pytest.approx(g.gain - 1.6448536 * sd)
    assert g.kept is (g.lower > 0)


def test_dp_fit_reaches_the_optimum_from_far_away():
    # Overconfident by 2.5: the optimum is log T ≈ 0.92 away from the start, more than the
    # per-round trust region C = 0.5. The travel rounds reach it and the averaged rounds keep
    # it; the DP noise left is σ/(K·√6) ≈ 0.03 in log T at these settings, so 0.1 is > 3 SD.
    from fedeval.multiclass.federation import assign
    from fedeval.multiclass.privacy import dp_statement

    rng = np.random.default_rng(3)
    n, c, k = 20_000, 10, 100
    y = rng.integers(0, c, n)
    z = 2.5 * 2.3 * (2.3 * np.eye(c)[y] + rng.standard_normal((n, c)))
    client = assign(y, k, 0.5, rng)
    st = dp_statement(
        1.0, 1e-5, releases=12, clip={"temperature": 0.5}, rounds=12, participation=1.0
    )
    central = fit_temperature(z, y)
    for seed in range(3):
        fit = fed_temperature(
            z, y, client, k, rounds=12, participation=1.0, dp=st,
            participation_rng=np.random.default_rng(seed),
            noise_rng=np.random.default_rng(seed + 100),
        )  # fmt: skip
        assert abs(math.log(fit.calibrator.temperature / central)) < 0.1
        assert np.all(np.abs(np.diff(np.log(np.r_[1.0, fit.history]))) <= 0.5 + 1e-12)
