"""Secure aggregation without noise: the aggregator learns exact sums of one-hot level counts."""

from __future__ import annotations

import numpy as np

from fedeval.config import PrivacyConfig
from fedeval.hierarchy import levels_from_leaves
from fedeval.release import Release, example_nodes, level_offsets


def exact_counts(leaf_counts: np.ndarray, config: PrivacyConfig) -> np.ndarray:
    """The flat node vector of exact counts, from per-class leaf counts of shape (2, 2^h)."""
    return np.concatenate([lv.ravel() for lv in levels_from_leaves(leaf_counts, config.levels)])


def onehot_reports(
    cells: np.ndarray, labels: np.ndarray, client: np.ndarray, n_clients: int, config: PrivacyConfig
) -> np.ndarray:
    """Each client's report: its examples' one-hot counts at every level, shape (n_clients, D)."""
    d = int(level_offsets(config)[-1])
    nodes = example_nodes(cells, labels, config)
    flat = (client.astype(np.int64)[:, None] * d + nodes).ravel()
    return np.bincount(flat, minlength=n_clients * d).reshape(n_clients, d)


def reporters_per_client(client: np.ndarray, n_clients: int, config: PrivacyConfig) -> np.ndarray:
    """Every example reports on every level: (n_clients, n_levels) example counts."""
    per_client = np.bincount(client, minlength=n_clients)
    return np.repeat(per_client[:, None], len(config.levels), axis=1)


def draw(
    leaf_counts: np.ndarray,
    n_clients: int,
    config: PrivacyConfig,
    population: int,
    rng: np.random.Generator,
) -> Release:
    n = int(leaf_counts.sum())
    return Release(
        config,
        population,
        exact_counts(leaf_counts, config),
        np.full(len(config.levels), n, np.int64),
        n_clients,
    )


def client_reports(cells, labels, client, n_clients, config, population, rng):
    return onehot_reports(cells, labels, client, n_clients, config), reporters_per_client(
        client, n_clients, config
    )


def decode(release: Release) -> tuple[list[np.ndarray], list[float]]:
    return [c.astype(np.float64) for c in release.level_counts()], [0.0] * len(
        release.config.levels
    )


def describe(config: PrivacyConfig, population: int) -> dict:
    return {
        "name": "secure aggregation",
        "noise": "none",
        "note": "exact sums; no differential privacy: an adversary who knows every other "
        "client's data can recover the remaining one",
    }


def measurement_noise(hist, n_draws: int, rng: np.random.Generator) -> None:
    """No noise: secure aggregation releases exact sums."""
    return None
