"""The residual weights of the smoothness check (`fedeval.estimate.smoothness`): each parent's
residual as a linear form of at most six leaves (the upper leaf's count less what a density
smooth across the parent and its neighbours predicts), the data's sampling variance of it, and
which parents a neighbour can check at all. Functions of the leaves' edges alone (the axis),
kept for the last edges asked for; no data is read."""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt

Floats: TypeAlias = npt.NDArray[np.float64]
"""An array of float64 (counts, sums and ratios of them)."""

CHECK_VARIANCE = 4.0 * 9.0 / 16.0
"""A parent whose residual sums squared weights Σₖ wₖ² above this (4× an end parent's among
leaves of equal widths, 9/16; an interior one's is 33/64) is not checked (blind: its
examples depart). Σw² is the residual's sampling variance per example it combines: a parent
far wider than a neighbour is predicted by extrapolating a quadratic read at the neighbour's
scale, which amplifies the neighbour's sampling and says nothing of the density inside the
parent at its own. Thresholds declared close together warp the axis so (scores in [0, 0.01]
with five thresholds in them put the top of the data in a parent 45× as wide as the one below
it, Σw² = 134: 19% of its mass could depart unseen, and the AUC interval held 0.27 of 200
federated data draws at h = 11). Σw² grows about as the square of the widths' ratio: 0.59 at
2 (the default k/11 thresholds), 1.39 at 4.7, 3.7 at 8."""


def _moments(lo: np.ndarray, hi: np.ndarray, k: int) -> np.ndarray:
    """∫ tᵏ dt over [lo, hi], for k = 0 … k − 1 (last axis)."""
    powers = np.arange(1, k + 1)
    return (hi[..., None] ** powers - lo[..., None] ** powers) / powers


_WEIGHTS_KEPT = 2
"""Leaf edges whose residual weights `_residual_weights` keeps (a run reads them many times)."""

_weights_cache: dict[bytes, tuple[np.ndarray, ...]] = {}


