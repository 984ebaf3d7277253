"""User-level DP: the noise dp_accounting calibrates is the paper's closed form (Lemma B.7 with
Lemma B.3), never claims more than the target ε, and the noise actually added has that σ; the
mechanism states its claim in the binary releases' shape, with a DP event that composes back to
the stated ε."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar
from scipy.stats import chi2

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape, Unit
from fedeval.core.errors import UsageError
from fedeval.multiclass.binning import client_cells, fed_binning, sum_round
from fedeval.multiclass.data import softmax
from fedeval.multiclass.federation import schedule
from fedeval.multiclass.privacy import (
    MulticlassMechanism,
    check_epsilon_delta,
    dp_statement,
    epsilon_of,
)
from fedeval.multiclass.temperature import T_MAX, fed_temperature, local_information
from fedeval.privacy.mechanism import NOT_PRIVATE, Mechanism

TAIL = 1e-6
"""Two-sided tail of the χ² variance checks: a correct σ fails one with probability 2e-6."""


def log_delta(rho: float, eps: float) -> float:
    """log δ of Lemma B.3: min over α > 1 of exp((α−1)(αρ−ε))/(α−1)·(1−1/α)^α (in logs)."""

    def f(t):
        a = 1 + math.exp(t)
        return (a - 1) * (a * rho - eps) - math.log(a - 1) + a * math.log1p(-1 / a)

    return minimize_scalar(f, bounds=(-12, 16), method="bounded", options={"xatol": 1e-12}).fun


def paper_sigma(eps, delta, clip, releases):
    """σ = C·√(k/(2ρ)) (Lemma B.7), ρ the largest zCDP meeting (ε, δ) by Lemma B.3."""
    rho = brentq(lambda r: log_delta(r, eps) - math.log(delta), 1e-9, eps, xtol=1e-16, rtol=1e-14)
    return clip * math.sqrt(releases / (2 * rho)), rho


@pytest.mark.parametrize(
    ("eps", "delta", "rounds", "classes"),
    [(1.0, 1e-5, 1, 10), (1.0, 1e-5, 12, 10), (3.0, 1e-6, 30, 4), (0.5, 1e-5, 30, 100)],
)
def test_sigma_is_the_papers_closed_form(eps, delta, rounds, classes):
    # Scaling: T Gaussian releases with sensitivity C.
    st = dp_statement(
        eps, delta, releases=rounds, clip={"temperature": 0.5}, rounds=rounds, participation=0.1
    )
    sigma, rho = paper_sigma(eps, delta, 0.5, rounds)
    assert st.sigma["temperature"] == pytest.approx(sigma, rel=1e-4)
    assert st.rho == pytest.approx(rho, rel=2e-4)
    # Binning: 2cT releases, one per histogram, each with its own clip norm.
    k = 2 * classes * rounds
    st = dp_statement(
        eps,
        delta,
        releases=k,
        clip={"positive": 10, "negative": 50},
        rounds=rounds,
        participation=0.1,
    )
    assert st.sigma["positive"] == pytest.approx(paper_sigma(eps, delta, 10, k)[0], rel=1e-4)
    assert st.sigma["negative"] == pytest.approx(paper_sigma(eps, delta, 50, k)[0], rel=1e-4)
    # The grid of Rényi orders can only overstate ε, so σ is never below the closed form by more
    # than the calibration tolerance, and the ε it gives never exceeds the target.
    assert st.sigma["positive"] >= paper_sigma(eps, delta, 10, k)[0] * (1 - 1e-6)
    assert epsilon_of(st.noise_multiplier, k, delta) <= eps


BINARY_KEYS = set(
    Mechanism(PrivacyConfig(PrivacyModel.DISTDP, 4, Shape.FLAT, 1.0, Unit.CLIENT, 3)).section()
)


def temperature_statement(**kw):
    kw = dict(releases=12, clip={"temperature": 0.5}, rounds=12, participation=0.1) | kw
    return dp_statement(1.0, 1e-5, **kw)


def test_section_has_the_binary_keys_and_states_the_claim():
    st = temperature_statement()
    d = MulticlassMechanism(st).section()
    assert set(d) == BINARY_KEYS
    assert d["model"] == "multiclass-gaussian" and d["unit"] == "client"
    assert d["relation"] == "add-remove" and "add or remove one client" in d["neighbouring"]
    assert d["epsilon"] == 1.0 and d["delta"] == 1e-5 and d["max_examples"] is None
    assert d["height"] is None and d["shape"] is None and d["levels"] is None
    m = d["mechanism"]
    assert m["rounds"] == 12 and m["releases"] == 12 and m["releases_per_round"] == 1
    assert m["participation"] == 0.1 and m["clip"] == {"temperature": 0.5}
    assert m["sigma"]["temperature"] == pytest.approx(0.5 * m["noise_multiplier"])
    assert m["rho"] == pytest.approx(12 / (2 * m["noise_multiplier"] ** 2))
    assert "no amplification" in m["accounting"]
    assert d["dp_event"] == {
        "type": "gaussian",
        "noise_multiplier": st.noise_multiplier,
        "count": 12,
    }
    assert d["guarantee"].startswith("(1, 1e-05)-DP per client") and "NOT" not in d["guarantee"]
    assert "secure aggregation" in d["server_learns"] and "noisy sums" in d["server_learns"]
    assert "post-processing" in d["analyst_learns"]
    assert d["reproducible_simulation"] is False


def test_a_seeded_run_says_it_is_not_private():
    d = MulticlassMechanism(temperature_statement(), seeded=True).section()
    assert d["guarantee"].startswith(NOT_PRIVATE) and "NOT private" in d["guarantee"]
    assert d["reproducible_simulation"] is True


def test_without_dp_the_section_says_so():
    d = MulticlassMechanism(None).section()
    assert set(d) == BINARY_KEYS
    assert d["model"] == "federated" and d["dp_event"] == {"type": "none"}
    assert d["epsilon"] is None and d["delta"] is None and d["relation"] is None
    assert "no differential privacy" in d["guarantee"]
    # A seed does not turn "no DP" into anything else.
    assert MulticlassMechanism(None, seeded=True).guarantee() == d["guarantee"]


@pytest.mark.parametrize(
    ("eps", "delta", "releases"), [(1.0, 1e-5, 12), (0.5, 1e-6, 2 * 10 * 30), (4.0, 1e-5, 3)]
)
def test_dp_event_composes_back_to_the_stated_epsilon(eps, delta, releases):
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    st = dp_statement(
        eps, delta, releases=releases, clip={"temperature": 0.5}, rounds=3, participation=0.1
    )
    d = MulticlassMechanism(st).section()
    event = d["dp_event"]
    # dp_accounting's RDP accountant on its own dense grid of orders (not the module's).
    acc = rdp_privacy_accountant.RdpAccountant(list(1 + np.linspace(0.01, 300, 30_000)))
    acc.compose(
        dp_event.SelfComposedDpEvent(
            dp_event.GaussianDpEvent(event["noise_multiplier"]), event["count"]
        )
    )
    assert acc.get_epsilon(delta) == pytest.approx(d["epsilon"], abs=1e-3)
    # The ledger composes the same event to the same ε.
    from fedeval.privacy.accounting import total_epsilon

    entry = {"dp_event": event, "unit": d["unit"], "relation": d["relation"]}
    assert total_epsilon([entry], delta) == pytest.approx(d["epsilon"], abs=1e-3)


def chi2_bounds(df: int) -> tuple[float, float]:
    return chi2.ppf(TAIL, df), chi2.isf(TAIL, df)


@pytest.mark.parametrize(("rounds", "participation"), [(1, 1.0), (3, 0.5)])
def test_histogram_noise_has_the_claimed_sigma(rounds, participation):
    rng = np.random.default_rng(0)
    n, c, bins = 400, 10, 1024  # 10,240 noise draws per sign: σ off by 4 % fails
    y = rng.integers(0, c, n)
    p = softmax(rng.normal(0, 2, (n, c)))
    client = rng.integers(0, 20, n)
    st = dp_statement(
        2.0,
        1e-5,
        releases=2 * c * rounds,
        clip={"positive": 2.0, "negative": 5.0},
        rounds=rounds,
        participation=participation,
    )
    fit = fed_binning(
        p,
        y,
        client,
        20,
        n_bins=bins,
        bbq=False,
        weighted=True,
        rounds=rounds,
        participation=participation,
        participation_rng=np.random.default_rng(1),
        noise_rng=np.random.default_rng(2),
        dp=st,
    )
    # The same participants again, without noise: what is left is the noise, added once to the
    # sum over every sampled client (each counted once, bin 0 not sent under DP).
    cells = client_cells(p, y, client, 20, bins, skip_first=True)
    plan = schedule(20, rounds, participation, np.random.default_rng(1))
    np.testing.assert_array_equal(plan, fit.schedule)
    clean = sum_round(cells, plan.any(axis=0), (2.0, 5.0))
    noise = fit.histograms - clean
    for sign, key in ((1, "positive"), (0, "negative")):
        x = noise[:, sign].ravel()
        stat = float(np.sum(x**2) / st.sigma[key] ** 2)
        lo, hi = chi2_bounds(x.size)
        assert lo < stat < hi, (key, stat / x.size)


def test_temperature_noise_has_the_claimed_sigma():
    # Every client's examples are all wrong and confident, so its optimum is T_MAX and its
    # clipped update is +C every round; every client has the same information H, so with
    # τ² = 1/H its weight is w = 1/2: each step in log T is then C/2 + σ·N(0, 1)/K exactly
    # (well inside the ±C trust region).
    rng = np.random.default_rng(0)
    k, rows, c, rounds, clip = 50, 4, 3, 60, 0.05
    y = rng.integers(0, c, k * rows)
    z = 5.0 * np.eye(c)[(y + 1) % c]
    client = np.repeat(np.arange(k), rows)
    h = local_information(z, y, client, k, np.full(k, T_MAX))
    np.testing.assert_allclose(h, h[0], rtol=1e-12)
    st = dp_statement(
        5.0, 1e-5, releases=rounds, clip={"temperature": clip}, rounds=rounds, participation=1.0
    )
    fit = fed_temperature(
        z,
        y,
        client,
        k,
        rounds=rounds,
        participation=1.0,
        participation_rng=np.random.default_rng(1),
        noise_rng=np.random.default_rng(2),
        dp=st,
        server_lr=1.0,
        spread=1 / math.sqrt(h[0]),
    )
    np.testing.assert_array_equal(fit.local, np.full(k, T_MAX))
    assert fit.history.max() < T_MAX * math.exp(-clip)  # every update is clipped
    steps = np.diff(np.log(np.r_[1.0, fit.history]))
    assert np.all(np.abs(steps) < clip)  # the trust region never bound
    x = (steps - clip / 2) * k / st.sigma["temperature"]
    lo, hi = chi2_bounds(rounds)
    assert lo < float(np.sum(x**2)) < hi


@pytest.mark.parametrize("eps", [0.0, -1.0, math.inf, math.nan, "1", True, None])
def test_epsilon_is_checked_by_the_shared_rule(eps):
    with pytest.raises(UsageError, match="`epsilon` must be a positive finite number"):
        check_epsilon_delta(eps, 1e-5)


def test_budget_is_checked():
    for delta in (0.0, 1.0, -1e-5, True, None):
        with pytest.raises(UsageError, match=r"`delta` must be in \(0, 1\)"):
            check_epsilon_delta(1.0, delta)
    with pytest.warns(UserWarning, match="weak guarantee"):
        check_epsilon_delta(20.0, 1e-5)


def test_missing_dp_accounting_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(UsageError, match=r"pip install 'fedeval\[accounting\]'"):
        dp_statement(1.0, 1e-5, releases=1, clip={"temperature": 0.5}, rounds=1, participation=1)


def test_a_client_touches_only_the_rounds_it_is_scheduled_in():
    # What the accountant charges for: with disjoint cohorts (m·T ≤ K) a client is in one round;
    # removing its data changes nothing before that round (same schedule and noise draws), and
    # the DP statement counts r = 1 release for it (plus the check), not T.
    rng = np.random.default_rng(0)
    k, c, rounds = 40, 3, 4
    y = rng.integers(0, c, 2000)
    z = 4.0 * np.eye(c)[y] + rng.normal(0, 1.5, (2000, c))
    client = rng.integers(0, k, 2000)
    st = dp_statement(
        1.0, 1e-5, releases=1, clip={"temperature": 0.5}, rounds=rounds, participation=0.25
    )
    kw = dict(rounds=rounds, participation=0.25, dp=st)
    plan = schedule(k, rounds, 0.25, np.random.default_rng(1))
    assert plan.sum(axis=0).max() == 1  # m = 10, T = 4, K = 40: every client in one round
    for who in (int(np.flatnonzero(plan[2])[0]), int(np.flatnonzero(plan[3])[0])):
        keep = client != who
        runs = [
            fed_temperature(
                z[rows],
                y[rows],
                client[rows],
                k,
                participation_rng=np.random.default_rng(1),
                noise_rng=np.random.default_rng(2),
                **kw,
            )
            for rows in (np.ones(len(y), bool), keep)
        ]
        first = int(np.flatnonzero(plan[:, who])[0])
        np.testing.assert_array_equal(runs[0].history[:first], runs[1].history[:first])
        assert runs[0].history[first] != runs[1].history[first]
