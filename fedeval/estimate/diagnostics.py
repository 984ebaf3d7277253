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

from fedeval.estimate.curve_areas import Knots, area_of, area_terms, on_grid, step_limits
from fedeval.estimate.exact import SortedScores
from fedeval.estimate.exact_rows import Block, Inline, ahead, row_tasks
from fedeval.estimate.roc_pr import Curves

EXACT_BLOCK = 1 << 16
"""Distinct scores taken at a time by `exact_diagnostics`: its temporaries stay this size."""

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


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ a·b of two float64 vectors in numpy's own loop (`einsum`), not BLAS: OpenBLAS
    threads its dot products, and on a busy machine their spin-waits cost many times the
    sum."""
    return float(np.einsum("i,i->", a, b))


def _knots_of(
    points: tuple[np.ndarray, np.ndarray],
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """`step_limits` of a few points (x, y), and the same knots as points again: each knot as
    (x, left) then (x, right), so that points appended later continue its run."""
    ux, left, right = step_limits(*points)
    return (ux, left, right), (np.repeat(ux, 2), np.column_stack([left, right]).ravel())


BlockSums = tuple[float, tuple[np.ndarray, ...] | None, tuple[float, float, float]]
"""`_AreaPass.block`'s sums of a block: (its area, its special segments, its last point)."""

SLICED_SEGMENTS = 32
"""`_AreaPass._lines` reads the estimate's lines a segment at a time, on slices of the block,
up to this many segments in a block (the same float operations on the same values as repeating
each line over its run; three passes instead of six, at a few microseconds a segment)."""

SPECIAL_BATCH = 1 << 14
"""Special segments (`_AreaPass`) gathered before they are integrated together."""