def _residual_weights(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_weights_of(edges)`, kept for the last `_WEIGHTS_KEPT` edges (read-only arrays): at
    65,536 leaves they cost about 60 ms, and one evaluation asks for the same ones six
    times."""
    edges = np.asarray(edges, dtype=np.float64)
    key = edges.tobytes()
    kept = _weights_cache.get(key)
    if kept is None:
        kept = (*_weights_of(edges),)
        kept = (*kept, *_sampling_terms(kept[0], kept[1]), *_own_weights(kept[0], kept[1]))
        for a in kept:
            a.flags.writeable = False
        for old in list(_weights_cache)[: max(len(_weights_cache) - _WEIGHTS_KEPT + 1, 0)]:
            _weights_cache.pop(old, None)  # (a list first: safe if another thread adds one)
        _weights_cache[key] = kept
    w, index, readable = kept[:3]
    return w, index, readable


def _own_weights(w: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(w_L, w_U): each parent's weight on its own lower and upper leaf in its residual
    (`departures`), a leaf listed twice (an end, clipped) with both weights summed."""
    j = np.arange(w.shape[0])
    w_low, w_up = (np.where(index == 2 * j[:, None] + k, w, 0.0).sum(axis=1) for k in (0, 1))
    return w_low, w_up


def _weights_of(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, leaf index, readable) of each parent's residual as a linear form of at most
    six leaves: r_j = Σₖ weights[j, k]·x[index[j, k]] (index clipped into range, weight 0 where
    a leaf does not enter), for leaves with these L + 1 edges in the scores' units.

    r_j is the upper leaf's count less what a density smooth across the parent and its
    neighbours predicts for it: a quadratic through the three parents' counts (integrals over
    their own widths, so a warped axis, whose leaves are of unequal width in scores, is read in
    the scores' own units), or at either end a line through the parent and its one neighbour.
    With equal widths that is (X₊ − X₋)/16 + X/2. `readable` is False without a neighbour, or
    where the residual's Σw² exceeds CHECK_VARIANCE: no check at the parent's own scale."""
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
    w[:, 3] = 1.0
    interior = (j > 0) & (j < n_parents - 1)
    if interior.any():
        # A parent's system depends on its row of t alone, and an axis uniform between its
        # knots repeats rows in runs: each run's first system is solved, its solution repeated
        # (LAPACK solves each matrix of the stack alone, so the same values bit for bit; at
        # 65,536 leaves of the default axis, 187 systems instead of 32,766: 31 → ~3 ms).
        ti = t[interior]
        starts = np.flatnonzero(np.r_[True, np.any(ti[1:] != ti[:-1], axis=1)])
        tu = ti[starts]
        rows = np.stack([_moments(tu[:, 2 * r], tu[:, 2 * r + 2], 3) for r in range(3)], axis=1)
        target = _moments(tu[:, 3], tu[:, 4], 3)
        v = np.linalg.solve(np.swapaxes(rows, 1, 2), target[..., None])[..., 0]
        v = np.repeat(v, np.diff(np.r_[starts, len(ti)]), axis=0)
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
    readable &= np.square(w).sum(axis=1) <= CHECK_VARIANCE
    return w, index, readable


def uniform_edges(n_leaves: int) -> Floats:
    """The edges of n_leaves leaves of equal width on [0, 1]."""
    edges: Floats = np.arange(n_leaves + 1) / n_leaves
    return edges


def _residuals(x: np.ndarray, w: np.ndarray, index: np.ndarray) -> Floats:
    """Each parent's residual Σₖ w[j, k]·x[..., index[j, k]] of leaves x (..., L): the terms
    summed k = 0 … 5 in order, as ``np.einsum("...jk,jk->...j", x[..., index], w)`` sums them
    (the same value bit for bit), without gathering the (..., L/2, 6) windows: for L even the
    windows are strided slices of x with its end leaves repeated twice on either side
    (`_weights_of`' index, clipped into range), taken _RESIDUAL_BLOCK values of x at a time so
    that each block's work space stays in cache (200 draws of 1,024 leaves: 2.2 → 1.5 ms)."""
    n_parents = w.shape[0]
    n_leaves = x.shape[-1]
    if n_leaves != 2 * n_parents or n_parents == 0:
        out: Floats = np.einsum("...jk,jk->...j", x[..., index], w)
        return out
    rows = x.reshape(-1, n_leaves)
    out = np.empty((rows.shape[0], n_parents))
    columns = np.ascontiguousarray(w.T)
    step = max(1, _RESIDUAL_BLOCK // n_leaves)
    for at in range(0, rows.shape[0], step):
        xs = rows[at : at + step]
        pad = np.concatenate([xs[:, :1], xs[:, :1], xs, xs[:, -1:], xs[:, -1:]], axis=-1)
        o = out[at : at + step]
        np.multiply(pad[:, 0 : 2 * n_parents : 2], columns[0], out=o)
        term = np.empty_like(o)
        for k in range(1, len(columns)):
            np.multiply(pad[:, k : k + 2 * n_parents : 2], columns[k], out=term)
            o += term
    return out.reshape(*x.shape[:-1], n_parents)


_RESIDUAL_BLOCK = 1 << 15
"""Leaf values `_residuals` reads at a time (a block of rows of at least one row)."""


def _sampling_terms(w: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, ...]:
    """(parent, leaf, squared summed weight) of each distinct (parent, leaf) pair the
    residuals combine, in the order of (parent, leaf): `_sampling_variance`'s terms."""
    n_parents = w.shape[0]
    size = int(index.max()) + 1 if index.size else 1
    rows = np.repeat(np.arange(n_parents), w.shape[1])
    flat = rows * size + index.ravel()
    if np.all(flat[1:] >= flat[:-1]):  # `_weights_of`' index: sorted, so its runs are unique
        first = np.r_[True, flat[1:] != flat[:-1]]
        uniq, inverse = flat[first], np.cumsum(first) - 1
    else:
        uniq, inverse = np.unique(flat, return_inverse=True)
    summed = np.bincount(inverse, weights=w.ravel())
    return uniq // size, uniq % size, summed**2


def _own_of(w: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_own_weights(w, index)`, read from `_residual_weights`' kept arrays where w is theirs."""
    kept = next((k for k in list(_weights_cache.values()) if k[0] is w), None)
    if kept is None:
        return _own_weights(w, index)
    return kept[6], kept[7]


def _sampling_variance(w: np.ndarray, index: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Σₖ (summed weight of leaf k)²·countₖ per parent: Poisson sampling of the leaves a
    residual combines, a leaf listed twice (an end, clipped) counted once with both weights."""
    kept = next((k for k in list(_weights_cache.values()) if k[0] is w), None)
    parent, leaf, squared = kept[3:6] if kept is not None else _sampling_terms(w, index)
    per = squared * counts[leaf]
    return np.bincount(parent, weights=per, minlength=w.shape[0])
