"""The ε audit of a release whose tree splits ε unequally over its levels (distdp,
`fedeval.privacy.level_split`), through the audit's public functions: the deployed per-client
path (Pólya shares sized to the cohort, pairwise masks, the server's unmasking, the release
document), each cohort's unmasked noise per level, and the ε lower bound. Each check is also
run against a split that noises a level for more ε than the claim charges it, and must fail.

The likelihood ratio of D over D′ under discrete Laplace α_k on level k is
Σ_k ln(1/α_k)·Λ_k (Λ_k the Laplace statistic of level k's counts, `audit.laplace_statistic`).
The auditor does not trust the claimed α_k: it scans each level's Λ_k alone and weighted sums
in which one level's weight is raised to what it would be had that level the whole ε_tree
(1/share_k times the claim's), Bonferroni-corrected over the statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedeval import audit
from fedeval.core.config import PrivacyConfig
from fedeval.core.release import level_offsets
from fedeval.privacy import distdp, level_split

SPLITS = [
    audit.Scenario("distdp", "add-remove", height=3, split=(1, 0.8)),
    audit.Scenario("distdp", "replace", height=3, split=(2, 0.5)),
    audit.Scenario("distdp", "add-remove", "client", 2, height=3, split=(1, 0.8)),
    audit.Scenario("distdp", "replace", "client", 2, height=3, split=(1, 0.3)),
]


def _quantiles(a: np.ndarray, b: np.ndarray, count: int = 48) -> list[float]:
    pooled = np.concatenate([a, b])
    distinct = np.unique(pooled)
    if len(distinct) <= count:
        return [float(x) for x in distinct]
    return sorted({float(x) for x in np.quantile(pooled, np.linspace(0.005, 0.995, count))})


def split_bound(scenario: audit.Scenario, trials: int, rng: np.random.Generator):
    """The best ε lower bound over each level's Λ_k, the claim's weighted sum and the sums
    with one level's weight raised to the whole ε_tree (module docstring)."""
    cfg = scenario.config()
    d, dp = scenario.datasets()
    c, c_prime = audit.exact_counts(scenario, d), audit.exact_counts(scenario, dp)
    x = audit.distdp_release_counts(scenario, d, trials, rng)
    y = audit.distdp_release_counts(scenario, dp, trials, rng)
    off = level_offsets(cfg)
    parts = [
        [
            audit.laplace_statistic(
                z[:, off[i] : off[i + 1]], c[off[i] : off[i + 1]], c_prime[off[i] : off[i + 1]]
            )
            for i in range(len(cfg.levels))
        ]
        for z in (x, y)
    ]
    assert cfg.epsilon is not None
    claimed = [-math.log(a) for a in level_split.level_alphas(cfg, cfg.epsilon)]
    weightings = [claimed] + [
        [w / share if i == j else w for i, w in enumerate(claimed)]
        for j, share in enumerate(cfg.level_shares)
    ]
    candidates = [(parts[0][i], parts[1][i]) for i in range(len(cfg.levels))]
    for w in weightings:
        candidates.append(
            tuple(sum(wi * p for wi, p in zip(w, side, strict=True)) for side in parts)
        )
    each = 1.0 - 0.001 / len(candidates)
    best = audit.EpsilonBound(0.0, "none", 2 * trials)
    for a, b in candidates:
        found = audit.epsilon_lower_bound(a, b, confidence=each, thresholds=_quantiles(a, b))
        if found.epsilon_lb > best.epsilon_lb:
            best = found
    return best


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SPLITS, ids=lambda s: s.name)
def test_epsilon_lower_bound_of_a_split_within_claim(scenario, trials):
    bound = split_bound(scenario, trials, np.random.default_rng(20261127))
    assert bound.epsilon_lb <= scenario.epsilon, bound


def _noised_for_more(level: int, factor: float):
    """A broken split: level `level`'s noise drawn for `factor` times the ε the claim
    charges it (the others as claimed); the claim's words and numbers unchanged."""
    honest = distdp.level_alphas

    def alphas(config: PrivacyConfig) -> tuple[float, ...]:
        out = list(honest(config))
        out[level] = out[level] ** factor  # α = exp(−ε_k/Δ_k): ε_k·factor
        return tuple(out)

    return alphas


