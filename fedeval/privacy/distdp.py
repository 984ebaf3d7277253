"""Distributed DP: every client adds Pólya noise shares; each cohort's sum is discrete Laplace.

A `fedeval.privacy.base.ReleaseModel`: this module states the sensitivity, α and the claim
(`fedeval.privacy.mechanism.Mechanism` reads them; Δ = levels·L under add/remove, twice that
under replace). Noise α = exp(−ε/Δ) on every count gives pure ε-DP
(Cormode & Markov, section 2.2 and appendix A). Shares are sized to the cohort: each of its m
clients adds Pólya(1/m, α) − Pólya(1/m, α), so every secure sum the server unmasks on its own
already carries the whole discrete Laplace (a cohort sized for N > m clients would carry only
Pólya(m/N) noise: far less private than claimed). A release of c cohorts carries c such noises.

No exact count travels: a client's report holds its noisy node counts only (not its number of
examples), and totals are estimated from the noisy counts.

A release may split the tree's ε unequally over its levels (`fedeval.privacy.level_split`:
level k's counts at α_k = exp(−ε_k/Δ_k), Σ ε_k = ε_tree); without a split (the default) every
count gets the one α above, drawn exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fedeval.core.config import ModelTraits, PrivacyConfig, PrivacyModel, Relation
from fedeval.core.release import Probe, Release, ScoreHistogram, level_offsets
from fedeval.privacy import federated, generator, level_split
from fedeval.privacy.base import ClientBatch, SavedCounts, counts_public
from fedeval.privacy.events import ComposedEvent, DiscreteLaplaceEvent, DpEvent
from fedeval.privacy.noise import (
    dense,
    discrete_laplace,
    discrete_laplace_variance,
    laplace_alpha,
    polya,
    polya_share_events,
)

if TYPE_CHECKING:
    from fedeval.privacy.mechanism import Mechanism

TRAITS = ModelTraits(PrivacyModel.DISTDP, adds_noise=True, masked=True, shares_noise=True)
"""Reports (counts plus Pólya shares) travel under pairwise masks: the server sees cohort sums.
Each client of a cohort adds a share of the noise: a client that drops out takes its share with
it, and the cohort's sum would be less private than claimed (refused)."""


# --- the numbers the claim is made of ---------------------------------------------------------


def _total_epsilon(config: PrivacyConfig) -> float:
    """ε of the whole release (PrivacyConfig has checked that distdp carries one)."""
    if config.epsilon is None:
        raise AssertionError("distdp configuration without epsilon")
    return config.epsilon


def _factor(config: PrivacyConfig) -> int:
    """2 under replace (one leaf path loses, another gains), 1 under add/remove."""
    return 2 if config.relation is Relation.REPLACE else 1


def sensitivity(config: PrivacyConfig) -> int:
    """Δ of the release: levels·L, twice that under replace."""
    return _factor(config) * len(config.levels) * config.examples_per_unit


def tree_epsilon(config: PrivacyConfig) -> float:
    """ε of the tree: the whole ε, less the probe's share s·ε after a probe."""
    eps = _total_epsilon(config)
    if config.probed:
        return eps * (1.0 - config.probe_share)
    return eps


def count_alpha(config: PrivacyConfig) -> float | None:
    """α = exp(−ε_tree/Δ) of every count; None when the levels have α's of their own
    (`level_alphas`)."""
    if config.level_split:
        return None
    return laplace_alpha(tree_epsilon(config), sensitivity(config))


def level_alphas(config: PrivacyConfig) -> tuple[float, ...]:
    """α_k of each released level's counts: `alpha` for every level without a split (the same
    function, so the pipeline draws what it always drew), else exp(−ε_k/Δ_k)."""
    if not config.level_split:
        return (alpha(config),) * len(config.levels)
    return level_split.level_alphas(config, tree_epsilon(config))


def oue_epsilon(config: PrivacyConfig) -> None:
    return None


def probe_epsilon(config: PrivacyConfig) -> float | None:
    """s·ε: the probe's share of ε (sequential composition with the tree's (1 − s)·ε)."""
    if not config.probed:
        return None
    return _total_epsilon(config) * config.probe_share


def probe_sensitivity(config: PrivacyConfig) -> int | None:
    """Δ of the probe's histogram: L under add/remove, 2L under replace (one example is one
    count of it)."""
    if not config.probed:
        return None
    return _factor(config) * config.examples_per_unit


def sampler_delta(mech: Mechanism) -> float:
    """δ the samplers' 53-bit floating point costs (`fedeval.privacy.generator.sampler_delta`)."""
    cfg = mech.config
    return generator.sampler_delta(_total_epsilon(cfg), mech.released_counts, cfg.share_factor)


