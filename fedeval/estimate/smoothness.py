"""Where a release shows its scores smooth at the resolution it was read at, and where not.

Below a leaf the release says nothing: the AUC counts each (positive, negative) pair sharing a
leaf as ½, the AP mixes each leaf's examples uniformly, and the smooth corrections of both
(Richardson steps, `fedeval.evaluate.auc_discretisation_bias`, `leaf_ap_candidates`) and the
random-order spreads (`within_bucket_auc_variance`, `shuffled_ap`) assume that inside a leaf
the scores continue the trend the leaves show. Point masses, scores rounded to a grid, clipped
at 0 or 1, squeezed into a few cells, or one class on a single value break that assumption, and
the error is then a fixed bias of up to the within-leaf worst case (±Σ pᵢnᵢ/(2PN) for the AUC),
not the O(w²) the corrections remove.

What the release can check is the level above: under a density smooth at the scale of a
parent cell (two leaves), the parent's count splits between its children as the slope read
from its neighbouring parents predicts. With parents j − 1, j, j + 1 holding X₋, X, X₊ and a
density quadratic across them, the upper child minus the lower one is (X₊ − X₋)/8 (exact for
a quadratic: its curvature adds the same to both children); at either end of [0, 1] the slope
is one-sided, (X₁ − X₀)/4. The residual r = (upper − lower) − prediction of a smooth density
is zero up to the sampling of the data (Poisson: Σ wₖ²·cₖ over the counts it combines) and
the privacy noise (its spread over fresh noise draws on the release); a point mass, a grid
value alone in a leaf, a cliff or a class squeezed into one leaf leaves a residual of the
order of its own mass. A parent whose residual exceeds `ROUGH_SDS` of that spread in either
class is rough: its leaves get the worst case, the others the smooth treatment. Tests of this
kind cannot see a structure finer than a leaf that is the same in every leaf (a grid with
several values per leaf reads as smooth), which is why the AUC's smooth range still runs from
the ½-counting (ties) to the extrapolated value, and the AP's from the step rule to it.

All of it is post-processing of the release and its noise draws (no data is read).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import digamma

from fedeval.core.hierarchy import monotone_cumulative
from fedeval.estimate.metrics import auc_from_buckets

ROUGH_SDS = 4.0
"""A parent is rough where its residual is beyond this many standard deviations of sampling
and noise in either class. Each false alarm only widens the interval (the leaf gets its worst
case), so the level is set against false alarms: at 4σ one parent in ~16,000 of smooth data
(h = 16 has 32,768 parents)."""


def _residual_weights(
    n_parents: int, breaks: Sequence[float] = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, leaf index, readable) of each parent's residual as a linear form of at most
    six leaves: r_j = Σₖ weights[j, k]·x[index[j, k]] (index clipped into range, weight 0 where
    a leaf does not enter). A slope is read across a neighbour only inside the same segment:
    `breaks` are unit positions (the axis' knots, where the warp's slope and so the density
    on the unit axis jump) that no slope crosses. `readable` is False where neither neighbour
    is available, or a break falls inside the parent (between its leaves)."""
    j = np.arange(n_parents)
    index = 2 * j[:, None] + np.arange(-2, 4)[None, :]
    cut = np.zeros(n_parents + 1, bool)  # cut[b]: a break between parents b − 1 and b
    cut[0] = cut[-1] = True
    inside = np.zeros(n_parents, bool)
    for u in breaks:
        x = float(u) * n_parents
        b = round(x)
        if abs(x - b) <= 1e-9 * max(n_parents, 1):
            cut[min(max(b, 0), n_parents)] = True
        else:
            inside[min(int(x), n_parents - 1)] = True
    left, right = ~cut[:-1], ~cut[1:]
    w = np.zeros((n_parents, 6))
    w[:, 2], w[:, 3] = -1.0, 1.0  # upper child − lower child
    both = left & right
    w[both, 0:2] = 1.0 / 8.0  # − (X₊ − X₋)/8
    w[both, 4:6] = -1.0 / 8.0
    only_right = right & ~left  # − (X₊ − X)/4
    w[only_right, 2:4] += 1.0 / 4.0
    w[only_right, 4:6] -= 1.0 / 4.0
    only_left = left & ~right  # − (X − X₋)/4
    w[only_left, 2:4] -= 1.0 / 4.0
    w[only_left, 0:2] += 1.0 / 4.0
    readable = (left | right) & ~inside
    return w, np.clip(index, 0, 2 * n_parents - 1), readable


