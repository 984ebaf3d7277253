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
parent cell (two leaves), the parent's count splits between its children as the density read
from its neighbouring parents predicts. A quadratic through the counts of parents j − 1, j,
j + 1 (each the integral over its own width in the scores' units, so that a warped axis reads
right) predicts the upper child's count; with equal widths that is X/2 + (X₊ − X₋)/16, and it is
exact for any quadratic density; at either end of the range a line through the parent and its
one neighbour. The residual r = upper child − prediction is zero up to the sampling of the data
(Poisson: Σ wₖ²·cₖ over the counts it combines) and the privacy noise (its spread over fresh
noise draws on the release); a point mass, a grid value alone in a leaf, a cliff or a class
squeezed into a few leaves leaves a residual of the order of its own mass. A parent whose
residual exceeds `ROUGH_SDS` of that spread in either class is rough: its leaves get the worst
case, the others the smooth treatment. No test of this kind sees a structure finer than a leaf
that repeats in every leaf (a grid with several values per leaf reads as smooth); there the
AUC's range still runs from the ½-counting (exact for ties) to the extrapolated value, while
the AP's candidates keep the step rule only below 32 leaves (`leaf_ap_candidates`).

All of it is post-processing of the release and its noise draws (no data is read).
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma

from fedeval.core.hierarchy import monotone_cumulative
from fedeval.estimate.metrics import auc_from_buckets

RICHARDSON_MIN_CELLS = 8
"""The fewest leaves (or buckets) at which the AUC's discretisation bias is extrapolated, and
below which every leaf gets the worst case: with fewer, the cells are too wide for the bias to
shrink as a power of their width."""

ROUGH_SDS = 4.0
"""A parent is rough where its residual is beyond this many standard deviations of sampling
and noise in either class. Each false alarm only widens the interval (the leaf gets its worst
case), so the level is set against false alarms: at 4σ one parent in ~16,000 of smooth data
(h = 16 has 32,768 parents)."""


def _moments(lo: np.ndarray, hi: np.ndarray, k: int) -> np.ndarray:
    """∫ tᵏ dt over [lo, hi], for k = 0 … k − 1 (last axis)."""
    powers = np.arange(1, k + 1)
    return (hi[..., None] ** powers - lo[..., None] ** powers) / powers