# --- the claim ---------------------------------------------------------------------------------


def parameters(mech: Mechanism) -> dict[str, Any]:
    cfg = mech.config
    t = cfg.colluders
    shares = (
        "each of the m clients of a cohort adds Pólya(1/m, α) − Pólya(1/m, α) to "
        "every count, so every cohort's secure sum carries discrete Laplace "
        "P(k) ∝ α^|k| by itself"
        if t == 0
        else f"each of the m clients of a cohort adds Pólya(1/(m − {t}), α) − "
        f"Pólya(1/(m − {t}), α) to every count, so the shares of any m − {t} of "
        "them sum to discrete Laplace P(k) ∝ α^|k|: a cohort's sum carries "
        f"m/(m − {t}) ≤ {cfg.share_factor:.6g} times that noise (m ≥ "
        f"{cfg.cohort_floor})"
    )
    out: dict[str, Any] = {
        "name": "discrete Laplace from per-client Pólya shares",
        "alpha": mech.alpha,
        "sensitivity": mech.sensitivity,
        "noise_variance_per_count": mech.noise_variance,
        "colluders": t,
        "shares": shares,
        "largest_fast_draw": generator.fast_sampler_bound(mech.alpha or 0.5),
    }
    if cfg.level_split:
        alphas = level_alphas(cfg)
        out |= {
            "largest_fast_draw": generator.fast_sampler_bound(max(alphas)),
            "levels": _level_records(cfg, alphas),
            "composition": "sequential over the levels: Σ ε_k = ε_tree (a unit moves each "
            "level's counts by at most Δ_k)",
        }
    return out


def _level_records(cfg: PrivacyConfig, alphas: tuple[float, ...]) -> list[dict[str, Any]]:
    """Each released level's share of ε_tree, ε_k, α_k, Δ_k and noise variance per count."""
    eps = level_split.level_epsilons(cfg, tree_epsilon(cfg))
    sens = level_split.level_sensitivity(cfg)
    return [
        {
            "level": k,
            "share": share,
            "epsilon": e,
            "alpha": a,
            "sensitivity": sens,
            "noise_variance_per_count": discrete_laplace_variance(a),
        }
        for k, share, e, a in zip(cfg.levels, cfg.level_shares, eps, alphas, strict=True)
    ]


def probe_parameters(mech: Mechanism) -> dict[str, Any]:
    a = mech.probe_alpha
    assert a is not None
    return {
        "name": "discrete Laplace on the per-class histogram",
        "epsilon": mech.probe_epsilon,
        "alpha": a,
        "sensitivity": mech.probe_sensitivity,
        "noise_variance_per_count": discrete_laplace_variance(a),
        "composition": "sequential: ε_probe + ε_tree = ε",
    }


def event(mech: Mechanism) -> DpEvent:
    """Discrete Laplace (a = ε_tree/Δ) on the tree, after the probe's (s·ε/Δ_probe) if any."""
    cfg = mech.config
    tree: DpEvent = DiscreteLaplaceEvent(
        tree_epsilon(cfg) / sensitivity(cfg), sensitivity(cfg), cfg.colluders
    )
    if cfg.level_split:  # one discrete Laplace per level, composed
        sens_k = level_split.level_sensitivity(cfg)
        tree = ComposedEvent(
            tuple(
                DiscreteLaplaceEvent(e / sens_k, sens_k, cfg.colluders)
                for e in level_split.level_epsilons(cfg, tree_epsilon(cfg))
            )
        )
    sens = probe_sensitivity(cfg)
    if sens is None:
        return tree
    probe = DiscreteLaplaceEvent(_total_epsilon(cfg) * cfg.probe_share / sens, sens)
    return ComposedEvent((probe, tree))