def smoothness_residuals(class_leaves: np.ndarray, breaks: Sequence[float] = ()) -> np.ndarray:
    """Each parent's residual r (see the module docstring) for one class's leaves (..., L),
    L even, shape (..., L/2)."""
    x = np.asarray(class_leaves, dtype=np.float64)
    w, index, _ = _residual_weights(x.shape[-1] // 2, breaks)
    return np.einsum("...jk,jk->...j", x[..., index], w)


def rough_parents(
    leaves: np.ndarray, draws: np.ndarray | None = None, breaks: Sequence[float] = ()
) -> np.ndarray:
    """Which parents (pairs of leaves 2j, 2j + 1) of consistent leaves (2, L) the release shows
    not smooth (bool, L/2): a residual beyond ROUGH_SDS spreads in either class, the spread
    combining the data's sampling (Poisson on the clamped counts) and the noise's (over the
    draws (D, 2, L) on the release, None without noise). `breaks`: the axis' knots as unit
    positions (`_residual_weights`). Every parent is rough below 4 leaves (no neighbour to
    read a slope from) or with an odd number of leaves, and where no slope can be read."""
    leaves = np.asarray(leaves, dtype=np.float64)
    n_leaves = leaves.shape[-1]
    if n_leaves < 4 or n_leaves % 2:
        return np.ones(max(n_leaves // 2, 1), bool)
    w, index, readable = _residual_weights(n_leaves // 2, breaks)
    rough = ~readable
    for c in range(2):
        x = leaves[c]
        r = np.einsum("jk,jk->j", x[index], w)
        var = _sampling_variance(w, index, np.clip(x, 0.0, None))
        if draws is not None and len(draws) > 1:
            noise = np.einsum("djk,jk->dj", np.asarray(draws)[:, c][:, index], w)
            var = var + np.var(noise, axis=0, ddof=1)
        rough |= np.abs(r) > ROUGH_SDS * np.sqrt(var) + 1e-9
    return rough


def _sampling_variance(w: np.ndarray, index: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Σₖ (summed weight of leaf k)²·countₖ per parent: Poisson sampling of the leaves a
    residual combines, a leaf listed twice (an end, clipped) counted once with both weights."""
    n_parents = w.shape[0]
    rows = np.repeat(np.arange(n_parents), w.shape[1])
    flat = rows * counts.size + index.ravel()
    uniq, inverse = np.unique(flat, return_inverse=True)
    summed = np.bincount(inverse, weights=w.ravel())
    per = summed**2 * counts[uniq % counts.size]
    return np.bincount(uniq // counts.size, weights=per, minlength=n_parents)


def rough_leaves(
    leaves: np.ndarray, draws: np.ndarray | None = None, breaks: Sequence[float] = ()
) -> np.ndarray:
    """`rough_parents` spread to both leaves of each parent (bool, L)."""
    n_leaves = np.shape(leaves)[-1]
    rough = np.repeat(rough_parents(leaves, draws, breaks), 2)
    if rough.size < n_leaves:
        rough = np.ones(n_leaves, bool)
    return rough[:n_leaves]


def smooth_parents(
    leaves: np.ndarray, draws: np.ndarray | None, breaks: Sequence[float], min_cells: int
) -> np.ndarray:
    """The parents read as smooth (bool, L/2): not `rough_parents`, and none below `min_cells`
    leaves (there every leaf gets the worst case)."""
    n_leaves = np.shape(leaves)[-1]
    if n_leaves < min_cells or n_leaves % 2:
        return np.zeros(max(n_leaves // 2, 1), bool)
    return ~rough_parents(leaves, draws, breaks)


def auc_parts(
    leaves: np.ndarray, smooth: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(raw AUC, smooth bias, rough half-width, smooth order variance) of leaves (..., 2, L),
    given which parents are smooth (L/2,):

    - raw: the AUC counting each pair that shares a leaf as ½ (`auc_from_buckets`);
    - smooth bias: the Richardson step (AUC one level up − AUC)/3 over the smooth parents only,
      Σⱼ (p_L·n_U − p_U·n_L)/(6PN) (p_L, n_L: the lower leaf's positives and negatives, p_U,
      n_U the upper's): the pairs a parent counts ½ that its leaves order, a third of them;
    - rough half-width: Σ pᵢnᵢ/(2PN) over the leaves of rough parents (counts clamped at 0),
      the worst case of the order inside them, which holds for any data;
    - smooth order variance: the Mann-Whitney Σ pᵢnᵢ(pᵢ + nᵢ + 1)/12/(PN)² over the smooth
      leaves (the rough ones are inside their worst case already).
    Undefined totals give a bias of 0, a half-width of ½ and no variance."""
    neg, pos = leaves[..., 0, :], leaves[..., 1, :]
    raw = auc_from_buckets(neg, pos)
    p_total, n_total = pos.sum(axis=-1), neg.sum(axis=-1)
    lower_p, upper_p = pos[..., 0::2], pos[..., 1::2]
    lower_n, upper_n = neg[..., 0::2], neg[..., 1::2]
    crossed = np.where(smooth, lower_p * upper_n - upper_p * lower_n, 0.0).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        bias = crossed / (6.0 * p_total * n_total)
    bias = np.where(np.isfinite(bias), bias, 0.0)
    rough_leaf = np.repeat(~smooth, 2)
    p, n = np.clip(pos, 0.0, None), np.clip(neg, 0.0, None)
    pairs = p.sum(axis=-1) * n.sum(axis=-1)
    defined = pairs > 0
    safe = np.where(defined, pairs, 1.0)
    half = np.where(defined, np.where(rough_leaf, p * n, 0.0).sum(axis=-1) / (2.0 * safe), 0.5)
    spread = np.where(rough_leaf, 0.0, p * n * (p + n + 1.0)).sum(axis=-1) / 12.0
    variance = np.where(defined, spread / safe**2, 0.0)
    return raw, bias, half, variance


def _leaf_terms(leaves: np.ndarray) -> tuple[np.ndarray, ...]:
    """(p, n, a, c) per leaf, top leaf first, of the non-negative leaves (..., 2, L) from the
    monotone prefix sums: positives and examples inside each leaf (n: negatives) and above it
    (a: positives, c: examples)."""
    neg = np.diff(monotone_cumulative(leaves[..., 0, :]), axis=-1)[..., ::-1]
    pos = np.diff(monotone_cumulative(leaves[..., 1, :]), axis=-1)[..., ::-1]
    a = np.cumsum(pos, axis=-1) - pos
    c = a + np.cumsum(neg, axis=-1) - neg
    return pos, neg, a, c


def _precision_sums(p, n, a, c) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per leaf, the sum of precisions at its positives (a leaf's share of AP·P): lowest and
    highest over every order and over ties inside it, and under a uniform mix (the integral
    rule, `leaf_ap_rows`). Orders: positives last or first, Σₖ (a + k)/(c' + k) = p − (c' − a)
    ·(ψ(c' + p + 1) − ψ(c' + 1)) with c' the examples above them (`within_leaf_bounds`); ties:
    every positive at the leaf's precision, p·(a + p)/(c + m), as scikit-learn scores a tied
    score. A tie is outside the orders' range (one positive tied with many is not at any
    rank), so a bound for any data takes both."""
    m = p + n

    def ordered(above):
        return p - (above - a) * (digamma(above + p + 1) - digamma(above + 1))

    with np.errstate(divide="ignore", invalid="ignore"):
        tie = np.where(c + m > 0, p * (a + p) / np.where(c + m > 0, c + m, 1.0), 0.0)
        low = np.minimum(ordered(c + n), tie)
        high = np.maximum(ordered(c), tie)
        log_term = np.where(c > 0, np.log1p(m / np.where(c > 0, c, 1.0)) / m, 0.0)
        mix = np.where(m > 0, p / m + (a - p * c / m) * log_term, 0.0)
    mix = p * np.clip(np.nan_to_num(mix), 0.0, 1.0)
    return np.where(p > 0, low, 0.0), np.where(p > 0, high, 0.0), mix


def ap_hull(leaves: np.ndarray) -> tuple[float, float]:
    """(low, high) of the AP over every order of the examples inside each leaf and over ties
    there (`_precision_sums`): the range that holds the AP of any data with these leaves.
    (0, 1) where the positives' total is not positive."""
    p, n, a, c = _leaf_terms(np.asarray(leaves, dtype=np.float64))
    total = float(p.sum())
    if not total > 0:
        return 0.0, 1.0
    low, high, _ = _precision_sums(p, n, a, c)
    return float(low.sum() / total), float(high.sum() / total)


def rough_ap_reach(leaves: np.ndarray, rough: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(below, above): how far the AP of leaves (..., 2, L) may sit below and above the
    integral rule's value from the order (or ties) inside the rough leaves (bool, L) alone:
    Σ over them of (mix − low) and (high − mix) of `_precision_sums`, over P. 1 where the
    positives' total is not positive."""
    p, n, a, c = _leaf_terms(np.asarray(leaves, dtype=np.float64))
    low, high, mix = _precision_sums(p, n, a, c)
    live = np.asarray(rough)[::-1] & (p > 0)
    total = p.sum(axis=-1)
    defined = total > 0
    safe = np.where(defined, total, 1.0)
    below = np.clip(np.where(live, mix - low, 0.0).sum(axis=-1), 0.0, None) / safe
    above = np.clip(np.where(live, high - mix, 0.0).sum(axis=-1), 0.0, None) / safe
    return np.where(defined, below, 1.0), np.where(defined, above, 1.0)