@pytest.mark.slow
def test_epsilon_audit_catches_a_level_noised_for_more_than_its_share(monkeypatch, trials):
    """Broken on purpose: the finest level, charged (1 − s)/2 = 0.1 of ε, noised as if it had
    the whole ε (the levels' ε then add up to 1.9, not 1)."""
    scenario = SPLITS[0]
    monkeypatch.setattr(distdp, "level_alphas", _noised_for_more(2, 10.0))
    bound = split_bound(scenario, trials, np.random.default_rng(5))
    assert bound.epsilon_lb > scenario.epsilon, bound


@pytest.mark.parametrize("scenario", SPLITS[:3:2], ids=lambda s: s.name)
def test_every_cohort_carries_each_levels_full_noise(scenario, trials):
    cfg = scenario.config()
    off = level_offsets(cfg)
    assert cfg.epsilon is not None
    stated = level_split.level_variances(level_split.level_alphas(cfg, cfg.epsilon))
    for noise in audit.cohort_noise(scenario, trials // 4, np.random.default_rng(7)):
        for i, v in enumerate(stated):
            lo, hi = audit.variance_interval(noise[:, off[i] : off[i + 1]])
            assert lo <= v <= hi, f"level {cfg.levels[i]}: [{lo:.2f}, {hi:.2f}] against {v:.2f}"
        worst, bound = audit.correlation_bound(noise)
        assert worst < bound


def test_cohort_audit_catches_a_level_noised_for_more_than_its_share(monkeypatch, trials):
    scenario = SPLITS[0]
    cfg = scenario.config()
    off = level_offsets(cfg)
    assert cfg.epsilon is not None
    stated = level_split.level_variances(level_split.level_alphas(cfg, cfg.epsilon))
    monkeypatch.setattr(distdp, "level_alphas", _noised_for_more(2, 10.0))
    noise = audit.cohort_noise(scenario, trials // 4, np.random.default_rng(8))[0]
    lo, hi = audit.variance_interval(noise[:, off[2] : off[3]])
    assert not lo <= stated[2] <= hi


TWO_PHASE_SPLITS = [
    audit.Scenario("distdp", "add-remove", height="auto", split=(2, 0.8)),
    audit.Scenario("distdp", "replace", "client", 2, height="auto", split=(3, 0.5)),
    audit.Scenario("distdp", "add-remove", height="auto", split=(2, 0.8, 1.25)),  # s(4) = 0.6
]
"""`--height auto` with the tree's ε split: the probe chooses h = 4 here (the floor), so levels
1..f and f + 1..4 are both released."""


@pytest.mark.slow
@pytest.mark.parametrize("scenario", TWO_PHASE_SPLITS, ids=lambda s: s.name)
def test_two_phase_audit_of_a_split_within_claim(scenario, trials):
    """The deployed two-phase path (probe shares, the height, per-level Pólya shares, masks,
    the release document) weighed per level by the claim (`fedeval.audit.level_weights`)."""
    bound = audit.audit_epsilon(scenario, trials, np.random.default_rng(20261128))
    assert bound.epsilon_lb <= scenario.epsilon, bound


@pytest.mark.slow
def test_two_phase_audit_catches_finer_levels_noised_for_more_than_their_share(monkeypatch, trials):
    """Broken on purpose: each level finer than f, charged (1 − s)/2 = 0.1 of ε_tree, noised
    as if it had ten times that (the levels' ε then add up to 2.7, not 1)."""
    honest = distdp.level_alphas

    def alphas(config: PrivacyConfig) -> tuple[float, ...]:
        out = honest(config)
        if not config.level_split:
            return out
        fine = [k > config.split_level for k in config.levels]
        return tuple(a**10 if f else a for a, f in zip(out, fine, strict=True))

    monkeypatch.setattr(distdp, "level_alphas", alphas)
    bound = audit.audit_epsilon(TWO_PHASE_SPLITS[0], trials, np.random.default_rng(3))
    assert bound.epsilon_lb > 1.0, bound


def test_two_phase_fast_trials_of_a_split_equal_the_documents():
    # The audit's batched height choice (`fedeval.audit.heights`) reads the split's per-metric
    # noise as `probe.height` does: the same heights, released counts and statistic.
    scenario = audit.Scenario("distdp", "add-remove", height="auto", per_client=532, split=(4, 0.8))
    docs = audit.distdp_two_phase_statistic(scenario, 40, np.random.default_rng(3), documents=40)
    fast = audit.distdp_two_phase_statistic(scenario, 40, np.random.default_rng(3), documents=0)
    assert len(np.unique(docs[2])) >= 2
    for a, b in zip(docs, fast, strict=True):
        np.testing.assert_array_equal(a, b)
