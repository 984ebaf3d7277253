"""Local DP: each example's report is an Optimal Unary Encoding of (label, cell) at one level.

The domain of a level-k report is label × cell (2 · 2^k bits), so one OUE report covers both
class histograms at the cost of one. Under the hierarchy shape each example reports one level,
chosen uniformly at random, with the full ε; the aggregator rescales that level's counts by
n / n_k (Cormode & Markov, appendix A; Wang et al. 2017). Changing an example's input changes
the distribution of two bits by a factor p(1 − q) / (q(1 − p)) = e^ε, so each report is ε-LDP.
Under unit client each example reports at ε/L, so a client's (at most L) reports compose to ε.
"""

from __future__ import annotations

import numpy as np

from fedeval.config import PrivacyConfig
from fedeval.hierarchy import coarsen
from fedeval.privacy.noise import oue_perturb, oue_probabilities, oue_sum
from fedeval.release import Release, level_offsets


def report_epsilon(config: PrivacyConfig) -> float:
    """ε of one example's report: the whole ε, or ε/L when a client's L reports share it."""
    return config.epsilon / config.examples_per_unit


def draw(
    leaf_counts: np.ndarray,
    n_clients: int,
    config: PrivacyConfig,
    population: int,
    rng: np.random.Generator,
) -> Release:
    """Split examples over the levels (multinomial per cell), then Binomial sums of OUE bits."""
    levels = config.levels
    g = len(levels)
    if g == 1:
        split = leaf_counts[..., None]
    else:
        split = rng.multinomial(leaf_counts, np.full(g, 1.0 / g))  # (2, L, g)
    parts, reporters = [], []
    for i, k in enumerate(levels):
        true_k = coarsen(split[..., i], k)  # (2, 2^k)
        n_k = int(split[..., i].sum())
        parts.append(oue_sum(true_k, n_k, report_epsilon(config), rng).ravel())
        reporters.append(n_k)
    return Release(
        config, population, np.concatenate(parts), np.asarray(reporters, np.int64), n_clients
    )


def example_reports(
    cells: np.ndarray, labels: np.ndarray, config: PrivacyConfig, rng: np.random.Generator
) -> tuple[np.ndarray, list[np.ndarray]]:
    """What every example sends: the index of its uniformly chosen level, and per level i the
    OUE bits (m_i, 2·2^k) of the examples that chose it, in their order."""
    levels = config.levels
    h = config.height
    group = rng.integers(len(levels), size=len(cells))
    bits = []
    for i, k in enumerate(levels):
        sel = group == i
        m = int(sel.sum())
        onehot = np.zeros((m, 2 << k), bool)
        onehot[np.arange(m), (labels[sel].astype(np.int64) << k) + (cells[sel] >> (h - k))] = True
        bits.append(oue_perturb(onehot, report_epsilon(config), rng))
    return group, bits


def client_reports(cells, labels, client, n_clients, config, population, rng):
    """Per example: pick a level, one-hot its (label, cell), randomise every bit; sum per client."""
    off = level_offsets(config)
    group, bits = example_reports(cells, labels, config, rng)
    reports = np.zeros((n_clients, int(off[-1])), np.int64)
    reporters = np.zeros((n_clients, len(config.levels)), np.int64)
    for i, b in enumerate(bits):
        sel = group == i
        np.add.at(reports[:, off[i] : off[i + 1]], client[sel], b.astype(np.int64))
        reporters[:, i] = np.bincount(client[sel], minlength=n_clients)
    return reports, reporters


def level_variance(n_total: int, n_k: int, k: int, epsilon: float) -> float:
    """Approximate variance of one decoded level-k count, assuming equal mass per cell.

    OUE noise n_k·q(1−q) + c·(p(1−p) − q(1−q)), over (p − q)², rescaled by (n/n_k)²; plus the
    sampling error of estimating a cell's count c from the n_k/n of examples that report level k.
    Used as the constrained-inference weight of that level.
    """
    p, q = oue_probabilities(epsilon)
    if n_k == 0:
        return float("inf")
    c = n_total / (2 << k)  # mean true count of a cell at this level
    scale = n_total / n_k
    oue = (n_k * q * (1 - q) + (c / scale) * (p * (1 - p) - q * (1 - q))) / (p - q) ** 2
    sampling = c * (scale - 1.0)
    return scale**2 * oue + sampling


def decode(release: Release) -> tuple[list[np.ndarray], list[float]]:
    p, q = oue_probabilities(report_epsilon(release.config))
    n_total = int(release.reporters.sum())
    measured, variances = [], []
    for c, n_k, k in zip(
        release.level_counts(), release.reporters, release.config.levels, strict=True
    ):
        if n_k == 0:
            measured.append(np.zeros(c.shape))
        else:
            measured.append((c - n_k * q) / (p - q) * (n_total / n_k))
        variances.append(level_variance(n_total, int(n_k), k, report_epsilon(release.config)))
    return measured, variances


def describe(config: PrivacyConfig, population: int) -> dict:
    p, q = oue_probabilities(report_epsilon(config))
    return {
        "name": "Optimal Unary Encoding",
        "p": p,
        "q": q,
        "epsilon_per_report": report_epsilon(config),
        "domain": "label × cell of one level",
        "levels_per_example": 1,
        "level_assignment": "uniform at random over the released levels"
        if len(config.levels) > 1
        else "the leaf level",
    }


def measurement_noise(hist, n_draws: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Fresh noise of each decoded count, per level (n_draws, 2, 2^k): normal with the OUE
    variance at the estimated count, plus the sampling error of the level's share of examples.

    The decoded count is a rescaled sum of many independent bits, so it is close to normal.
    """
    p, q = oue_probabilities(report_epsilon(hist.config))
    n_total = float(sum(hist.reporters))
    out = []
    for k, n_k in zip(hist.config.levels, hist.reporters, strict=True):
        c = np.clip(coarsen(hist.leaves, k), 0.0, n_total)  # estimated true counts
        scale = n_total / n_k if n_k else 0.0
        c_k = np.minimum(c / scale, n_k) if n_k else c * 0
        oue = (c_k * p * (1 - p) + (n_k - c_k) * q * (1 - q)) / (p - q) ** 2
        var = scale**2 * oue + c * max(scale - 1.0, 0.0)
        out.append(rng.standard_normal((n_draws, 2, 1 << k)) * np.sqrt(var))
    return out