class _AreaPass:
    """∫|exact − estimate| dx with the exact curve's points fed a block at a time, in curve
    order: the same sum as `_area_between` over the whole curve (up to the order of float
    sums), in whole-array operations on each block.

    Each exact segment (between consecutive points, straight) is integrated from the
    difference d = y − estimate at its two ends, the estimate read on its segments' lines
    (`_lines`). That is exact wherever the estimate is straight over the segment; the few
    segments that hold one of the estimate's knots, or lie beyond its ends, are integrated
    again on their own grid with the estimate's limits, and replace their first sum. The grid
    beyond the exact curve's own ends (where only the estimate has knots) is added at the end,
    from the exact curve's first and last two knots."""

    def __init__(self, x: np.ndarray, y: np.ndarray, start: tuple[float, float] | None = None):
        self.estimate = ux, left, right = step_limits(x, y)
        # Each segment between knots as a line from its left knot: y = right + slope·(x − ux).
        with np.errstate(divide="ignore", invalid="ignore"):
            self.slope = (left[1:] - right[:-1]) / (ux[1:] - ux[:-1])
        self.total = 0.0
        self.prev: tuple[float, float, float] | None = None  # last point: x, y, difference
        self.head: tuple[np.ndarray, np.ndarray] | None = None  # first points, until 3 knots
        self.first: Knots | None = None  # the exact curve's first two knots
        self.tail: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))  # last 2 knots
        # The blocks not yet folded into `tail` (its last two knots are read off them at the
        # end), and the special segments not yet integrated (`_flush`, a batch at a time).
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.special: list[tuple[np.ndarray, ...]] = []
        self.special_size = 0
        # The sums not yet added to `total`, in curve order: each block's, and each batch of
        # special segments' (a Future where `executor`, a pool, integrates it): added in this
        # order whichever thread made them, so the total is the same bit for bit.
        self.addends: list[float | Future[float]] = []
        self.executor: Executor | None = None
        if start is not None:
            self.add(np.array([start[0]]), np.array([start[1]]), np.zeros(1))

    def add(self, x: np.ndarray, y: np.ndarray, steps: np.ndarray, unit: float = 1.0) -> None:
        """The next points (x non-decreasing, continuing the last block), with `steps[k]·unit`
        the width x[k] − x[k − 1] of the segment ending at each (the first from the last point
        of the previous block; taken as 0 for the curve's first point): the counts a point
        adds, and one over the total. `steps` is written."""
        if not len(x):
            return
        self.take(x, y, *self.block(x, y, steps, unit, self.prev))

    def point(self, x: float, y: float) -> tuple[float, float, float]:
        """(x, y, difference) of one point: what `block` returns of its last point (the same
        float operations on the same values, so the same difference)."""
        return float(x), float(y), float(y - self._lines(np.array([x]))[0])

    def block(
        self,
        x: np.ndarray,
        y: np.ndarray,
        steps: np.ndarray,
        unit: float,
        prev: tuple[float, float, float] | None,
    ) -> BlockSums:
        """`add`'s sums over one block, from the point before it (`prev`; None: the curve's
        first point opens the block): (its area, its special segments, its last point). Reads
        only the estimate: safe in any thread, blocks in any order."""
        w = steps
        m = len(x)
        ux = self.estimate[0]
        d = np.empty(m + 1)  # d[k + 1]: at x[k]; d[0]: at the previous point
        np.subtract(y, self._lines(x, out=d[1:]), out=d[1:])
        if prev is None:
            w[0] = 0.0  # no segment before the first point
            xp, yp, d[0] = float(x[0]), float(y[0]), d[1]
        else:
            xp, yp, d[0] = prev
        last = (float(x[-1]), float(y[-1]), float(d[-1]))
        a = np.abs(d)
        total = 0.5 * (_dot(w, a[:-1]) + _dot(w, a[1:]))
        # Two triangles where d changes sign: less than the trapezoid. (By sign bits: d is
        # never −0, and where one end is 0 the triangles' correction is 0.)
        negative = np.signbit(d)
        cross = np.flatnonzero(negative[:-1] != negative[1:])
        if len(cross):
            a0, a1 = a[cross], a[cross + 1]
            total -= _dot(w[cross], a0 * a1 / (a0 + a1))
        total *= unit
        # The segments not straight on the estimate's side: holding one of its knots (either
        # end included: its limits may differ there), or starting before its first knot or
        # ending after its last.
        lo = np.searchsorted(ux, xp, side="left")
        hi = np.searchsorted(ux, x[-1], side="right")
        knots = ux[lo:hi]
        after = np.searchsorted(x, knots, side="right")
        parts = [np.searchsorted(x, knots, side="left"), after[after < m]]
        below = int(np.searchsorted(x, ux[0], side="left"))  # x[k − 1] < ux[0] for k ≤ below
        if below:
            parts.append(np.arange(1, min(below, m - 1) + 1))
        if xp < ux[0]:
            parts.append(np.zeros(1, np.int64))
        above = int(np.searchsorted(x, ux[-1], side="right"))  # x[k] > ux[-1] for k ≥ above
        if above < m:
            parts.append(np.arange(above, m))
        special = np.concatenate(parts)
        special.sort()  # (np.unique's hashing costs more on these few sorted runs)
        keep = w[special] > 0
        keep[1:] &= special[1:] != special[:-1]
        special = special[keep]
        if not len(special):
            return total, None, last
        xa, ya = x[special - 1], y[special - 1]
        if special[0] == 0:
            xa[0], ya[0] = xp, yp
        ws = w[special] * unit
        return total, (xa, ya, x[special], y[special], ws, d[special], d[special + 1]), last

    def take(
        self,
        x: np.ndarray,
        y: np.ndarray,
        total: float,
        special: tuple[np.ndarray, ...] | None,
        last: tuple[float, float, float],
    ) -> None:
        """Add a block's points and their `block` sums, in curve order (the float sums in one
        order, whichever thread summed each block)."""
        self._ends(x, y)
        if special is not None:
            self.special.append(special)
            self.special_size += len(special[0])
            if self.special_size >= SPECIAL_BATCH:
                self._flush()
        self.addends.append(total)
        self._add_ready()
        self.prev = last

    def _add_ready(self, wait: bool = False) -> None:
        """Add the addends to `total` in order, up to the first not yet summed (all: `wait`)."""
        done = 0
        for a in self.addends:
            if isinstance(a, Future):
                if not (wait or a.done()):
                    break
                a = a.result()
            self.total += a
            done += 1
        del self.addends[:done]

    def settle(self) -> None:
        """Wait for the special segments being integrated, add every sum, and integrate any
        later ones on the calling thread (call before the executor shuts down)."""
        self._add_ready(wait=True)
        self.executor = None

    def _flush(self) -> None:
        """Integrate the special segments kept so far on their own grid, in place of their
        first sum: one batch for many blocks (a few thousand segments in all, usually)."""
        if not self.special:
            return
        batch, self.special, self.special_size = self.special, [], 0
        if self.executor is None:
            self.addends.append(self._integrated(batch))
        else:
            self.addends.append(self.executor.submit(self._integrated, batch))

    def _integrated(self, batch: list[tuple[np.ndarray, ...]]) -> float:
        """A batch of special segments on their own grid, less their first sum. Reads only
        the estimate: safe in any thread."""
        xa, ya, xb, yb, ws, d0, d1 = (np.concatenate(a) for a in zip(*batch, strict=True))
        return self._segments(xa, ya, xb, yb) - float(np.sum(area_terms(ws, d0, d1)))

    def _lines(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The estimate at x (ascending) on the line of the segment each lies in (the first or
        last segment's line beyond the knots): right for all but the points on a knot or beyond
        the ends, which `add` integrates again. Each segment's line is repeated over its run
        of points: a few passes, no search per point. Written into `out` when given."""
        ux, _, right = self.estimate
        f: np.ndarray = np.empty(len(x)) if out is None else out
        if len(ux) < 2:
            f[:] = right[0]
            return f
        j0 = min(max(int(np.searchsorted(ux, x[0], side="right")) - 1, 0), len(ux) - 2)
        j1 = min(max(int(np.searchsorted(ux, x[-1], side="right")) - 1, j0), len(ux) - 2)
        cut = np.searchsorted(x, ux[j0 + 1 : j1 + 1], side="left")
        runs = np.empty(len(cut) + 1, np.intp)  # np.diff(cut, prepend=0, append=len(x))
        runs[0] = cut[0] if len(cut) else len(x)
        np.subtract(cut[1:], cut[:-1], out=runs[1:-1])
        runs[-1] = len(x) - cut[-1] if len(cut) else len(x)
        if len(runs) <= SLICED_SEGMENTS:  # each segment's line on its slice: 3 passes, not 6
            at = 0
            for j, m in zip(range(j0, j1 + 1), runs.tolist(), strict=True):
                part = f[at : at + m]
                np.subtract(x[at : at + m], ux[j], out=part)
                part *= self.slope[j]
                part += right[j]
                at += m
            return f
        np.subtract(x, np.repeat(ux[j0 : j1 + 1], runs), out=f)
        f *= np.repeat(self.slope[j0 : j1 + 1], runs)
        f += np.repeat(right[j0 : j1 + 1], runs)
        return f

    def _segments(self, xa: np.ndarray, ya: np.ndarray, xb: np.ndarray, yb: np.ndarray) -> float:
        """∫|exact − estimate| over exact segments from (xa, ya) to (xb, yb) (each straight,
        xb > xa), on a grid of its ends and the estimate's knots between them: at those
        knots the estimate's limits are read directly, and only the ends are placed on it."""
        ux, left, right = self.estimate
        n = len(ux)
        lo = np.searchsorted(ux, xa, side="right")  # knots ≤ xa
        hi = np.searchsorted(ux, xb, side="left")  # knots < xb
        on_a = (lo > 0) & (ux[np.maximum(lo - 1, 0)] == xa)
        on_b = (hi < n) & (ux[np.minimum(hi, n - 1)] == xb)
        leave_a = on_grid(ux, left, right, xa, lo, on_a)[0]
        arrive_b = on_grid(ux, left, right, xb, hi + on_b, on_b)[1]
        plain = hi <= lo  # no knot inside (as beyond the estimate's ends): one interval
        terms = area_terms(xb - xa, ya - leave_a, yb - arrive_b)
        total = float(np.sum(terms[plain]))
        if plain.all():
            return total
        keep = ~plain
        xa, ya, xb, yb, lo, hi = (v[keep] for v in (xa, ya, xb, yb, lo, hi))
        leave_a, arrive_b = leave_a[keep], arrive_b[keep]
        size = hi - lo + 2
        ends = np.cumsum(size) - 1
        starts = ends - size + 1
        seg = np.repeat(np.arange(len(xa)), size)
        knot = np.clip(lo[seg] + np.arange(int(ends[-1]) + 1) - starts[seg] - 1, 0, n - 1)
        g, leaving, arriving = ux[knot], right[knot], left[knot]
        g[starts], g[ends] = xa, xb
        leaving[starts], arriving[ends] = leave_a, arrive_b
        ey = ya[seg] + (g - xa[seg]) / (xb - xa)[seg] * (yb - ya)[seg]  # as `on_grid`'s line
        ey[ends] = yb
        inside = seg[:-1] == seg[1:]
        terms = area_terms(g[1:] - g[:-1], ey[:-1] - leaving[:-1], ey[1:] - arriving[1:])
        return total + float(np.sum(terms[inside]))

    def _ends(self, x: np.ndarray, y: np.ndarray) -> None:
        """Keep the exact curve's first two knots (once known) and its last two so far."""
        if self.first is None:
            hx, hy = (
                (x, y)
                if self.head is None
                else (np.concatenate([self.head[0], x]), np.concatenate([self.head[1], y]))
            )
            knots, points = _knots_of((hx, hy))
            if len(knots[0]) > 2:
                ux, left, right = knots
                self.first = ux[:2], left[:2], right[:2]
                self.head = None
            else:
                self.head = points
        # The last two knots are read off the last blocks at the end: a block with three
        # distinct x holds them whole (the blocks before it are dropped); otherwise the oldest
        # of more than two pending blocks is folded into `tail` now (memory stays bounded).
        r = int(np.searchsorted(x, x[-1], side="left"))  # where the last run of x starts
        if r and x[0] < x[r - 1]:
            self.pending.clear()
            self.tail = (np.zeros(0), np.zeros(0))
        self.pending.append((x, y))
        if len(self.pending) > 2:
            self._fold(*self.pending.pop(0))

    def _fold(self, x: np.ndarray, y: np.ndarray) -> None:
        """Fold a block into `tail`, the last two knots seen (each as two points)."""
        r = int(np.searchsorted(x, x[-1], side="left"))  # where the last run of x starts
        q = int(np.searchsorted(x, x[r - 1], side="left")) if r else 0
        tx, ty = self.tail
        points = _knots_of((np.concatenate([tx, x[q:]]), np.concatenate([ty, y[q:]])))[1]
        self.tail = points[0][-4:], points[1][-4:]

    def finish(self) -> float:
        """The total, with the grid beyond either end of the exact curve added."""
        if self.prev is None:
            return math.nan
        self._flush()
        self.settle()
        for block in self.pending:
            self._fold(*block)
        self.pending.clear()
        first = self.first
        if first is None:  # fewer than three distinct x
            first = step_limits(*self.head) if self.head is not None else None
        last = step_limits(*self.tail)
        ux = self.estimate[0]
        total = self.total
        if first is not None and ux[0] < first[0][0]:
            g = np.r_[ux[ux < first[0][0]], first[0][0]]
            total += self._beyond(first, g)
        if ux[-1] > last[0][-1]:
            g = np.r_[last[0][-1], ux[ux > last[0][-1]]]
            total += self._beyond(last, g)
        return total

    def _beyond(self, knots: Knots, g: np.ndarray) -> float:
        """∫|exact − estimate| over the grid g, the exact curve read from its `knots` (its
        first or last two: all `on_grid` uses beyond its ends)."""
        ends = []
        for ux, left, right in (knots, self.estimate):
            le = np.searchsorted(ux, g, side="right")
            on = (le > 0) & (ux[np.maximum(le - 1, 0)] == g)
            ends.append(on_grid(ux, left, right, g, le, on))
        (leave1, arrive1), (leave2, arrive2) = ends
        return area_of(g, leave1, arrive1, leave2, arrive2)


@dataclass(frozen=True)
class _Picked:
    """A block's distinct scores, `scores[where]` (all of `scores` when `where` is None),
    gathered only at the points asked for."""

    scores: np.ndarray
    where: np.ndarray | None

    def at(self, i: np.ndarray) -> np.ndarray:
        picked: np.ndarray = self.scores[i if self.where is None else self.where[i]]
        return picked

    def all(self) -> np.ndarray:
        return self.scores if self.where is None else self.scores[self.where]


EXACT_AUC_FLOAT = 2.0**52
"""Below this many (positive, negative) pairs, twice the AUC's integer sum is summed in float64
(exact: every partial sum is an integer below 2^53); above it, in int64."""


@dataclass(frozen=True, eq=False)
class _Derived:
    """One block of `exact_diagnostics`' pass with all that needs only its own rows and the
    counts above it: its share of the sums, and the points the thinning keeps."""

    picked: _Picked
    tp: np.ndarray
    dp: np.ndarray
    dn: np.ndarray
    tpr: np.ndarray
    fpr: np.ndarray
    precision: np.ndarray
    twice_auc: int
    ap: float
    corner: bool  # the block's first point starts a cell: the point above it is kept too
    keep: np.ndarray  # the block's points kept (indices ≥ 0)
    roc: BlockSums | None = None  # the block's `_AreaPass.block` sums of either area
    pr: BlockSums | None = None


def _derive(
    rows: Block,
    tp0: float,
    fp0: float,
    p: int,
    n: int,
    cells: int,
    in_float: bool,
    roc: _AreaPass | None = None,
    pr: _AreaPass | None = None,
) -> _Derived:
    """`_Derived` of a block whose (TP, FP) above it are (tp0, fp0): the thinning's cells
    reached above it, and the curves' point before it (where the areas' segments start), are
    read off those counts (the same float operations as on the last point of the block above,
    so the same cells and points)."""
    scores, where, tp, fp, dp, dn = rows
    with np.errstate(divide="ignore", invalid="ignore"):
        if in_float:
            twice_auc = 2 * int(_dot(dn, tp)) - int(_dot(dn, dp))
        else:
            dn_i = dn.astype(np.int64)
            twice_auc = int(np.dot(dn_i, 2 * tp.astype(np.int64) - dp.astype(np.int64)))
        tpr, fpr = tp / p, fp / n
        count = tp + fp
        precision = tp / count  # every distinct score has a count
        ap = _dot(dp, precision)
        # Thinning: the first point in each new cell of rank or of arc, and the point before
        # each. Both rise along the curve, so each cell's first point is found by a binary
        # search for its lower edge (cell ≥ c: count·cells ≥ c·(P + N), arc ≥ c).
        rank_lo = int(tp0 + fp0) * cells // (p + n)
        rank_hi = int(count[-1]) * cells // (p + n)
        edges = -(-np.arange(rank_lo + 1, rank_hi + 1) * (p + n) // cells)
        starts = np.searchsorted(count, edges, side="left")
        if p and n:  # otherwise the arc is undefined: rank alone
            arc_lo = math.floor((tp0 / p + fp0 / n) * (cells / 2))
            arc = tpr + fpr
            arc *= cells / 2
            edges = np.arange(arc_lo + 1, math.floor(arc[-1]) + 1)
            starts = np.concatenate([starts, np.searchsorted(arc, edges, side="left")])
        keep = np.unique(np.concatenate([starts - 1, starts]))
        corner = bool(len(keep) and keep[0] < 0)
        roc_sums = pr_sums = None
        if roc is not None and pr is not None:
            first = tp0 == 0 and fp0 == 0
            t0, f0 = np.float64(tp0), np.float64(fp0)
            roc_at = roc.point(0.0, 0.0) if first else roc.point(f0 / n, t0 / p)  # (0, 0): start
            roc_sums = roc.block(fpr, tpr, dn, 1 / n if n else math.nan, roc_at)
            pr_at = None if first else pr.point(t0 / p, t0 / (t0 + f0))
            pr_sums = pr.block(tpr, precision, dp, 1 / p if p else math.nan, pr_at)
    return _Derived(
        _Picked(scores, where),
        tp,
        dp,
        dn,
        tpr,
        fpr,
        precision,
        twice_auc,
        ap,
        corner,
        keep[1:] if corner else keep,
        roc_sums,
        pr_sums,
    )


def _derive_made(make: Callable[[], Block], tp0: float, fp0: float, *args: Any) -> _Derived:
    return _derive(make(), tp0, fp0, *args)


def exact_diagnostics(
    s: SortedScores,
    estimate: Curves | None = None,
    *,
    block: int = EXACT_BLOCK,
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
    for bit; at most threads + 1 blocks are held at once."""
    p, n = s.n_positives, s.n_negatives
    threads = s.threads if threads is None else threads
    roc = pr = None
    if estimate is not None:
        roc = _AreaPass(estimate.fpr, estimate.tpr, start=(0.0, 0.0))
        pr = _AreaPass(estimate.recall[1:], estimate.precision[1:])
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
    pool: Executor = ThreadPoolExecutor(threads, "fedeval-exact") if several else Inline()
    if several and roc is not None and pr is not None:  # special segments in the pool too
        roc.executor = pr.executor = pool
    try:
        tasks = (
            (_derive_made, make, tp0, fp0, p, n, cells, in_float, roc, pr)
            for make, tp0, fp0 in row_tasks(s, block, pool if several else None)
        )
        for d in ahead(pool, tasks, threads + 1):
            twice_auc += d.twice_auc
            ap += d.ap
            if roc is not None and pr is not None and d.roc is not None and d.pr is not None:
                roc.take(d.fpr, d.tpr, *d.roc)
                pr.take(d.tpr, d.precision, *d.pr)
            if every is not None:
                every.append((d.picked.all(), d.tpr, d.fpr, d.precision))
                if last[0] + len(d.tp) + 1 > 4 * cells + 2:
                    every = None
            if d.corner and last[0] > last_kept:  # the corner before this block's first point
                kept.append(tuple(np.array([v]) for v in last[1:5]))
            if len(d.keep):
                kept.append(
                    (d.picked.at(d.keep), d.tpr[d.keep], d.fpr[d.keep], d.precision[d.keep])
                )
                last_kept = last[0] + 1 + int(d.keep[-1])
            last = (
                last[0] + len(d.tp),
                float(d.picked.at(np.array([-1]))[0]),
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