def _residual_weights(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, leaf index, readable) of each parent's residual as a linear form of at most
    six leaves: r_j = Σₖ weights[j, k]·x[index[j, k]] (index clipped into range, weight 0 where
    a leaf does not enter), for leaves with these L + 1 edges in the scores' units.

    r_j is the upper leaf's count less what a density smooth across the parent and its
    neighbours predicts for it: a quadratic through the three parents' counts (integrals over
    their own widths, so a warped axis, whose leaves are of unequal width in scores, is read in
    the scores' own units), or at either end a line through the parent and its one neighbour.
    With equal widths that is (X₊ − X₋)/16 + X/2. `readable` is False without a neighbour."""
    edges = np.asarray(edges, dtype=np.float64)
    n_parents = (edges.size - 1) // 2
    j = np.arange(n_parents)
    index = np.clip(2 * j[:, None] + np.arange(-2, 4)[None, :], 0, 2 * n_parents - 1)
    w = np.zeros((n_parents, 6))
    readable = np.full(n_parents, n_parents > 1)
    if n_parents < 2:
        return w, index, readable
    # Per parent, coordinates centred on it and scaled by its half-width (conditioning).
    e = edges[np.clip(2 * j[:, None] + np.arange(-2, 5)[None, :], 0, edges.size - 1)]
    centre, half = (e[:, 2] + e[:, 4]) / 2, (e[:, 4] - e[:, 2]) / 2
    t = (e - centre[:, None]) / half[:, None]
    upper = (t[:, 3], t[:, 4])
    w[:, 3] = 1.0
    interior = (j > 0) & (j < n_parents - 1)
    if interior.any():
        ti = t[interior]
        rows = np.stack([_moments(ti[:, 2 * r], ti[:, 2 * r + 2], 3) for r in range(3)], axis=1)
        target = _moments(upper[0][interior], upper[1][interior], 3)
        v = np.linalg.solve(np.swapaxes(rows, 1, 2), target[..., None])[..., 0]
        w[interior, 0:2] -= v[:, 0:1]
        w[interior, 2:4] -= v[:, 1:2]
        w[interior, 4:6] -= v[:, 2:3]
    # One neighbour (the ends): a line through the parent and it. Edge columns of the
    # neighbour's interval, and its leaves' columns.
    for end, lo, hi, leaves in ((0, 4, 6, slice(4, 6)), (n_parents - 1, 0, 2, slice(0, 2))):
        te = t[end]
        rows = np.stack([_moments(te[2], te[4], 2), _moments(te[lo], te[hi], 2)])
        v = np.linalg.solve(rows.T, _moments(te[3], te[4], 2))
        w[end, 2:4] -= v[0]
        w[end, leaves] -= v[1]
    return w, index, readable


def uniform_edges(n_leaves: int) -> np.ndarray:
    """The edges of n_leaves leaves of equal width on [0, 1]."""
    return np.arange(n_leaves + 1) / n_leaves


def smoothness_residuals(class_leaves: np.ndarray, edges: np.ndarray | None = None) -> np.ndarray:
    """Each parent's residual r (`_residual_weights`) for one class's leaves (..., L), L even,
    shape (..., L/2); `edges` the leaves' L + 1 edges in the scores' units (None: equal)."""
    x = np.asarray(class_leaves, dtype=np.float64)
    n_leaves = x.shape[-1]
    w, index, _ = _residual_weights(uniform_edges(n_leaves) if edges is None else edges)
    return np.einsum("...jk,jk->...j", x[..., index], w)


def _residual_stats(
    leaves: np.ndarray, draws: np.ndarray | None, edges: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(residuals (2, L/2), their spreads (2, L/2), readable (L/2,)) of leaves (2, L), L ≥ 4
    even: the spread combines the data's sampling (Poisson on the clamped counts) and the
    noise's (over the draws (D, 2, L), None without noise)."""
    n_leaves = leaves.shape[-1]
    w, index, readable = _residual_weights(uniform_edges(n_leaves) if edges is None else edges)
    r = np.einsum("cjk,jk->cj", leaves[:, index], w)
    var = np.stack([_sampling_variance(w, index, np.clip(leaves[c], 0.0, None)) for c in (0, 1)])
    if draws is not None and len(draws) > 1:
        noise = np.einsum("dcjk,jk->dcj", np.asarray(draws)[:, :, index], w)
        var = var + np.var(noise, axis=0, ddof=1)
    return r, np.sqrt(var), readable


def rough_parents(
    leaves: np.ndarray, draws: np.ndarray | None = None, edges: np.ndarray | None = None
) -> np.ndarray:
    """Which parents (pairs of leaves 2j, 2j + 1) of consistent leaves (2, L) the release shows
    not smooth (bool, L/2): a residual beyond ROUGH_SDS spreads in either class, the spread
    combining the data's sampling (Poisson on the clamped counts) and the noise's (over the
    draws (D, 2, L) on the release, None without noise). `edges`: the leaves' L + 1 edges in
    the scores' units (the release axis' `leaf_edges`; None: equal widths). Every parent is
    rough below 4 leaves (no neighbour to read a density from) or with an odd number of
    leaves."""
    leaves = np.asarray(leaves, dtype=np.float64)
    n_leaves = leaves.shape[-1]
    if n_leaves < 4 or n_leaves % 2:
        return np.ones(max(n_leaves // 2, 1), bool)
    r, sd, readable = _residual_stats(leaves, draws, edges)
    return ~readable | np.any(np.abs(r) > ROUGH_SDS * sd + 1e-9, axis=0)


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
    leaves: np.ndarray, draws: np.ndarray | None = None, edges: np.ndarray | None = None
) -> np.ndarray:
    """`rough_parents` spread to both leaves of each parent (bool, L)."""
    n_leaves = np.shape(leaves)[-1]
    rough = np.repeat(rough_parents(leaves, draws, edges), 2)
    if rough.size < n_leaves:
        rough = np.ones(n_leaves, bool)
    return rough[:n_leaves]


def smooth_parents(
    leaves: np.ndarray, draws: np.ndarray | None, edges: np.ndarray | None, min_cells: int
) -> np.ndarray:
    """The parents read as smooth (bool, L/2): not `rough_parents`, and none below `min_cells`
    leaves (there every leaf gets the worst case)."""
    n_leaves = np.shape(leaves)[-1]
    if n_leaves < min_cells or n_leaves % 2:
        return np.zeros(max(n_leaves // 2, 1), bool)
    return ~rough_parents(leaves, draws, edges)


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
    shared = np.where(rough_leaf, p * n, 0.0).sum(axis=-1)
    half = np.where(defined, shared / (2.0 * safe), 0.5)
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
