"""The tree's ε split unequally over its levels (distdp): each level its own discrete Laplace.

**Why.** Precision, recall and accuracy at a declared threshold t are read from a count of
[t, 1], which a tree answers with at most one node per level down to the level f at which t is
a cell edge (the thresholds' alignment level); the AUC sums every leaf. With the papers' even
split (α = exp(−ε/Δ) on every count, Δ = g·L for g levels) a deep tree, good for the AUC, pays
g/f in noise sd on those counts against a tree of height f. Giving the levels k ≤ f a larger
share of ε lowers that cost at a small price in the AUC (a Monte Carlo of the consistency step,
f = 4, 100k rows, share 0.8 to levels ≤ f: smooth scores h = 7, P/R/A count sd 1.25× the
height-f tree against 1.56× evenly, AUC sd 0.87× the even tree's).

**The release parameter.** `PrivacyConfig.split_level` f and `split_share` s: s·ε_tree spread
evenly over the released levels k ≤ f, (1 − s)·ε_tree evenly over the finer ones
(`PrivacyConfig.level_shares`). A rule rather than a list of shares, so that the same setting
holds at whatever height a probe chooses after the settings are fixed; both are public
settings, fixed before any data are read (f from the declared thresholds, s a constant), and
stated in every document. (0, 0) is the even tree, drawn exactly as before (same α, same
draws: results bit for bit); so is a split that leaves one side empty at the height used.

**Privacy: sequential composition over the levels.** One unit (an example, or a client with
at most L examples) sits in one node per level of its class's tree per example. Under
add/remove it moves level k's counts by at most L in L1, under replace by at most 2L (one node
loses, another gains, per example): the per-level sensitivity Δ_k = L or 2L, the same for every
level (`level_sensitivity`; the present code's Δ = g·Δ_k is the sum over the g levels). Level
k's counts get discrete Laplace α_k = exp(−ε_k/Δ_k) with ε_k = share_k·ε_tree, which is pure
ε_k-DP for that level alone (Cormode & Markov, section 2.2); the levels' noises are independent,
so the tree is (Σ_k ε_k)-DP = ε_tree-DP by sequential composition (Dwork & Roth 2014, theorem
3.16), and with a probe ε_probe + ε_tree = ε as before. With the even split, α_k = exp(−ε_tree
/(g·Δ_k)) is the present α. The DP event is the composition of the levels' discrete Laplace
events; the privacy section states each level's ε_k, α_k and Δ_k and the shares.

The shares of a cohort: each of the m clients adds Pólya(1/m, α_k) − Pólya(1/m, α_k) to every
count of level k, so every cohort's secure sum carries level k's whole discrete Laplace by
itself (with t colluders tolerated, 1/(m − t)), as for the even tree.

**Decoding.** Level k's counts carry variance v_k = c·2α_k/(1 − α_k)² (c cohorts, times the
colluders' factor). The consistency step (Hay et al., VLDB 2010, section 4) becomes weighted
least squares with weights 1/v_k: bottom-up each node's own measurement is averaged with its
children's sum in inverse proportion to their variances, top-down the parent's disagreement is
split evenly between two siblings (they share a variance). This is the generalised-least-squares
estimate (AᵀWA)⁻¹AᵀWy, W = diag(1/v); the two-pass form with non-uniform per-level budgets is
Cormode, Procopiuc, Srivastava, Shen & Yu, "Differentially private spatial decompositions",
ICDE 2012 (their least-squares post-processing for geometric, non-uniform budgets).
`fedeval.core.hierarchy.consistent_leaves` already takes one variance per level;
`tests/test_level_split.py` checks it against a dense GLS solve with a split's variances.
The intervals' fresh noise draws each level at its own α_k
(`fedeval.privacy.distdp.measurement_noise`), and the consistency step weighs them as the
release was weighed.

**The height choice** (`--height auto`) predicts each metric's noise at every candidate height
from the even tree's count sd (`fedeval.privacy.probe.count_sd`); with a split that sd is
scaled per metric by `read_sd_factors`: the exact least-squares variance of what the metric
reads (the AUC a ramp over the leaves, the AP one leaf, P/R/A a count of [t, 1] at the
thresholds' edges) under the split's variances over the same under the even tree's. So auto
picks the height for the split actually used: P/R/A's noise falls, the AP's rises.

**The setting** (`--level-split off|auto|F:S`, `ReleaseSpec.level_split`,
`fedeval.core.params.level_split_of`): auto takes f = the thresholds' alignment level and
s = SPLIT_SHARE = 0.8 under distdp (the even tree where no threshold sets a level).

**The AP's leaves** (`PrivacyConfig.split_leaf_bound` c): a leaf's noise sd grows by about
(h − f)/(h·(1 − s)) over the even tree's (2.5× at h = 8, f = 4, s = 0.8), and the AP reads the
leaves. Where the AP is reported, `auto` bounds it: the share at height h is
s(h) = min(s, 1 − (h − f)/(c·h)) with c = 1.25 (`PrivacyConfig.split_share_here`; h is public,
chosen by the probe, so s(h) is too), which leaves P/R/A at 0.88× the even tree's sd at h = 8
instead of 0.70×.

**Measured: why auto is the default** (distdp ε = 1, f = 4; `benchmarks/level_split.py`, 12
quick families at 100k, 40 draws: auto within 1.25× of the best fixed even height, of 60 family
× metric cells): even tree 22 (AUC 7, AP 4, P/R/A 11 of 36); s = 0.8 at every height
(`--level-split 4:0.8`) 37 (AUC 8, AP 3, P/R/A 26), but the AP worse (smooth 1.23 → 1.79,
squeezed 1.85 → 2.10) and the grid's AUC 0.77 → 4.53 (auto moves 6 → 5); `auto` with the AP's
bound 29 (AUC 8, AP 4, P/R/A 17): no metric's count below the even tree's (smooth AP 1.37,
squeezed 1.31, grid AUC 1.27). Smooth scores at 1M rows (40 draws, median |error|), even →
auto: AUC 8.0e-6 → 1.0e-5 (≤ 2e-5), AP 3.6e-5 → 5.5e-5, worst P/R/A 4.0e-5 → 4.0e-5 (s = 0.8:
1.0e-5, 8.0e-5, 3.1e-5). Coverage (`benchmarks/hard.py --quick --models distdp --dp-releases
200 --level-split auto`, all 16 families, units example and client): every row ≥ 0.93 but
two the even tree has too (logistic-rare AP 0.925, clipped unit client AP 0.920: the same
releases, h = f). The audit table's scenarios (`fedeval.audit.all_scenarios`) release no split
yet; `tests/audit/test_level_split_audit.py` audits auto's bounded split two-phase.

Not yet: a split under localdp (reports per level, drawn before data are read), and an option
of `encode` and the Flower run (their trees follow the spec's default).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from fedeval.core.config import PrivacyConfig, Relation
from fedeval.core.hierarchy import consistent_leaves
from fedeval.core.release import level_offsets
from fedeval.privacy.noise import discrete_laplace, discrete_laplace_variance, polya_share_events


def level_sensitivity(config: PrivacyConfig) -> int:
    """Δ_k of one level's counts to one unit: L under add/remove, 2L under replace."""
    factor = 2 if config.relation is Relation.REPLACE else 1
    return factor * config.examples_per_unit


