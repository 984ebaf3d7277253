"""The area between an estimate's curve and the exact curve, summed a block of the exact
curve's points at a time as `fedeval.estimate.diagnostics.exact_diagnostics` makes them (moved
from there): each block's share in whole-array operations, the few segments that hold one of
the estimate's knots integrated again on their own grid."""

from __future__ import annotations

import math
from concurrent.futures import Executor, Future

import numpy as np

from fedeval.estimate.curve_areas import Knots, area_of, area_terms, on_grid, step_limits


def dot(a: np.ndarray, b: np.ndarray) -> float:
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
"""`AreaPass.block`'s sums of a block: (its area, its special segments, its last point)."""

SLICED_SEGMENTS = 32
"""`AreaPass._lines` reads the estimate's lines a segment at a time, on slices of the block,
up to this many segments in a block (the same float operations on the same values as repeating
each line over its run; three passes instead of six, at a few microseconds a segment)."""

SPECIAL_BATCH = 1 << 14
"""Special segments (`AreaPass`) gathered before they are integrated together."""


class AreaPass:
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
        float operations on the same values, so the same difference: `_lines` on one point,
        in float64 scalars; a tenth of the cost of its array calls on one element)."""
        ux, _, right = self.estimate
        if len(ux) < 2:
            line = right[0]
        else:
            j = min(max(int(np.searchsorted(ux, x, side="right")) - 1, 0), len(ux) - 2)
            line = (np.float64(x) - ux[j]) * self.slope[j] + right[j]
        return float(x), float(y), float(y - line)

    def block(
        self,
        x: np.ndarray,
        y: np.ndarray,
        steps: np.ndarray,
        unit: float,
        prev: tuple[float, float, float] | None,
        work: np.ndarray | None = None,
    ) -> BlockSums:
        """`add`'s sums over one block, from the point before it (`prev`; None: the curve's
        first point opens the block): (its area, its special segments, its last point). Reads
        only the estimate: safe in any thread, blocks in any order. `work`: float64 room for
        2·(len(x) + 1) temporaries (a thread's buffer reused block after block), else fresh."""
        w = steps
        m = len(x)
        ux = self.estimate[0]
        xp = float(x[0]) if prev is None else prev[0]
        # The estimate's knots from the point before the block to its last point, and where
        # each falls among the block's points (also where `_lines` cuts the block).
        lo = int(np.searchsorted(ux, xp, side="left"))
        hi = int(np.searchsorted(ux, x[-1], side="right"))
        knots = ux[lo:hi]
        at_knots = np.searchsorted(x, knots, side="left")
        if work is None:
            work = np.empty(2 * (m + 1))
        d = work[: m + 1]  # d[k + 1]: at x[k]; d[0]: at the previous point
        np.subtract(y, self._lines(x, out=d[1:], knots=(lo, hi, at_knots)), out=d[1:])
        if prev is None:
            w[0] = 0.0  # no segment before the first point
            xp, yp, d[0] = float(x[0]), float(y[0]), d[1]
        else:
            xp, yp, d[0] = prev
        last = (float(x[-1]), float(y[-1]), float(d[-1]))
        a = np.abs(d, out=work[m + 1 : 2 * (m + 1)])
        total = 0.5 * (dot(w, a[:-1]) + dot(w, a[1:]))
        # Two triangles where d changes sign: less than the trapezoid. (By sign bits: d is
        # never −0, and where one end is 0 the triangles' correction is 0.) Usually one sign
        # all along a block: then no search.
        negative = np.signbit(d)
        if negative.any() and not negative.all():
            cross = np.flatnonzero(negative[:-1] != negative[1:])
            if len(cross):
                a0, a1 = a[cross], a[cross + 1]
                total -= dot(w[cross], a0 * a1 / (a0 + a1))
        total *= unit
        # The segments not straight on the estimate's side: holding one of its knots (either
        # end included: its limits may differ there), or starting before its first knot or
        # ending after its last.
        # After each knot: where it falls, or past the points equal to it (searched again).
        after = at_knots.copy()
        on = np.flatnonzero(at_knots < m)
        on = on[x[at_knots[on]] == knots[on]]
        if len(on):
            after[on] = np.searchsorted(x, knots[on], side="right")
        parts = [at_knots, after[after < m]]
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

    def _lines(
        self,
        x: np.ndarray,
        out: np.ndarray | None = None,
        knots: tuple[int, int, np.ndarray] | None = None,
    ) -> np.ndarray:
        """The estimate at x (ascending) on the line of the segment each lies in (the first or
        last segment's line beyond the knots): right for all but the points on a knot or beyond
        the ends, which `add` integrates again. Each segment's line is repeated over its run
        of points: a few passes, no search per point. Written into `out` when given.

        `knots` (lo, hi, at): the estimate's knots `ux[lo:hi]` hold those after x[0] up to
        x[-1], `at` where each falls in x (`searchsorted(x, ux[lo:hi], side="left")`): the
        cuts between segments are read off it instead of searched again."""
        ux, _, right = self.estimate
        f: np.ndarray = np.empty(len(x)) if out is None else out
        if len(ux) < 2:
            f[:] = right[0]
            return f
        j0 = min(max(int(np.searchsorted(ux, x[0], side="right")) - 1, 0), len(ux) - 2)
        if knots is None:
            j1 = min(max(int(np.searchsorted(ux, x[-1], side="right")) - 1, j0), len(ux) - 2)
            cut = np.searchsorted(x, ux[j0 + 1 : j1 + 1], side="left")
        else:
            lo, hi, at_knots = knots  # hi: the knots ≤ x[-1]
            j1 = min(max(hi - 1, j0), len(ux) - 2)
            cut = at_knots[j0 + 1 - lo : j1 + 1 - lo] if j1 > j0 else at_knots[:0]
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
