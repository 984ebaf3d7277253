"""Round 1 of a two-phase release (`--height auto` under DP): a noisy coarse histogram chooses h.

The best height depends on the class counts and on where the scores sit (a rare class
concentrated in the top cells, scores squeezed into a narrow range or on a grid), which are
private, so `auto` first releases each class's counts over the 2^k cells of the probe level
k = PROBE_LEVEL (the score axis' cells at that level) and chooses the tree's height from them
(`fedeval.core.height_choice`):

- distdp: every client adds its per-class cell counts (2·2^k of them) and a Pólya share sized to
  all clients at α = exp(−s·ε/Δ) (Δ = L, or 2L under replace: one example is one count); the
  sum is the histogram plus discrete Laplace. The tree then spends (1 − s)·ε
  (`fedeval.privacy.mechanism`).
- localdp: every report slot (padding too) is a probe report with probability s, drawn before
  any data is read; a probe report is the OUE of its (label, probe cell) over 2·2^k bits, at the
  report ε. The other reports go to the tree levels, chosen uniformly as without a probe.

The histogram is part of the release (every document states it); the height is
post-processing of it, so no exact count of the data reaches the choice of h.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fedeval.core.config import PrivacyConfig, PrivacyModel
from fedeval.core.height_choice import PROBE_LEVEL, HeightChoice, choose_height
from fedeval.core.hierarchy import coarsen
from fedeval.core.params import (
    AUTO_MAX_HEIGHT,
    AUTO_MIN_HEIGHT,
    oue_sigma2,
    probe_epsilon_per_example,
    probe_height,
)
from fedeval.core.release import Probe
from fedeval.privacy import level_split, localdp, report_split
from fedeval.privacy.mechanism import mechanism_of
from fedeval.privacy.noise import (
    dense,
    discrete_laplace,
    discrete_laplace_variance,
    oue_perturb_at,
    oue_probabilities,
    oue_sum,
    polya_share_events,
)


def probe_level(model: PrivacyModel, resolution: int) -> int:
    """The probe's level for data read at `resolution` (a public option): PROBE_LEVEL, or the
    resolution when coarser."""
    return min(PROBE_LEVEL[PrivacyModel(model)], resolution)


def probe_index(labels: np.ndarray, cells: np.ndarray, level: int) -> np.ndarray:
    """Each example's count in the probe: its label's row, its cell at the probe level."""
    return (labels.astype(np.int64) << level) + cells.astype(np.int64)


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


def draw_distdp(hist: np.ndarray, config: PrivacyConfig, rng: np.random.Generator) -> Probe:
    """The fast path: the exact per-class cell counts (2, 2^k) plus discrete Laplace (the sum of
    all clients' Pólya shares, equal in distribution)."""
    exact = np.asarray(hist, np.int64).reshape(-1)
    return Probe(exact + discrete_laplace(_alpha(config), exact.size, rng))


def client_sum_distdp(
    labels: np.ndarray,
    cells: np.ndarray,
    level: int,
    n_clients: int,
    config: PrivacyConfig,
    rng: np.random.Generator,
) -> Probe:
    """The per-client round: each of the `n_clients` clients adds its per-class counts of the
    2^`level` probe cells (`cells`: each example's) and a Pólya share sized to all of them on
    every count (drawn as sparse events, summed per count); to all but the t colluders tolerated
    (`config.colluders`), as the tree's shares are."""
    width = 2 << level
    counts = np.bincount(probe_index(labels, cells, level), minlength=width)[:width]
    size = n_clients - config.colluders
    at, value = polya_share_events(size, _alpha(config), n_clients * width, rng)
    return Probe(counts + dense(at % width, value, (width,)))


def draw_localdp(
    leaf_counts: np.ndarray, pad: int, level: int, config: PrivacyConfig, rng: np.random.Generator
) -> tuple[Probe, np.ndarray, int]:
    """The fast path: which reports are probe reports (Binomial(s) per cell, and of the `pad`
    empty reports), then the Binomial sums of their 2·2^`level` OUE bits (each probe report's
    one bit at its class and cell at the probe level). Returns (probe, the leaf counts and the
    empty reports the tree still gets)."""
    s = config.probe_share
    taken = rng.binomial(leaf_counts, s)
    taken_pad = int(rng.binomial(pad, s)) if pad else 0
    reports = int(taken.sum()) + taken_pad
    held = coarsen(taken, level).reshape(-1)
    bits = oue_sum(held, reports, _report_epsilon(config), rng)
    return Probe(bits, reports), leaf_counts - taken, pad - taken_pad


def roles(n_reports: int, config: PrivacyConfig, rng: np.random.Generator) -> np.ndarray:
    """Which of `n_reports` report slots are probe reports: each with probability s, drawn
    before their data is read."""
    return rng.random(n_reports) < config.probe_share


def client_bits_localdp(
    labels: np.ndarray,
    cells: np.ndarray,
    level: int,
    real: np.ndarray,
    config: PrivacyConfig,
    rng: np.random.Generator,
) -> np.ndarray:
    """The 2·2^`level` OUE bits (n, 2·2^level) of the probe reports with these labels and probe
    cells (an empty report, not `real`, randomises the all-zero vector), as the encoder draws
    them."""
    index = probe_index(labels, cells, level)
    return oue_perturb_at(index, 2 << level, _report_epsilon(config), rng, real)


def histogram(
    probe: Probe, config: PrivacyConfig, total_reports: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(counts, variance), each (2, C): unbiased per-class cell counts from the probe and the
    variance of each: its noisy counts and the discrete Laplace variance (distdp), or the OUE
    estimate rescaled from the probe's reports to all `total_reports` with OUE's variance at
    the estimated count (localdp)."""
    c = probe.histogram.astype(np.float64)
    if config.model is PrivacyModel.LOCALDP:
        r = probe.reports or 0
        if r == 0:
            return np.zeros_like(c), np.full(c.shape, np.inf)
        eps = _report_epsilon(config)
        p, q = oue_probabilities(eps)
        own = (c - r * q) / (p - q)
        scale = total_reports / r
        held = np.clip(own, 0.0, r)  # oue_count_variance's formula, vectorised
        var = scale**2 * (held * p * (1 - p) + (r - held) * q * (1 - q)) / (p - q) ** 2
        return own * scale, np.asarray(var, np.float64)
    return c, np.full(c.shape, discrete_laplace_variance(_alpha(config)))


def totals(probe: Probe, config: PrivacyConfig, total_reports: int = 0) -> tuple[float, float]:
    """Unbiased [negatives, positives] from the probe: its histogram's row sums."""
    neg, pos = histogram(probe, config, total_reports)[0].sum(axis=-1)
    return float(neg), float(pos)


def count_sd(config: PrivacyConfig, heights: np.ndarray, total_reports: int) -> np.ndarray:
    """The sd of one released count of the tree at each candidate height (`config` being the
    two-phase configuration): discrete Laplace at α = exp(−ε_tree/Δ(h)) (distdp), or OUE over
    the reports that go to each of the g(h) levels, √(g·n·σ²_OUE/(1 − s)) (localdp). With the
    tree's ε split over its levels (distdp), (3, H): per metric (AUC, AP, P/R/A), the even
    tree's sd times the split's factor for what that metric reads
    (`fedeval.privacy.level_split.read_sd_factors`, P/R/A at edges of the least candidate).
    Where a localdp split of the reports over the levels applies at some candidate height
    (`fedeval.privacy.report_split`), likewise (3, H): the uniform tree's sd times the split's
    factor for that metric (1 where no split applies)."""
    heights = np.asarray(heights)
    even = replace(config, split_level=0, split_share=0.0, split_leaf_bound=0.0)
    tree_epsilon, floor = mechanism_of(config).tree_epsilon or 0.0, int(heights.min())
    sds, factors, split = [], [], False
    for h in heights.tolist():
        cfg = replace(config, height=int(h))
        factor: tuple[float, float, float] | np.ndarray = (1.0, 1.0, 1.0)
        if config.model is PrivacyModel.LOCALDP:
            n = max(total_reports, 1) * (1.0 - config.probe_share)
            sds.append(np.sqrt(len(cfg.levels) * n * oue_sigma2(_report_epsilon(config))))
            if cfg.level_split:  # the reports split over the levels at this height
                factor, split = _split_factors(cfg, n), True
        else:
            v = mechanism_of(replace(even, height=int(h))).cohort_noise_variance
            assert v is not None
            sds.append(np.sqrt(v))
            if config.split_share:  # the tree's ε split over its levels
                factor, split = level_split.read_sd_factors(cfg, tree_epsilon, floor), True
        factors.append(factor)
    sd = np.asarray(sds, np.float64)
    if not split:
        return sd
    per_metric: np.ndarray = np.asarray(factors, np.float64).T * sd
    return per_metric


def _split_factors(config: PrivacyConfig, n: float) -> tuple[float, float, float]:
    """A localdp split's noise over the uniform tree's at `config`'s height, for the AUC, AP and
    P/R/A (`fedeval.privacy.report_split.noise_factors`, at `localdp.level_variance`)."""
    eps = _report_epsilon(config)
    reports = max(int(n), 1)
    auc, pra = report_split.noise_factors(
        config, reports, lambda n_k, k: localdp.level_variance(reports, n_k, k, eps)
    )
    return auc, auc, pra


def choice(
    probe: Probe, config: PrivacyConfig, total_reports: int, min_height: int, max_height: int
) -> HeightChoice:
    """The height choice from the probe (post-processing), with its predictions
    (`choice_from_histogram` on the probe's unbiased histogram and its noise variance)."""
    hist, var = histogram(probe, config, total_reports)
    return choice_from_histogram(hist, var, config, total_reports, min_height, max_height)


def choice_from_histogram(
    hist: np.ndarray,
    variance: np.ndarray | float,
    config: PrivacyConfig,
    total_reports: int,
    min_height: int,
    max_height: int,
) -> HeightChoice:
    """`fedeval.core.height_choice.choose_height` over the candidates from
    max(AUTO_MIN_HEIGHT, `min_height`) (the thresholds' alignment floor) to
    min(AUTO_MAX_HEIGHT, `max_height`) (the resolution the data were read at: public), for a
    per-class histogram (2, 2^k) whose counts carry `variance` (0 for exact counts, as the
    planner has), and for the metrics `config.height_for` names (all by default)."""
    lo = max(AUTO_MIN_HEIGHT[config.model], min_height)
    hi = min(max(AUTO_MAX_HEIGHT[config.model], lo), max_height)
    lo = min(lo, hi)
    heights = np.arange(lo, hi + 1)
    sd = count_sd(config, heights, total_reports)
    chosen = choose_height(hist, variance, heights, sd, config.model.value, config.height_for)
    if "auc" not in chosen.metrics:
        return chosen  # `--height auto:ap`, `auto:precision`, …: the AUC's floor is not theirs
    # The histogram may only take the tree finer than the AUC's smooth-data height from the
    # same probe's class totals (`probe_height`, what `auto` chose before the histogram): it
    # sees masses, squeezed scores and a class on a few values that need finer leaves, but on
    # smooth scores its noisy reading of the bias could not show a finer step worth its noise
    # and fell back toward the P/R/A floor. Binormal scores, 20,000 rows, distdp ε = 1: h = 4
    # in 43 of 60 releases (AUC error 1.9e-3) where the totals' rule gives h = 5 (5.6e-4).
    neg, pos = (max(float(t), 0.0) for t in np.asarray(hist, dtype=np.float64).sum(axis=-1))
    smooth = probe_height(
        config.model,
        negatives=neg,
        positives=pos,
        epsilon=probe_epsilon_per_example(config),
        reports=total_reports,
        min_height=lo,
    )
    return replace(chosen, height=int(min(max(chosen.height, smooth), hi)))


def height(
    probe: Probe, config: PrivacyConfig, total_reports: int, min_height: int, max_height: int
) -> int:
    """The tree's height from the probe (post-processing, `choice`)."""
    return choice(probe, config, total_reports, min_height, max_height).height