def level_epsilons(config: PrivacyConfig, tree_epsilon: float) -> tuple[float, ...]:
    """ε_k = share_k·ε_tree of each released level (they sum to ε_tree)."""
    return tuple(share * tree_epsilon for share in config.level_shares)


def level_alphas(config: PrivacyConfig, tree_epsilon: float) -> tuple[float, ...]:
    """α_k = exp(−ε_k/Δ_k) of each released level's counts."""
    sens = level_sensitivity(config)
    return tuple(math.exp(-eps / sens) for eps in level_epsilons(config, tree_epsilon))


def level_variances(alphas: tuple[float, ...]) -> tuple[float, ...]:
    """The discrete Laplace variance 2α_k/(1 − α_k)² of one count of each level."""
    return tuple(discrete_laplace_variance(a) for a in alphas)


def noise_vector(
    config: PrivacyConfig, alphas: tuple[float, ...], rng: np.random.Generator
) -> np.ndarray:
    """Discrete Laplace on the flat node vector, level k's entries at α_k (int64)."""
    offsets = level_offsets(config)
    return np.concatenate(
        [discrete_laplace(a, int(offsets[i + 1] - offsets[i]), rng) for i, a in enumerate(alphas)]
    )


def share_events(
    config: PrivacyConfig,
    alphas: tuple[float, ...],
    honest: int,
    n_clients: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """`n_clients` clients' Pólya(1/honest, α_k) − Pólya(1/honest, α_k) shares on every entry of
    their node vectors, sparse: (flat index client·D + entry, signed value), level by level."""
    offsets = level_offsets(config)
    d = int(offsets[-1])
    cells, values = [], []
    for i, a in enumerate(alphas):
        width = int(offsets[i + 1] - offsets[i])
        at, value = polya_share_events(honest, a, n_clients * width, rng)
        cells.append((at // width) * d + offsets[i] + at % width)
        values.append(value)
    return np.concatenate(cells), np.concatenate(values)


PREFIX_EDGES = 15
"""Most thresholds whose count of [t, 1] `read_variances` averages (evenly spaced edges)."""


@lru_cache(maxsize=256)
def read_variances(variances: tuple[float, ...], levels: tuple[int, ...], floor: int) -> np.ndarray:
    """The variance of what each metric reads from one class's consistent leaves, for noise
    variances v_k on levels 1..h: (AUC, AP, P/R/A) = (a ramp Σ_j (j + ½)/L·x̂_j, the mass below
    each leaf weighted evenly, which the AUC's sum over leaves is; one leaf x̂_j, which the AP's
    precision at each leaf reads; the count of [t, 1] at up to PREFIX_EDGES edges t of level
    `floor` (where declared thresholds sit), on average).

    Each is a'(AᵀWA)⁻¹a for the least-squares decode (A the tree's design, W = diag(1/v)):
    `fedeval.core.hierarchy.consistent_leaves` is that estimate, (AᵀWA)⁻¹AᵀWy, so on a
    measurement y holding v_h·a at the leaves and 0 elsewhere (AᵀWy = a) it returns
    u = (AᵀWA)⁻¹a, and the variance is a·u: exact, with no draw.

    Kept per arguments (read-only): the height choice asks for it at every candidate height of
    every release (`read_sd_factors`), each time a decode of 17 vectors over the whole tree,
    with arguments that repeat (one ε, one split: a few heights), e.g. 3,600 calls and 28% of a
    `plan --detect`."""
    h = levels[-1]
    cells = 1 << h
    j = np.arange(cells)
    level = max(1, min(floor, h))
    edges = np.unique(np.round(np.linspace(1, (1 << level) - 1, PREFIX_EDGES)).astype(np.int64))
    a = np.vstack(
        [(j + 0.5) / cells, (j == 0), j[None, :] >= edges[:, None] << (h - level)]
    ).astype(np.float64)
    measured = [np.zeros((len(a), 1 << k)) for k in levels[:-1]] + [variances[-1] * a]
    var = (a * consistent_leaves(measured, variances, levels)).sum(axis=-1)
    out = np.array([var[0], var[1], var[2:].mean()])
    out.setflags(write=False)
    return out


def read_sd_factors(config: PrivacyConfig, tree_epsilon: float, floor: int) -> np.ndarray:
    """(AUC, AP, P/R/A): the sd of what each metric reads with this split over the even tree's
    at the same height (`read_variances`): what the height choice multiplies the even tree's
    count sd by (`fedeval.privacy.probe.count_sd`) so that it predicts the split's noise. Ones
    where no split applies at this height."""
    if not config.level_split:
        return np.ones(3)
    levels = config.levels
    split = read_variances(level_variances(level_alphas(config, tree_epsilon)), levels, floor)
    even_alpha = math.exp(-tree_epsilon / (len(levels) * level_sensitivity(config)))
    even = discrete_laplace_variance(even_alpha) * read_variances(
        (1.0,) * len(levels), levels, floor
    )
    out: np.ndarray = np.sqrt(split / even)
    return out
