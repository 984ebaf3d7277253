"""Which level each localdp tree report measures: uniform over the released levels, or a split.

**Why.** Under the hierarchy shape each localdp report measures one level, with the whole
report ε (`fedeval.privacy.localdp`). Precision, recall and accuracy at a declared threshold t
are read from the count of [t, 1], which the tree answers from one node per level down to the
level f at which t is a cell edge (the thresholds' alignment level); the AUC and AP read every
leaf. With the papers' uniform assignment each of g levels gets n/g reports, so a deep tree,
good for the AUC, measures the levels ≤ f from fewer reports than the height-f tree does, and
P/R/A pay for it. The consistency step's own variances (`noise_factors`; 100k rows, ε = 5,
levels 2..h, f = 4): at h = 7 a count at a level-f edge has 1.19× the height-f tree's sd under
the uniform assignment and 1.07× with 0.8 of the reports to the levels ≤ f, at h = 10 1.42×
and 1.09×; the mean prefix sum, which the AUC integrates, has 0.89× (h = 7) and 0.76× (h = 10)
the uniform tree's sd, since it too is read mostly from coarse nodes. What the finer levels
lose shows in single leaves (1.58× at h = 7), which the AP's top cells read.

**Measured** (`benchmarks/level_split.py --model localdp`): the split moves `auto` one level
finer on some families and helps P/R/A there, hurts AP on others; over 12 families it leaves
the count of metrics within 1.25× of the best fixed height unchanged (52 of 60), so it is not
the default: a setting of the library, stated in every document when used.

**The rule.** `PrivacyConfig.split_level` f and `split_share` s, as for distdp's split of ε
(`fedeval.privacy.level_split`): each tree report measures one of the released levels k ≤ f
with probability s/a each (a such levels) and one of the b finer ones with probability
(1 − s)/b each (`PrivacyConfig.level_shares`, `level_probabilities`). A rule rather than a list
so that it holds at whatever height a probe chooses after the settings are fixed; both are
public settings fixed before any data are read (f from the declared thresholds, s a constant)
and stated in every document (`assignment_words`, the mechanism's parameters). (0, 0) — and a
split with one side empty at the height used — is the uniform assignment, drawn exactly as
before (`draw_levels`: the same generator calls, so the same reports bit for bit).

**Privacy.** Each report is the OUE of the example's (label, cell) at its level, at the report
ε: ε-LDP whatever level it measures (Wang et al. 2017), so the guarantee and the claim's ε are
unchanged. The level is drawn from the public probabilities independently of the data (and of
every other report): an empty (padding) report draws its level the same way. The number of
reports per level, which the server and every release see, is therefore a function of the
public probabilities, the number of reports and the randomness alone: its law is the same on
neighbouring datasets (a multinomial of the reports over the levels), and it separates none.

**Decoding.** Level k's counts are rescaled by n/n_k (n_k its reports), which is unbiased for
any assignment drawn independently of the data; a count c estimated from the n_k/n of the
examples that report level k carries the sampling variance c·(n/n_k − 1) on top of OUE's
(`localdp.cell_variance`, from the release's own n_k: it holds for any probabilities). The
consistency step weighs each level by its variance (`fedeval.core.hierarchy.consistent_leaves`
takes one per level, then one per cell), and the intervals' fresh draws redraw the reports'
levels with these probabilities (`localdp.measurement_noise`).

**The height choice.** `noise_factors`: the sd of the consistent tree's prefix sums with these
probabilities over the uniform assignment's at the same height, at the level-f edges (the
counts P/R/A read) and averaged over every leaf edge (what the AUC and AP integrate), from the
generalised-least-squares operator of the consistency step; `fedeval.privacy.probe.count_sd`
scales the uniform tree's count sd by them (1 without a split: the choice unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fedeval.core.config import PrivacyConfig


def level_probabilities(config: PrivacyConfig) -> np.ndarray:
    """Each released level's probability of being a tree report's level (`level_shares`: 1/g
    each without a split)."""
    return np.asarray(config.level_shares, dtype=np.float64)


def draw_levels(n: int, config: PrivacyConfig, rng: np.random.Generator) -> np.ndarray:
    """The level index (into `config.levels`) of `n` tree reports, each drawn on its own from
    `level_probabilities`, before and independently of what the reports say. Without a split
    at this height, the uniform draw as it always was (`rng.integers`)."""
    g = len(config.levels)
    if not config.level_split:
        return rng.integers(g, size=n)
    return rng.choice(g, size=n, p=level_probabilities(config))


def assignment_words(config: PrivacyConfig) -> str:
    """The level assignment, exactly, for the claim's parameters."""
    levels = config.levels
    if len(levels) == 1:
        return "the leaf level"
    if not config.level_split:
        return "uniform at random over the released levels"
    probs = level_probabilities(config)
    coarse = [k for k in levels if k <= config.split_level]
    return (
        f"at random, independently of the data: a share {config.split_share:g} of the tree "
        f"reports spread evenly over the levels {coarse[0]}..{coarse[-1]} "
        f"(probability {probs[0]:.6g} each), the rest over the levels "
        f"{coarse[-1] + 1}..{levels[-1]} ({probs[-1]:.6g} each)"
    )


