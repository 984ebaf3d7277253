"""Each region of a released tree read at the finest level whose counts are informative there.

Under distdp every level of the tree is released, so the curves need not read every region at
the leaves: where a node holds fewer examples than its children's noise can tell from none,
its leaves are noise, and the AP's integral rule clips that noise into false positives (scores
squeezed into [0.45, 0.55] at h = 9: 451 of 512 leaves empty, each with its own noise).
Reading such a node whole replaces the noise of its 2^(h − k) leaves by that of one count. The
descent (as post-processing, in the spirit of PrivTree, Zhang, Xiao & Xie, SIGMOD 2016): from
the root, a node is read through its two children where its pooled count is at least
DESCENT_SDS sds of one child's noise, else whole (its count spread evenly over its leaves,
which the integral rule reads exactly as one cell: a straight path in (FP, TP) split into
pieces is the same path). A function of the release alone (its consistent leaves and its
mechanism's variances): no ε.

Not read by the library's curves (they read the leaves): a candidate rule that
`benchmarks/level_read.py` measures. Measured (distdp ε = 1, 12 families at 100k, 40 draws):
squeezed AP 1.31× → 1.06× the best fixed height's median error, no other family's AP moved
beyond the draws' noise; but where a handful of positives sit together at the top (5 or 10
positives scoring 0.98–1 among 5,000 rows below 0.5, 200 releases at auto height), a node whose
few positives its children's noise hides is read whole, its positives spread over the cell
beside the noisy negatives, and the AP interval's misses went 15 → 31 and 6 → 13 of 200 (the
interval's candidates assume a mix inside a cell; the order that puts the positives first is
only in the hull, used where the noise exceeds it). A read of coarse cells needs an AP interval
that holds every order inside them first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedeval.core.hierarchy import class_variances, coarsen, consistent_leaves

DESCENT_SDS = 2.0
"""z: a node is read through its children only where its pooled count is beyond z sds of one
child's noise. Below, the children's counts cannot be told from 0 at about the 95% level, so
the node is read whole. (z = 2, 4 and 8 gave the same counts of cells within 1.25× of the best
fixed height in a first version of `benchmarks/level_read.py`, its sds from noise draws.)"""


def node_sds(variances: Sequence[float | np.ndarray], levels: Sequence[int]) -> np.ndarray | None:
    """(h + 1,): the noise sd of one pooled (both classes) consistent count of each level 0..h,
    from the released levels' noise variances (one number per level and class); None where a
    variance is per cell, 0 or infinite at the leaves (nothing to descend by).

    Every node of a level has the same least-squares variance (the tree is symmetric), a'(AᵀWA)⁻¹a
    for a the node's indicator over the leaves: `consistent_leaves` on a measurement holding
    v_h·a at the leaves and 0 elsewhere returns (AᵀWA)⁻¹a (as
    `fedeval.privacy.level_split.read_variances` computes it)."""
    levels = tuple(int(k) for k in levels)
    if any(np.ndim(v) > 0 for v in variances):
        return None
    leaf = float(variances[-1])
    if not (np.isfinite(leaf) and leaf > 0):
        return None
    h = levels[-1]
    j = np.arange(1 << h)
    a = np.stack([(j < (1 << (h - k))).astype(np.float64) for k in range(h + 1)])
    total = np.zeros(h + 1)
    for c in (0, 1):
        v = class_variances(variances, c)
        measured = [np.zeros((h + 1, 1 << k)) for k in levels[:-1]] + [float(v[-1]) * a]
        total += (a * consistent_leaves(measured, v, levels)).sum(axis=-1)
    out: np.ndarray = np.sqrt(np.maximum(total, 0.0))
    return out


def descent_starts(pooled: np.ndarray, sd: np.ndarray, z: float = DESCENT_SDS) -> np.ndarray:
    """The first leaf of each cell the descent reads, ascending, for pooled consistent leaves
    (2^h,) and `node_sds` sd (h + 1,): a node of level k < h is split where its count is at
    least z·sd[k + 1]."""
    h = int(np.log2(pooled.shape[-1]))
    starts, open_ = [], np.ones(1, bool)
    for k in range(h):
        split = open_ & (coarsen(pooled, k) >= z * sd[k + 1])
        starts.append(np.flatnonzero(open_ & ~split) << (h - k))
        open_ = np.repeat(split, 2)
    starts.append(np.flatnonzero(open_))
    out: np.ndarray = np.sort(np.concatenate(starts))
    return out


def spread(leaves: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Leaves (..., L) with each cell's (from `starts`) count spread evenly over its leaves:
    linear, so noise draws go through it as the leaves do. The leaves themselves where every
    cell is one leaf."""
    n = leaves.shape[-1]
    if len(starts) == n:
        return leaves
    widths = np.diff(np.append(starts, n))
    sums = np.add.reduceat(leaves, starts, axis=-1)
    out: np.ndarray = np.repeat(sums / widths, widths, axis=-1)
    return out


def descent_read(
    leaves: np.ndarray, variances: Sequence[float | np.ndarray], levels: Sequence[int]
) -> np.ndarray | None:
    """`descent_starts` of a release's consistent leaves (2, L), or None where it reads every
    leaf (or cannot descend: `node_sds`)."""
    sd = node_sds(variances, levels)
    if sd is None:
        return None
    starts = descent_starts(np.asarray(leaves, np.float64).sum(axis=0), sd)
    return None if len(starts) == leaves.shape[-1] else starts
