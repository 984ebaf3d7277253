"""Round 1 of a two-phase release (`--height auto` under DP): noisy class totals choose h.

The AUC's best height depends on the minority class count m, which is private, so `auto` first
releases the two class totals and chooses the tree's height from them (`fedeval.core.params`):

- distdp: every client adds its [negatives, positives] and a Pólya share sized to all clients
  at α = exp(−s·ε/Δ) (Δ = L, or 2L under replace); the sum is the totals plus discrete Laplace.
  The tree then spends (1 − s)·ε (`fedeval.privacy.mechanism`).
- localdp: every report slot (padding too) is a probe report with probability s, drawn before
  any data is read; a probe report is the OUE of its label alone (two bits), at the report ε.
  The other reports go to the tree levels, chosen uniformly as without a probe.

The totals are part of the release (every document states them); the height is
post-processing of them, so no exact count of the data reaches the choice of h.
"""

from __future__ import annotations

import numpy as np

from fedeval.core.config import PrivacyConfig, PrivacyModel
from fedeval.core.params import probe_epsilon_per_example, probe_height
from fedeval.core.release import Probe
from fedeval.privacy.mechanism import mechanism_of
from fedeval.privacy.noise import (
    dense,
    discrete_laplace,
    oue_perturb_at,
    oue_probabilities,
    oue_sum,
    polya_share_events,
)


def _alpha(config: PrivacyConfig) -> float:
    a = mechanism_of(config).probe_alpha
    if a is None:
        raise ValueError("a distdp probe needs a two-phase distdp configuration")
    return a


def _report_epsilon(config: PrivacyConfig) -> float:
    eps = mechanism_of(config).report_epsilon
    if eps is None:
        raise ValueError("a localdp probe needs a localdp configuration")
    return eps


def draw_distdp(totals: np.ndarray, config: PrivacyConfig, rng: np.random.Generator) -> Probe:
    """The fast path: exact [negatives, positives] plus discrete Laplace (the sum of all
    clients' Pólya shares, equal in distribution)."""
    exact = np.asarray(totals, np.int64)
    return Probe(exact + discrete_laplace(_alpha(config), 2, rng))


def client_sum_distdp(
    labels: np.ndarray, n_clients: int, config: PrivacyConfig, rng: np.random.Generator
) -> Probe:
    """The per-client round: each of the `n_clients` clients adds its class counts and a Pólya
    share sized to all of them on both totals (drawn as sparse events, summed per total); to
    all but the t colluders tolerated (`config.colluders`), as the tree's shares are."""
    counts = np.bincount(labels.astype(np.int64), minlength=2)[:2]
    size = n_clients - config.colluders
    at, value = polya_share_events(size, _alpha(config), n_clients * 2, rng)
    return Probe(counts + dense(at % 2, value, (2,)))


def draw_localdp(
    leaf_counts: np.ndarray, pad: int, config: PrivacyConfig, rng: np.random.Generator
) -> tuple[Probe, np.ndarray, int]:
    """The fast path: which reports are probe reports (Binomial(s) per cell, and of the `pad`
    empty reports), then the Binomial sums of their two OUE bits. Returns (probe, the leaf
    counts and the empty reports the tree still gets)."""
    s = config.probe_share
    taken = rng.binomial(leaf_counts, s)
    taken_pad = int(rng.binomial(pad, s)) if pad else 0
    reports = int(taken.sum()) + taken_pad
    bits = oue_sum(taken.sum(axis=-1), reports, _report_epsilon(config), rng)
    return Probe(bits, reports), leaf_counts - taken, pad - taken_pad


def roles(n_reports: int, config: PrivacyConfig, rng: np.random.Generator) -> np.ndarray:
    """Which of `n_reports` report slots are probe reports: each with probability s, drawn
    before their data is read."""
    return rng.random(n_reports) < config.probe_share


def client_bits_localdp(
    labels: np.ndarray, real: np.ndarray, config: PrivacyConfig, rng: np.random.Generator
) -> np.ndarray:
    """The two OUE bits (n, 2) of the probe reports with these labels (an empty report, not
    `real`, randomises the all-zero vector), as the encoder draws them."""
    return oue_perturb_at(labels.astype(np.int64), 2, _report_epsilon(config), rng, real)


def totals(probe: Probe, config: PrivacyConfig, total_reports: int = 0) -> tuple[float, float]:
    """Unbiased [negatives, positives] from the probe: its noisy counts (distdp), or the OUE
    estimate rescaled from the probe's reports to all `total_reports` (localdp)."""
    c = probe.counts.astype(np.float64)
    if config.model is PrivacyModel.LOCALDP:
        r = probe.reports or 0
        if r == 0:
            return 0.0, 0.0
        p, q = oue_probabilities(_report_epsilon(config))
        est = (c - r * q) / (p - q) * (total_reports / r)
        return float(est[0]), float(est[1])
    return float(c[0]), float(c[1])


def height(
    probe: Probe, config: PrivacyConfig, total_reports: int, min_height: int, max_height: int
) -> int:
    """The tree's height from the probe (post-processing): `fedeval.core.params.probe_height`, at
    most `max_height` (the resolution the data were read at: a public option)."""
    neg, pos = totals(probe, config, total_reports)
    return min(
        max_height,
        probe_height(
            config.model,
            negatives=neg,
            positives=pos,
            epsilon=probe_epsilon_per_example(config),
            reports=total_reports,
            min_height=min_height,
        ),
    )