def claim_words(config: PrivacyConfig) -> str:
    """The claim's clause on a split (none without one): the levels are drawn independently
    of the data, so the guarantee is each report's."""
    if not config.level_split:
        return ""
    return (
        f"; each tree report's level is drawn at random from public probabilities ("
        f"{assignment_words(config)}), independently of the data, so every report is still "
        "sent once, at the report ε"
    )


def assignment_parameters(config: PrivacyConfig) -> dict[str, Any]:
    """The claim's parameters of the assignment: its words, and with a split each released
    level's probability (by level)."""
    out: dict[str, Any] = {"level_assignment": assignment_words(config)}
    if config.level_split:
        probs = level_probabilities(config).tolist()
        out["level_probabilities"] = {str(k): p for k, p in zip(config.levels, probs, strict=True)}
    return out


def gls_variance(
    functionals: np.ndarray, levels: tuple[int, ...], variances: np.ndarray
) -> np.ndarray:
    """Variance of a·x̂ for each row a of `functionals` (..., 2^h), x̂ the consistent leaves
    (`consistent_leaves`: the generalised-least-squares estimate) from independent measurements
    of every node of `levels` (consecutive, up to h), level k's at variance `variances`[k].

    The information matrix AᵀWA = Σ_k B_kᵀB_k / v_k (B_k sums the leaves into level k's cells)
    is diagonal in the orthonormal Haar basis: a wavelet whose support spans 2^s leaves is an
    eigenvector of B_kᵀB_k with eigenvalue 2^(h−k) where a level-k cell lies inside one of its
    halves (k ≥ h − s + 1) and 0 where the cell holds the whole support; a function constant on
    the coarsest level's cells, of every B_k with eigenvalue 2^(h−k). So Var(a·x̂) =
    aᵀ(AᵀWA)⁻¹a = Σ ⟨a, e⟩²/λ_e over that basis: a fast Haar transform, O(2^h·h) per row."""
    h, first = levels[-1], levels[0]
    cell = np.array(
        [float(1 << (h - k)) / float(v) for k, v in zip(levels, variances, strict=True)]
    )
    x = np.asarray(functionals, dtype=np.float64)
    out = np.zeros(x.shape[:-1])
    for s in range(1, h - first + 1):
        detail = (x[..., 0::2] - x[..., 1::2]) / np.sqrt(2.0)
        x = (x[..., 0::2] + x[..., 1::2]) / np.sqrt(2.0)
        out += (detail**2).sum(axis=-1) / cell[len(levels) - s :].sum()
    out += (x**2).sum(axis=-1) / cell.sum()
    return out


def prefix_variances(
    levels: tuple[int, ...], variances: np.ndarray, step: int = 1
) -> tuple[np.ndarray, float]:
    """(variance of the consistent leaves' sum over [0, j) at every `step`-th leaf edge j < 2^h,
    variance of the mean of the prefix sums over every leaf edge), per level variances
    (`gls_variance`). The mean prefix sum weighs leaf l by (2^h − 1 − l)/(2^h − 1)."""
    width = 1 << levels[-1]
    edges = np.arange(step, width, step)
    prefix = (np.arange(width) < edges[:, None]).astype(np.float64)
    ramp = (width - 1 - np.arange(width)) / (width - 1.0)
    return gls_variance(prefix, levels, variances), float(gls_variance(ramp, levels, variances))


def noise_factors(
    config: PrivacyConfig, n: float, variance: Callable[[int, int], float]
) -> tuple[float, float]:
    """(AUC and AP, P/R/A): the sd of the consistent tree's prefix sums under `config`'s level
    probabilities over the uniform assignment's, at `config`'s height, for `n` reports (module
    docstring). AUC/AP: of the mean prefix sum over every leaf edge; P/R/A: the root mean
    square over the level-f edges. `variance(n_k, k)`: one decoded level-k count's variance
    from n_k of the n reports (`localdp.level_variance`); (1, 1) without a split here."""
    if not config.level_split:
        return 1.0, 1.0
    levels = config.levels
    n = max(float(n), 1.0)
    step = 1 << (config.height - config.split_level)
    out = []
    for probs in (level_probabilities(config), np.full(len(levels), 1.0 / len(levels))):
        v = np.array([variance(max(int(n * p), 1), k) for k, p in zip(levels, probs, strict=True)])
        edges, mean = prefix_variances(levels, v, step)
        out.append((mean, float(np.mean(edges))))
    (auc_split, pra_split), (auc_even, pra_even) = out
    return float(np.sqrt(auc_split / auc_even)), float(np.sqrt(pra_split / pra_even))