def claim(mech: Mechanism) -> str:
    cfg = mech.config
    eps = cfg.epsilon
    tree = tree_epsilon(cfg)
    text = (
        f"{eps:g}-DP with δ = {mech.sampler_delta:.1e} for the whole release (pure "
        f"{eps:g}-DP for exact discrete Laplace noise; δ is the noise the samplers' "
        "53-bit floating point cannot draw, the draws within reach taken as exact); "
        f"neighbouring datasets {mech.neighbouring()}; "
        + (
            _split_words(cfg)
            if cfg.level_split
            else f"discrete Laplace α = {mech.alpha:.6g} on every count (Δ = {mech.sensitivity})"
        )
    )
    if cfg.probed:
        text += (
            f" at ε_tree = {tree:.6g}, after a probe of each class's "
            f"counts over {mech.probe_cells} cells at ε_probe = "
            f"{mech.probe_epsilon:.6g} (discrete Laplace α = {mech.probe_alpha:.6g}, "
            f"Δ = {mech.probe_sensitivity}) that chose "
            f"the height: {mech.probe_epsilon:.6g} + {tree:.6g} = {eps:g}"
        )
    if cfg.relation is Relation.ADD_REMOVE:
        text += (
            "; no exact count of examples, positives, clients or reports is "
            "released (totals are estimated from the noisy counts)"
        )
    elif mech.examples_public:
        text += "; the number of examples and of clients is public"
    else:
        text += (
            "; the number of clients is public (each client's number of examples "
            "is part of its data and is not released)"
        )
    t = cfg.colluders
    collusion = (
        "holds if every client of each cohort adds its noise share and none "
        "colludes with the server (a server that colludes with c of a cohort's m "
        "clients removes their shares, c/m of the noise: encode with --colluders)"
        if t == 0
        else f"holds if every client of each cohort adds its noise share, against a "
        f"server that colludes with up to {t} clients of each cohort (the shares of "
        f"the other m − {t} carry the whole noise)"
    )
    return f"{text}{mech._what_decides()}; {collusion}"


def _split_words(cfg: PrivacyConfig) -> str:
    """The levels' own discrete Laplaces in words: each level's ε_k, α_k and Δ_k, and their sum."""
    records = _level_records(cfg, level_alphas(cfg))
    each = ", ".join(
        f"level {r['level']}: ε = {r['epsilon']:.6g}, α = {r['alpha']:.6g}" for r in records
    )
    total = " + ".join(f"{r['epsilon']:.6g}" for r in records)
    return (
        f"discrete Laplace on each level's counts at its own share of ε_tree = "
        f"{tree_epsilon(cfg):.6g} (a share {cfg.split_share_here:.6g} spread evenly over the "
        f"levels up to {cfg.split_level}, the rest evenly over the finer ones"
        + (
            f": min({cfg.split_share:g}, 1 − (h − f)/({cfg.split_leaf_bound:g}·h)), so each "
            f"leaf's noise sd is at most about {cfg.split_leaf_bound:g}× the even tree's"
            if cfg.split_leaf_bound
            else ""
        )
        + "; Δ = "
        + f"{level_split.level_sensitivity(cfg)} per level, one node per level per example): "
        f"{each}; sequential composition over the levels, {total} = {tree_epsilon(cfg):.6g}"
    )


def server_learns(mech: Mechanism) -> str:
    t = mech.config.colluders
    text = (
        "which clients take part (public), and each cohort's noisy sum, which is "
        f"{mech.config.epsilon:g}-DP on its own (shares are sized to the cohort) "
        + (
            "as long as no client of the cohort colludes with it (c colluding "
            "clients of m hand it c/m of the noise)"
            if t == 0
            else f"even with up to {t} colluding clients of the cohort"
        )
        + "; a single report stays hidden unless all its masking neighbours collude "
        "with the server"
    )
    if mech.config.probed:
        text += (
            "; first, the probe round's noisy per-class histogram (each cohort's sum of the "
            "probe shares carries the probe's whole noise) and the height chosen from it"
        )
    return text


def error_rates() -> tuple[str, str]:
    """The papers' error rates (Table 1) of P/R/A and the AUC, for orientation."""
    return ("(εn)^(-2/3)", "1/B² + 1/(εn)")


def binning_buckets(n: float, epsilon: float | None) -> float:
    """B for histogram binning before rounding and clamping: n^{1/3}, as without noise
    (sampling noise dominates; Cormode & Markov, section 5)."""
    return federated.binning_buckets(n, epsilon)


def probe_words(config: PrivacyConfig) -> str:
    """What the probe of a two-phase `auto` takes, in words."""
    return (
        f"{config.probe_share:g}·ε buys noisy class totals that choose h; the tree gets "
        f"{1 - config.probe_share:g}·ε"
    )


def report_bytes(config: PrivacyConfig) -> float:
    """Payload one client sends per report: 4 bytes per masked entry (counts plus shares)."""
    return federated.report_bytes(config)


def batch_width(config: PrivacyConfig) -> int:
    """Entries one client's report holds, for sizing batches of clients: its node vector."""
    return federated.batch_width(config)


def check_counts(saved: SavedCounts, fail: Callable[[str], Exception]) -> None:
    """Nothing beyond integer counts: discrete Laplace noise makes any integer possible."""
    return None


# --- the pipeline ------------------------------------------------------------------------------


