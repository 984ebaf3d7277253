"""Distributed DP: every client adds Pólya noise shares; each cohort's sum is discrete Laplace.

The sensitivity, α and the claim come from `fedeval.privacy.mechanism.Mechanism` (Δ = levels·L
under add/remove, twice that under replace). Noise α = exp(−ε/Δ) on every count gives pure ε-DP
(Cormode & Markov, section 2.2 and appendix A). Shares are sized to the cohort: each of its m
clients adds Pólya(1/m, α) − Pólya(1/m, α), so every secure sum the server unmasks on its own
already carries the whole discrete Laplace (a cohort sized for N > m clients would carry only
Pólya(m/N) noise: far less private than claimed). A release of c cohorts carries c such noises.

No exact count travels: a client's report holds its noisy node counts only (not its number of
examples), and totals are estimated from the noisy counts.
"""

from __future__ import annotations

import numpy as np

from fedeval.core.config import PrivacyConfig
from fedeval.core.release import Probe, Release, level_offsets
from fedeval.privacy import federated
from fedeval.privacy.mechanism import mechanism_of
from fedeval.privacy.noise import (
    dense,
    discrete_laplace,
    discrete_laplace_variance,
    polya,
    polya_share_events,
)


def alpha(config: PrivacyConfig) -> float:
    """α = exp(−ε/Δ) of every count (the mechanism's)."""
    a = mechanism_of(config).alpha
    if a is None:
        raise ValueError(f"alpha is defined under distdp only; the model is {config.model.value}")
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
    noise = discrete_laplace(alpha(config), exact.shape, rng)
    return Release.of_cohort(
        config,
        exact + noise,
        None,
        n_clients,
        probe,
        clients_public=mechanism_of(config).clients_public,
    )


def share_clients(config: PrivacyConfig, cohort_size: int) -> int:
    """The number of clients whose shares must sum to the discrete Laplace: the cohort's m, or
    m − t when t colluders are tolerated (each share is then Pólya(1/(m − t), α))."""
    honest = cohort_size - config.colluders
    if honest < 1:
        raise ValueError(f"a cohort of {cohort_size} clients with {config.colluders} colluders")
    return honest


def client_reports(cells, labels, client, n_clients, config, cohort_size, rng):
    """One-hot counts plus a fresh Pólya share sized to the cohort on every node, per client
    (to its m − t honest clients with t colluders tolerated).

    Returns (reports (n_clients, D), None): a distdp report carries no exact example count."""
    reports = federated.onehot_reports(cells, labels, client, n_clients, config)
    d = int(level_offsets(config)[-1])
    size = share_clients(config, cohort_size)
    at, value = polya_share_events(size, alpha(config), n_clients * d, rng)
    return reports + dense(at, value, (n_clients, d)), None


def chunk_sum(cells, labels, client, n_clients, config, cohort_size, rng):
    """The sum of `client_reports` over the clients, drawn from the generator exactly as they
    are (same shares), without a dense (n_clients, D) array: the one-hot counts and each
    client's share events summed per node."""
    d = int(level_offsets(config)[-1])
    counts = federated.chunk_sum(cells, labels, client, n_clients, config, cohort_size, rng)[0]
    size = share_clients(config, cohort_size)
    at, value = polya_share_events(size, alpha(config), n_clients * d, rng)
    return counts + dense(at % d, value, (d,)), None


def decode(release: Release) -> tuple[list[np.ndarray], list[float]]:
    """Counts as measured; each cohort added one discrete Laplace per count (at most
    cohort_floor/(cohort_floor − t) of them with t colluders tolerated: the bound is used)."""
    cfg = release.config
    var = release.cohorts * discrete_laplace_variance(alpha(cfg)) * cfg.share_factor
    return [c.astype(np.float64) for c in release.level_counts()], [var] * len(
        release.config.levels
    )


def measurement_noise(hist, n_draws: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Fresh noise on every released count, as the release got it (one discrete Laplace per
    cohort; with t colluders tolerated, Pólya(f, α) − Pólya(f, α) per cohort at the bound
    f = cohort_floor/(cohort_floor − t)): per level, (n_draws, 2, 2^k)."""
    a = alpha(hist.config)
    f = hist.config.share_factor
    out = []
    for k in hist.config.levels:
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
