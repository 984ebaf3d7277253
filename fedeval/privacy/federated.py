"""Secure aggregation without noise: the aggregator learns exact sums of one-hot level counts."""

from __future__ import annotations

import numpy as np

from fedeval.core.config import PrivacyConfig
from fedeval.core.hierarchy import levels_from_leaves
from fedeval.core.release import Release, example_nodes, level_offsets
from fedeval.privacy.mechanism import mechanism_of


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


def draw(
    leaf_counts: np.ndarray, n_clients: int, config: PrivacyConfig, rng: np.random.Generator
) -> Release:
    return Release.of_cohort(
        config,
        exact_counts(leaf_counts, config),
        None,
        n_clients,
        clients_public=mechanism_of(config).clients_public,
    )


def client_reports(cells, labels, client, n_clients, config, cohort_size, rng):
    """One-hot counts per client, and no separate count (None)."""
    return onehot_reports(cells, labels, client, n_clients, config), None


def chunk_sum(cells, labels, client, n_clients, config, cohort_size, rng):
    """The sum of `client_reports` over the clients, without a dense (n_clients, D) array."""
    d = int(level_offsets(config)[-1])
    return np.bincount(example_nodes(cells, labels, config).ravel(), minlength=d), None


def decode(release: Release) -> tuple[list[np.ndarray], list[float]]:
    return [c.astype(np.float64) for c in release.level_counts()], [0.0] * len(
        release.config.levels
    )


def measurement_noise(hist, n_draws: int, rng: np.random.Generator) -> None:
    """No noise: secure aggregation releases exact sums."""
    return None