def alpha(config: PrivacyConfig) -> float:
    """α = exp(−ε/Δ) of the noise on every count: the claim's (`count_alpha`)."""
    if config.model is not TRAITS.model:
        raise ValueError(f"alpha is defined under distdp only; the model is {config.model.value}")
    a = count_alpha(config)
    if a is None:
        raise ValueError("the levels of this release have α's of their own (`level_alphas`)")
    return a


def draw(
    leaf_counts: np.ndarray,
    n_clients: int,
    config: PrivacyConfig,
    rng: np.random.Generator,
    *,
    probe: Probe | None = None,
) -> Release:
    """One cohort of all `n_clients` clients, its sum drawn at once: exact counts plus discrete
    Laplace (the sum of the cohort's Pólya shares, equal in distribution); `probe` is the
    round that chose the height of a two-phase release."""
    exact = federated.exact_counts(leaf_counts, config)
    if config.level_split:
        noise = level_split.noise_vector(config, level_alphas(config), rng)
    else:
        noise = discrete_laplace(alpha(config), exact.shape, rng)
    return Release.of_cohort(
        config,
        exact + noise,
        None,
        n_clients,
        probe,
        clients_public=counts_public(config),
    )


def share_clients(config: PrivacyConfig, cohort_size: int) -> int:
    """The number of clients whose shares must sum to the discrete Laplace: the cohort's m, or
    m − t when t colluders are tolerated (each share is then Pólya(1/(m − t), α))."""
    honest = cohort_size - config.colluders
    if honest < 1:
        raise ValueError(f"a cohort of {cohort_size} clients with {config.colluders} colluders")
    return honest


def client_reports(
    rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, None]:
    """One-hot counts plus a fresh Pólya share sized to the cohort on every node, per client
    (to its m − t honest clients with t colluders tolerated).

    Returns (reports (n_clients, D), None): a distdp report carries no exact example count."""
    reports = federated.onehot_reports(rows, config)
    d = int(level_offsets(config)[-1])
    size = share_clients(config, cohort_size)
    at, value = _share_events(config, size, rows.n_clients, rng)
    return reports + dense(at, value, (rows.n_clients, d)), None


def _share_events(
    config: PrivacyConfig, honest: int, n_clients: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Every client's Pólya shares over its node vector, sparse (flat index client·D + entry):
    one α for the even tree, level by level at α_k with a split."""
    if config.level_split:
        return level_split.share_events(config, level_alphas(config), honest, n_clients, rng)
    d = int(level_offsets(config)[-1])
    return polya_share_events(honest, alpha(config), n_clients * d, rng)


def chunk_sum(
    rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, None]:
    """The sum of `client_reports` over the clients, drawn from the generator exactly as they
    are (same shares), without a dense (n_clients, D) array: the one-hot counts and each
    client's share events summed per node."""
    d = int(level_offsets(config)[-1])
    counts = federated.chunk_sum(rows, config, cohort_size, rng)[0]
    size = share_clients(config, cohort_size)
    at, value = _share_events(config, size, rows.n_clients, rng)
    return counts + dense(at % d, value, (d,)), None


def decode(release: Release) -> tuple[list[np.ndarray], list[float]]:
    """Counts as measured; each cohort added one discrete Laplace per count (at most
    cohort_floor/(cohort_floor − t) of them with t colluders tolerated: the bound is used)."""
    cfg = release.config
    if not cfg.level_split:
        var = release.cohorts * discrete_laplace_variance(alpha(cfg)) * cfg.share_factor
        variances = [var] * len(cfg.levels)
    else:
        variances = [
            release.cohorts * discrete_laplace_variance(a) * cfg.share_factor
            for a in level_alphas(cfg)
        ]
    return [c.astype(np.float64) for c in release.level_counts()], variances


def measurement_noise(
    hist: ScoreHistogram, n_draws: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Fresh noise on every released count, as the release got it (one discrete Laplace per
    cohort; with t colluders tolerated, Pólya(f, α) − Pólya(f, α) per cohort at the bound
    f = cohort_floor/(cohort_floor − t)), each level at its own α_k: per level,
    (n_draws, 2, 2^k)."""
    f = hist.config.share_factor
    out = []
    for k, a in zip(hist.config.levels, level_alphas(hist.config), strict=True):
        shape = (n_draws, 2, 1 << k)
        if f == 1.0:
            x = discrete_laplace(a, shape, rng, np.float64)
            for _ in range(hist.cohorts - 1):
                x += discrete_laplace(a, shape, rng, np.float64)
        else:
            r = hist.cohorts * f
            x = (polya(r, a, shape, rng) - polya(r, a, shape, rng)).astype(np.float64)
        out.append(x)
    return out
