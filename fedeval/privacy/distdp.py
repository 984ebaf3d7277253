"""Distributed DP: every client adds Pólya noise shares; their sum is discrete Laplace.

Sensitivity: one example adds 1 to one node at each released level of its class's tree, so the
L1 sensitivity of the release under adding or removing one example is Δ = number of released
levels (h for the hierarchy, 1 for the flat shape); under unit client, with each client's
examples capped at L, adding or removing a client moves the release by at most Δ = L · levels.
Noise α = exp(−ε/Δ) on every count gives pure ε-DP (Cormode & Markov, section 2.2 and appendix A).
"""

from __future__ import annotations

import numpy as np

from fedeval.config import PrivacyConfig
from fedeval.privacy import federated
from fedeval.privacy.noise import (
    discrete_laplace,
    discrete_laplace_variance,
    laplace_alpha,
    polya_share,
    polya_sum,
)
from fedeval.release import Release, level_offsets


def sensitivity(config: PrivacyConfig) -> int:
    """L1 sensitivity of the whole release to adding or removing one protected unit: one
    example touches one node per released level; a client under unit client up to L examples."""
    return len(config.levels) * config.examples_per_unit


def alpha(config: PrivacyConfig) -> float:
    return laplace_alpha(config.epsilon, sensitivity(config))


def draw(
    leaf_counts: np.ndarray,
    n_clients: int,
    config: PrivacyConfig,
    population: int,
    rng: np.random.Generator,
) -> Release:
    """Exact counts plus the sum of `n_clients` clients' shares, drawn at once."""
    exact = federated.draw(leaf_counts, n_clients, config, population, rng)
    noise = polya_sum(n_clients, population, alpha(config), exact.counts.shape, rng)
    return Release(config, population, exact.counts + noise, exact.reporters, n_clients)


def client_reports(cells, labels, client, n_clients, config, population, rng):
    """One-hot counts plus a fresh Pólya share on every node, per client."""
    reports, reporters = federated.client_reports(
        cells, labels, client, n_clients, config, population, rng
    )
    d = int(level_offsets(config)[-1])
    return reports + polya_share(population, alpha(config), (n_clients, d), rng), reporters


def decode(release: Release) -> tuple[list[np.ndarray], list[float]]:
    var = discrete_laplace_variance(alpha(release.config))
    return [c.astype(np.float64) for c in release.level_counts()], [var] * len(
        release.config.levels
    )


def describe(config: PrivacyConfig, population: int) -> dict:
    a = alpha(config)
    return {
        "name": "discrete Laplace from per-client Pólya shares",
        "alpha": a,
        "sensitivity": sensitivity(config),
        "noise_variance_per_count": discrete_laplace_variance(a),
        "shares": f"each of {population} clients adds Pólya(1/{population}, α) − "
        f"Pólya(1/{population}, α) to every count; the secure sum is discrete Laplace "
        "P(k) ∝ α^|k|",
    }


def measurement_noise(hist, n_draws: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Fresh discrete Laplace noise on every released count: per level, (n_draws, 2, 2^k)."""
    a = alpha(hist.config)
    return [
        discrete_laplace(a, (n_draws, 2, 1 << k), rng).astype(np.float64)
        for k in hist.config.levels
    ]
