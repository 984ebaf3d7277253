"""Secure aggregation without noise: the aggregator learns exact sums of one-hot level counts.

A `fedeval.privacy.base.ReleaseModel`: no differential privacy, so no sensitivity, ε or noise;
its claim says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fedeval.core.config import ModelTraits, PrivacyConfig, PrivacyModel, Unit
from fedeval.core.hierarchy import coarsen, levels_from_leaves
from fedeval.core.release import Release, ScoreHistogram, example_nodes, level_offsets
from fedeval.privacy.base import CLASSES, ClientBatch, SavedCounts, counts_public, first_cell
from fedeval.privacy.events import DpEvent, NoNoiseEvent

if TYPE_CHECKING:
    from fedeval.privacy.mechanism import Mechanism

TRAITS = ModelTraits(PrivacyModel.FEDERATED, adds_noise=False, masked=True, shares_noise=False)
"""Exact sums: no noise, no ε, nothing drawn per client (so none split over the clients, and a
client that drops out takes none with it); reports travel under pairwise masks (secure
aggregation): the server sees cohort sums."""


# --- the claim -------------------------------------------------------------------------------


def _none(config: PrivacyConfig) -> None:
    """No noise, so no sensitivity, ε, α or probe: every number of a DP claim is None."""
    return None


sensitivity = tree_epsilon = count_alpha = oue_epsilon = probe_epsilon = probe_sensitivity = _none


def sampler_delta(mech: Mechanism) -> float | None:
    return None


def parameters(mech: Mechanism) -> dict[str, Any]:
    return {
        "name": "secure aggregation",
        "noise": "none",
        "note": "exact sums; no differential privacy: an adversary who knows every "
        "other client's data can recover the remaining one",
    }


def probe_parameters(mech: Mechanism) -> dict[str, Any] | None:
    return None


def event(mech: Mechanism) -> DpEvent:
    return NoNoiseEvent()


def claim(mech: Mechanism) -> str:
    return (
        "no differential privacy: secure aggregation hides individual reports but "
        "the released sums are exact"
    )


def server_learns(mech: Mechanism) -> str:
    return (
        "which clients take part, and the exact sum of each cohort's reports; a "
        "single report stays hidden unless all its masking neighbours collude "
        "with the server"
    )


def error_rates() -> tuple[str, str]:
    """The papers' error rates (Table 1) of P/R/A and the AUC, for orientation."""
    return ("2^-h", "1/B²")


def binning_buckets(n: float, epsilon: float | None) -> float:
    """B for histogram binning before rounding and clamping: n^{1/3} balances sampling error
    against bucket width without noise (Cormode & Markov, section 5)."""
    return float(n ** (1 / 3))


def probe_words(config: PrivacyConfig) -> str:
    """What the probe of a two-phase `auto` takes, in words (federated has none)."""
    return ""


def report_bytes(config: PrivacyConfig) -> float:
    """Payload one client sends per report: 4 bytes per masked entry (every released node)."""
    return 4.0 * int(level_offsets(config)[-1])


def batch_width(config: PrivacyConfig) -> int:
    """Entries one client's report holds, for sizing batches of clients: its node vector."""
    return int(level_offsets(config)[-1])


def check_counts(saved: SavedCounts, fail: Callable[[str], Exception]) -> None:
    """What exact sums must satisfy (`fedeval.documents.consistency`): non-negative counts, each
    level's cells summing to the level above, every level counting every row, positives ≤ rows,
    rows ≤ clients × L under unit client."""
    config, levels, reporters = saved.config, saved.levels, saved.reporters
    n_clients = saved.n_clients
    for k, lv in zip(config.levels, levels, strict=True):
        if np.any(lv < 0):
            c, j = first_cell(lv < 0)
            raise fail(
                f"level {k}, {CLASSES[c]}, cell {j} holds {int(lv[c, j])}; an exact federated "
                "count cannot be negative"
            )
    rows = [int(lv.sum()) for lv in levels]
    if reporters is not None:
        rows = [int(r) for r in reporters]
    for k, lv, n in zip(config.levels, levels, rows, strict=True):
        positives = int(lv[1].sum())
        if positives > n:
            raise fail(f"level {k} counts {positives} positives among {n} rows (positives > rows)")
    for i in range(len(levels) - 1):
        k, parent, child = config.levels[i], levels[i], levels[i + 1]
        summed = coarsen(child, k)
        if np.any(summed != parent):
            c, j = first_cell(summed != parent)
            raise fail(
                f"level {k}, {CLASSES[c]}, cell {j} holds {int(parent[c, j])} but its cells at "
                f"level {config.levels[i + 1]} sum to {int(summed[c, j])} (exact levels must agree)"
            )
    totals = [int(lv.sum()) for lv in levels]
    for k, total in zip(config.levels, totals, strict=True):
        if total != totals[0]:
            raise fail(
                f"level {k} totals {total} rows but level {config.levels[0]} totals {totals[0]} "
                "(every exact level counts every row)"
            )
    if reporters is not None:
        for k, total, n in zip(config.levels, totals, reporters, strict=True):
            if total != int(n):
                raise fail(f"level {k} totals {total} rows but states {int(n)} reporters")
    if config.unit is Unit.CLIENT and n_clients is not None and totals:
        cap = int(n_clients) * config.examples_per_unit
        if totals[0] > cap:
            raise fail(
                f"{totals[0]} rows from {n_clients} clients exceed the cap of "
                f"{config.max_examples} per client"
            )


# --- the pipeline ----------------------------------------------------------------------------


def exact_counts(leaf_counts: np.ndarray, config: PrivacyConfig) -> np.ndarray:
    """The flat node vector of exact counts, from per-class leaf counts of shape (2, 2^h)."""
    return np.concatenate([lv.ravel() for lv in levels_from_leaves(leaf_counts, config.levels)])


def onehot_reports(rows: ClientBatch, config: PrivacyConfig) -> np.ndarray:
    """Each client's report: its examples' one-hot counts at every level, shape (n_clients, D)."""
    d = int(level_offsets(config)[-1])
    nodes = example_nodes(rows.cells, rows.labels, config)
    flat = (rows.client.astype(np.int64)[:, None] * d + nodes).ravel()
    return np.bincount(flat, minlength=rows.n_clients * d).reshape(rows.n_clients, d)


def draw(
    leaf_counts: np.ndarray, n_clients: int, config: PrivacyConfig, rng: np.random.Generator
) -> Release:
    return Release.of_cohort(
        config,
        exact_counts(leaf_counts, config),
        None,
        n_clients,
        clients_public=counts_public(config),
    )


def client_reports(
    rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, None]:
    """One-hot counts per client, and no separate count (None)."""
    return onehot_reports(rows, config), None


def chunk_sum(
    rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, None]:
    """The sum of `client_reports` over the clients, without a dense (n_clients, D) array."""
    d = int(level_offsets(config)[-1])
    return np.bincount(example_nodes(rows.cells, rows.labels, config).ravel(), minlength=d), None


def decode(release: Release) -> tuple[list[np.ndarray], list[float]]:
    return [c.astype(np.float64) for c in release.level_counts()], [0.0] * len(
        release.config.levels
    )


def measurement_noise(hist: ScoreHistogram, n_draws: int, rng: np.random.Generator) -> None:
    """No noise: secure aggregation releases exact sums."""
    return None
