"""Exact curves and the diagnostics shown beside each estimate in a simulation: the empirical ROC
and PR curves at every distinct score, thinned for display, with AUC, AP and the area between an
estimate and the exact curves (moved from `fedeval.estimate.roc_pr`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedeval.estimate.area_pass import AreaPass, BlockSums, dot
from fedeval.estimate.exact import SortedScores, int_dot
from fedeval.estimate.exact_rows import (
    TEMPORARIES,
    Block,
    Inline,
    Scratch,
    ahead,
    row_tasks,
)
from fedeval.estimate.roc_pr import Curves

EXACT_BLOCK = 1 << 16
"""The fewest keys `exact_diagnostics` takes at a time on more than two threads (`exact_block`)."""

FEW_THREADS_BLOCK = 1 << 17
"""Keys `exact_diagnostics` takes at a time on one or two threads. Each block costs about 0.2 ms
in numpy calls whatever its size, and its temporaries are reused from block to block
(`Scratch`), so they stay in cache up to here (10^8 float32 logistic scores, 23% distinct,
distdp's estimate, one thread, CPU-s: 2^16 1.40, 2^17 1.23, 2^18 1.25-1.31; two threads 1.89-2.00,
1.53-1.65, 1.67-1.71). The float sums (AP, the areas) are added a block at a time: 2^16 before
session 20 moves them in the last bits only."""

EXACT_BLOCK_MAX = 1 << 20
"""The most keys `exact_block` takes at a time."""

EXACT_MEMORY = 1 << 29
"""What `exact_diagnostics`' blocks in flight may hold in all (512 MB): `exact_block` sizes
them so that threads + 1 blocks' temporaries stay below it. (16 threads, 10^8 distinct float32
scores, distdp: the default evaluation took 2.07 s with 256 MB, 1.46 s with 1 GB: each block's
numpy calls hand the GIL over, and fewer, larger blocks hand it over less.)"""

KEY_BYTES, DISTINCT_BYTES = 8, 96
"""A block's temporaries at their peak, in bytes: at most this much per key, plus this much per
distinct score (tracemalloc on 2^18 float32 keys with the estimate's areas: 87 B a key where
92% are distinct, read key by key; 4.6 B where 3.4% are, 1.3 B where 0.3% are, read by runs of
equal keys)."""

THIN_CELLS = 1000
"""`exact_diagnostics` keeps a point where the rank or the ROC arc (FPR + TPR) enters a new one
of this many cells, and the point before it (the corner of a step): at most 4·THIN_CELLS + 2
points, enough for a figure to draw the same line."""


@dataclass(frozen=True, eq=False)
class ExactCurves(Curves):
    """The exact curves thinned for display, with the areas under the full curves: `roc_auc`
    and `average_precision` are those of every distinct score, not of the kept points."""

    auc: float = math.nan

    @property
    def roc_auc(self) -> float:
        return self.auc


EXACT_AUC_FLOAT = 2.0**52
"""Below this many (positive, negative) pairs, twice the AUC's integer sum is summed in float64
(exact: every partial sum is an integer below 2^53); above it, in int64."""


def distinct_fraction(s: SortedScores, windows: int = 32, width: int = 4096) -> float:
    """About what share of the packed keys start a new score: read in `windows` evenly spaced
    runs of `width` keys (all the keys where they are fewer); 1 for scores kept by class."""
    keys = s.keys
    if keys is None or len(keys) < 2:
        return 1.0
    width = min(width, len(keys))
    starts = np.linspace(0, len(keys) - width, windows).astype(np.int64)
    score = keys[starts[:, None] + np.arange(width)] >> 1
    return float(np.count_nonzero(score[:, 1:] != score[:, :-1])) / (windows * (width - 1))


def exact_block(s: SortedScores, threads: int) -> int:
    """Keys `exact_diagnostics` takes at a time on `threads` threads: FEW_THREADS_BLOCK on one
    or two, else EXACT_BLOCK·threads, so that the numpy calls
    per second of all the threads (each hands the GIL over) stay as on two, halved until
    threads + 1 blocks' temporaries (KEY_BYTES a key, DISTINCT_BYTES a distinct score, the
    distinct share sampled: `distinct_fraction`) fit in EXACT_MEMORY, never below
    EXACT_BLOCK nor above EXACT_BLOCK_MAX. (On 16 threads and 2·10^8 keys without the areas,
    the pass took 3.27 s by 2^16 keys, 1.14 s by 2^18, 0.59 s by 2^20.)"""
    if threads <= 2:
        return FEW_THREADS_BLOCK
    per_key = KEY_BYTES + DISTINCT_BYTES * distinct_fraction(s)
    block = min(EXACT_BLOCK * threads, EXACT_BLOCK_MAX)
    while block > EXACT_BLOCK and (threads + 1) * block * per_key > EXACT_MEMORY:
        block //= 2
    return max(block, EXACT_BLOCK)


@dataclass(frozen=True, eq=False)
class _Derived:
    """One block of `exact_diagnostics`' pass with all that needs only its own rows and the
    counts above it: its share of the sums, and the points the thinning keeps (held until
    the calling thread adds it in order: only what that reads, not the counts)."""

    points: int  # distinct scores in the block
    tpr: np.ndarray
    fpr: np.ndarray
    precision: np.ndarray
    twice_auc: int
    ap: float
    corner: bool  # the block's first point starts a cell: the point above it is kept too
    keep: np.ndarray  # the block's points kept (indices ≥ 0)
    kept: np.ndarray  # their scores
    last: float  # the block's last score
    every: np.ndarray | None  # all its scores, where it has no more than `few` points
    roc: BlockSums | None = None  # the block's `AreaPass.block` sums of either area
    pr: BlockSums | None = None


def _derive(
    rows: Block,
    tp0: float,
    fp0: float,
    p: int,
    n: int,
    cells: int,
    in_float: bool,
    roc: AreaPass | None = None,
    pr: AreaPass | None = None,
    few: int = 0,
    scratch: Scratch | None = None,
) -> _Derived:
    """`_Derived` of a block whose (TP, FP) above it are (tp0, fp0): the thinning's cells
    reached above it, and the curves' point before it (where the areas' segments start), are
    read off those counts (the same float operations as on the last point of the block above,
    so the same cells and points)."""
    picked, tp, fp, dp, dn, count = rows
    with np.errstate(divide="ignore", invalid="ignore"):
        if in_float:
            twice_auc = 2 * int(dot(dn, tp)) - int(dot(dn, dp))
        else:
            dn_i = dn.astype(np.int64)
            twice_auc = int_dot(dn_i, 2 * tp.astype(np.int64) - dp.astype(np.int64))
        tpr, fpr = tp / p, fp / n
        precision = tp / count  # every distinct score has a count
        ap = dot(dp, precision)
        # Thinning: the first point in each new cell of rank or of arc, and the point before
        # each. Both rise along the curve, so each cell's first point is found by a binary
        # search for its lower edge (cell ≥ c: count·cells ≥ c·(P + N), arc ≥ c).
        rank_lo = int(tp0 + fp0) * cells // (p + n)
        rank_hi = int(count[-1]) * cells // (p + n)
        edges = -(-np.arange(rank_lo + 1, rank_hi + 1) * (p + n) // cells)
        starts = np.searchsorted(count, edges, side="left")
        if p and n:  # otherwise the arc is undefined: rank alone
            arc_lo = math.floor((tp0 / p + fp0 / n) * (cells / 2))
            edges = np.arange(arc_lo + 1, math.floor((tpr[-1] + fpr[-1]) * (cells / 2)) + 1)
            starts = np.concatenate([starts, _arc_starts(tpr, fpr, cells / 2, edges)])
        keep = np.concatenate([starts - 1, starts])
        keep.sort()  # (np.unique costs more on these few)
        if len(keep) > 1:
            keep = keep[np.concatenate([[True], keep[1:] != keep[:-1]])]
        corner = bool(len(keep) and keep[0] < 0)
        roc_sums = pr_sums = None
        if roc is not None and pr is not None:
            first = tp0 == 0 and fp0 == 0
            t0, f0 = np.float64(tp0), np.float64(fp0)
            roc_at = roc.point(0.0, 0.0) if first else roc.point(f0 / n, t0 / p)  # (0, 0): start
            work = None
            if scratch is not None:  # 2·d + 2 floats: as much of it as the areas use
                work = scratch.get(TEMPORARIES, 3 * len(tp) + 2, np.uint64).view(np.float64)
            roc_sums = roc.block(fpr, tpr, dn, 1 / n if n else math.nan, roc_at, work)
            pr_at = None if first else pr.point(t0 / p, t0 / (t0 + f0))
            pr_sums = pr.block(tpr, precision, dp, 1 / p if p else math.nan, pr_at, work)
    keep = keep[1:] if corner else keep
    return _Derived(
        len(tp),
        tpr,
        fpr,
        precision,
        twice_auc,
        ap,
        corner,
        keep,
        picked.at(keep),
        float(picked.at(np.array([len(tp) - 1]))[0]),
        picked.all() if len(tp) <= few else None,
        roc_sums,
        pr_sums,
    )


ARC_STRIDE = 64
"""`_arc_starts` reads the arc at every this many points, then inside one such window per edge."""


def _arc_starts(tpr: np.ndarray, fpr: np.ndarray, scale: float, edges: np.ndarray) -> np.ndarray:
    """`np.searchsorted((tpr + fpr) * scale, edges, side="left")` without the arc over every
    point: the arc (each point's the same float operations) at every ARC_STRIDE-th point and
    the last finds the window where each edge is first reached, and only those windows are
    read. The arc never falls along the curve (TPR and FPR never do, and rounding keeps
    order), so the points below an edge are those before the window and those in it below
    the edge; each edge is reached by the last point (edges end at its cell)."""
    m = len(tpr)
    if not len(edges):
        return np.zeros(0, np.intp)
    at = np.arange(min(ARC_STRIDE, m) - 1, m, ARC_STRIDE)
    if at[-1] != m - 1:
        at = np.append(at, m - 1)
    sampled = tpr[at] + fpr[at]
    sampled *= scale
    k = np.searchsorted(sampled, edges, side="left")
    lo = np.where(k > 0, at[np.maximum(k - 1, 0)] + 1, 0)
    window = np.minimum(lo[:, None] + np.arange(ARC_STRIDE), m - 1)
    arc = tpr[window] + fpr[window]
    arc *= scale
    found: np.ndarray = lo + np.count_nonzero(arc < edges[:, None], axis=1)
    return found


def _derive_made(make: Callable[[], Block], tp0: float, fp0: float, *args: Any) -> _Derived:
    return _derive(make(), tp0, fp0, *args)


def exact_diagnostics(
    s: SortedScores,
    estimate: Curves | None = None,
    *,
    block: int | None = None,
    cells: int = THIN_CELLS,
    threads: int | None = None,
) -> tuple[ExactCurves, float | None, float | None]:
    """(exact curves thinned for display, ROC area error, PR area error) in one pass over the
    distinct scores from the top, `block` at a time: AUC, AP and the areas between `estimate`
    and the exact curves are summed over every point on the way (the same values as
    `exact_curves` with `roc_area_error`/`pr_area_error`, up to the order of float sums), but
    only a few thousand points of the curves are kept (all of them when there are no more
    than 4·`cells` + 2). Memory: a few blocks, not the curves' four float64 arrays over every
    distinct score.

    AUC is the trapezoid in integer counts, Σ ΔFP·(TP + TP₋), over 2PN (= the Mann-Whitney
    form); AP is Σ ΔTP·precision / P, as scikit-learn sums it.

    With `threads` > 1 (default: `s.threads`) the blocks are made and summed in a pool of that
    many threads, the areas' sums included: each block needs only the counts above it (found
    first), from which its cells and the curves' point before it are read. The calling thread
    adds the blocks' sums in curve order, as one thread would, so the result is the same bit
    for bit; at most threads + 1 blocks are held at once. `block` (default `exact_block`):
    keys taken at a time; the float sums (AP, the areas) are added a block at a time, so
    another block size moves them in the last bits only."""
    p, n = s.n_positives, s.n_negatives
    threads = s.threads if threads is None else threads
    block = exact_block(s, threads) if block is None else block
    roc = pr = None
    if estimate is not None:
        roc = AreaPass(estimate.fpr, estimate.tpr, start=(0.0, 0.0))
        pr = AreaPass(estimate.recall[1:], estimate.precision[1:])
    kept: list[tuple[np.ndarray, ...]] = [
        (np.array([np.inf]), np.zeros(1), np.zeros(1), np.ones(1))
    ]
    every: list[tuple[np.ndarray, ...]] | None = list(kept)  # while there are few points
    # The last point seen, (0, 0) at +inf first: (index, t, tpr, fpr, precision). The rank is
    # the examples at or above the threshold, over all of them.
    last = (0, np.inf, 0.0, 0.0, 1.0)
    last_kept = 0
    twice_auc = 0
    ap = 0.0
    in_float = 2 * p * n < EXACT_AUC_FLOAT
    several = threads > 1 and s.n_positives + s.n_negatives > 2 * block
    few = 4 * cells + 2  # at most this many points: all of them kept
    scratch = Scratch()  # each thread's temporaries, reused block after block
    pool: Executor = ThreadPoolExecutor(threads, "fedeval-exact") if several else Inline()
    if several and roc is not None and pr is not None:  # special segments in the pool too
        roc.executor = pr.executor = pool
    try:
        tasks = (
            (_derive_made, make, tp0, fp0, p, n, cells, in_float, roc, pr, few, scratch)
            for make, tp0, fp0 in row_tasks(s, block, pool if several else None, scratch)
        )
        for d in ahead(pool, tasks, threads + 1):
            twice_auc += d.twice_auc
            ap += d.ap
            if roc is not None and pr is not None and d.roc is not None and d.pr is not None:
                roc.take(d.fpr, d.tpr, *d.roc)
                pr.take(d.tpr, d.precision, *d.pr)
            if every is not None:
                if d.every is None or last[0] + d.points + 1 > few:
                    every = None
                else:
                    every.append((d.every, d.tpr, d.fpr, d.precision))
            if d.corner and last[0] > last_kept:  # the corner before this block's first point
                kept.append(tuple(np.array([v]) for v in last[1:5]))
            if len(d.keep):
                kept.append((d.kept, d.tpr[d.keep], d.fpr[d.keep], d.precision[d.keep]))
                last_kept = last[0] + 1 + int(d.keep[-1])
            last = (
                last[0] + d.points,
                d.last,
                float(d.tpr[-1]),
                float(d.fpr[-1]),
                float(d.precision[-1]),
            )
        for area in (roc, pr):
            if area is not None:
                area.settle()
    finally:
        for area in (roc, pr):
            if area is not None:
                area.executor = None
        pool.shutdown(wait=True, cancel_futures=True)
    if last[0] > last_kept:  # the last point: every example predicted positive
        kept.append(tuple(np.array([v]) for v in last[1:5]))
    if every is not None:  # few enough to keep them all
        kept = every
    thresholds, tpr_k, fpr_k, precision_k = (np.concatenate(a) for a in zip(*kept, strict=True))
    denom = 2 * p * n
    auc = twice_auc / denom if denom else math.nan
    curves = ExactCurves(
        thresholds.astype(np.float64),
        tpr_k,
        fpr_k,
        precision_k,
        ap / p if p else math.nan,
        auc,
    )
    if roc is None or pr is None:
        return curves, None, None
    return curves, roc.finish(), pr.finish()


ExactDiagnostics = tuple[ExactCurves, float | None, float | None]
"""What `exact_diagnostics` returns: the thinned exact curves and the two area errors."""


def exact_diagnostics_started(
    s: SortedScores, estimate: Curves | None = None
) -> Future[ExactDiagnostics] | None:
    """`exact_diagnostics(s, estimate)` started in a thread of its own where the scores may use
    several threads (`s.threads` > 1), so that the calling thread goes on with the release's
    intervals while the pass runs; None on one thread (the caller runs the pass itself, where
    it always did). The pass reads only the sorted keys and class counts of `s` and the
    estimate, which nothing changes (other threads may add `s`'s cached tables meanwhile),
    with the pool and block size `s.threads` gives it, so its values are the same bit for bit
    whenever it runs. Its blocks' temporaries (at most EXACT_MEMORY) are then held beside
    the calling thread's, not after them."""
    if s.threads <= 1:
        return None
    runner = ThreadPoolExecutor(1, "fedeval-exact-pass")
    started = runner.submit(exact_diagnostics, s, estimate)
    runner.shutdown(wait=False)  # its thread ends with the pass
    return started
