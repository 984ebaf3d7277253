"""Exact curves and the diagnostics shown beside each estimate in a simulation: the empirical ROC
and PR curves at every distinct score, thinned for display, with AUC, AP and the area between an
estimate and the exact curves (moved from `fedeval.estimate.curves`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedeval.estimate.curves import Curves
from fedeval.estimate.exact import SortedScores


def exact_curves(s: SortedScores) -> Curves:
    """The empirical curves at every distinct score (scikit-learn's roc_curve and
    precision_recall_curve without dropping points), thresholds in the scores' own units.

    Cumulative sums over the distinct scores from the top (`SortedScores.distinct`, linear in
    n): no further sort or search. Precision is TP/(TP + FP) from the integer counts, as
    scikit-learn computes it. Every point is kept (four float64 arrays over the distinct
    scores); `exact_diagnostics` gives the same AUC, AP and areas in bounded memory."""
    d = s.distinct
    p, n = len(s.positives), len(s.negatives)
    size = len(d.values) + 1
    t, tpr, fpr, precision = (np.empty(size) for _ in range(4))
    t[0], tpr[0], fpr[0], precision[0] = np.inf, 0.0, 0.0, 1.0
    t[1:] = d.values[::-1]
    tp = np.cumsum(d.positives[::-1], dtype=np.int64)
    fp = np.cumsum(d.negatives[::-1], dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(tp, p, out=tpr[1:])
        np.divide(fp, n, out=fpr[1:])
        np.divide(tp, np.add(tp, fp, out=fp), out=precision[1:])  # every score has a count
    return Curves(t, tpr, fpr, precision)


def _limits(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct x (ascending) with the curve's value arriving at (left) and leaving (right) each:
    they differ where the curve jumps vertically. Points must be in curve order.

    A curve's x is usually already non-decreasing (ROC and PR curves are): then no sort, one
    linear pass."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) > 1 and not np.all(x[1:] >= x[:-1]):
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    first = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    last = np.r_[first[1:] - 1, len(x) - 1]
    return x[first], y[first], y[last]


def _at(ux, left, right, g: np.ndarray, side: str) -> np.ndarray:
    """The curve's value at g, approached from the right of g ('right') or arriving at g from
    its left ('left'); at a knot that is the knot's right or left limit."""
    le = np.searchsorted(ux, g, side="right")
    on = (le > 0) & (ux[np.clip(le - 1, 0, len(ux) - 1)] == g)
    leaving, arriving = _on_grid(ux, left, right, np.asarray(g, dtype=np.float64), le, on)
    return leaving if side == "right" else arriving


def _on_grid(ux, left, right, g, le, on) -> tuple[np.ndarray, np.ndarray]:
    """(value leaving, value arriving at) each g, given the number of knots ≤ g (`le`) and
    whether g is a knot (`on`): at a knot its right and left limits, read directly; elsewhere
    the straight line between the knots either side (the first or last segment's value beyond
    the ends). Only the points off the knots are interpolated: for a large curve evaluated on a
    grid made of its own knots, that is a few."""
    n = len(ux)
    leaving = np.empty(len(g))
    arriving = np.empty(len(g))
    k = le[on] - 1
    leaving[on], arriving[on] = right[k], left[k]
    off = np.flatnonzero(~on)
    if not len(off):
        return leaving, arriving

    def line(i, j, x):
        x0, x1, y0, y1 = ux[i], ux[j], right[i], left[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(x1 > x0, (x - x0) / (x1 - x0), 0.0)
        return y0 + t * (y1 - y0)

    x, m = g[off], le[off]
    i = np.minimum(np.maximum(m - 1, 0), n - 1)  # the segment from the last knot below
    leaving[off] = arriving[off] = line(i, np.minimum(i + 1, n - 1), x)
    ends = (m == 0) | (m == n)  # arriving from the left beyond either end: the first or last knot
    if ends.any():
        j = np.minimum(m[ends], n - 1)
        arriving[off[ends]] = line(np.maximum(j - 1, 0), j, x[ends])
    return leaving, arriving


def _merged_grid(ux1: np.ndarray, ux2: np.ndarray):
    """The union of two ascending distinct arrays, and for each whether each grid point is one
    of its knots.

    The smaller array's knots are found in the larger by binary search and inserted (an
    estimate's few hundred or thousand knots into an exact curve's millions): linear in the
    larger, no sort."""
    swap = len(ux1) > len(ux2)
    small, large = (ux2, ux1) if swap else (ux1, ux2)
    pos = np.searchsorted(large, small, side="left")
    dup = (pos < len(large)) & (large[np.minimum(pos, len(large) - 1)] == small)
    grid = np.insert(large, pos[~dup], small[~dup])
    on_large = np.ones(len(grid), bool)
    on_large[pos[~dup] + np.arange(int(np.sum(~dup)))] = False
    on_small = np.zeros(len(grid), bool)
    on_small[np.searchsorted(grid, small, side="left")] = True
    return (grid, on_large, on_small) if swap else (grid, on_small, on_large)


AREA_BLOCK = 1 << 16
"""Grid intervals summed at a time by `_area_between`: temporaries stay in cache and memory
stays bounded however many points the exact curve has."""


def _area_between(x1, y1, x2, y2) -> float:
    """∫|y1(x) − y2(x)| dx, exactly, for two curves whose x runs monotone from 0 to 1 and that
    are linear between their points (vertical jumps allowed: only the limits at a jump matter).

    Linear in the points once each curve's x is in order (a curve's is), in blocks of grid
    intervals."""
    c1, c2 = _limits(x1, y1), _limits(x2, y2)
    grid, on1, on2 = _merged_grid(c1[0], c2[0])
    total = 0.0
    below1 = below2 = 0  # knots of each curve before the block
    for s in range(0, len(grid) - 1, AREA_BLOCK):
        e = min(s + AREA_BLOCK + 1, len(grid))  # the block's points: its intervals' both ends
        le1, le2 = below1 + np.cumsum(on1[s:e]), below2 + np.cumsum(on2[s:e])
        below1, below2 = int(le1[-2]), int(le2[-2])  # the last point starts the next block
        total += _area_on_grid(c1, c2, grid[s:e], le1, on1[s:e], le2, on2[s:e])
    return total


def _area_on_grid(c1, c2, g, le1, on1, le2, on2) -> float:
    """∫|y1 − y2| over the grid points g (ascending, every knot of either curve between its
    ends among them), given each curve's limits, its knots ≤ each point and which are knots."""
    (ux1, left1, right1), (ux2, left2, right2) = c1, c2
    return _area_of(
        g,
        *_on_grid(ux1, left1, right1, g, le1, on1),
        *_on_grid(ux2, left2, right2, g, le2, on2),
    )


def _area_of(g, leave1, arrive1, leave2, arrive2) -> float:
    """∫|y1 − y2| over the grid g from each curve's value leaving and arriving at each point."""
    # On each grid interval both curves are linear: difference d0 at the start, d1 at the end.
    d0 = leave1[:-1] - leave2[:-1]
    d1 = arrive1[1:] - arrive2[1:]
    width = g[1:] - g[:-1]
    a0, a1 = np.abs(d0), np.abs(d1)
    area = (a0 + a1) / 2
    crossing = d0 * d1 < 0  # the difference changes sign inside: two triangles
    area[crossing] = (d0[crossing] ** 2 + d1[crossing] ** 2) / (2 * (a0[crossing] + a1[crossing]))
    return float(np.sum(area * width))


def roc_area_error(estimate: Curves, exact: Curves) -> float:
    """Area between the estimated and the exact ROC curve (TPR as a function of FPR)."""
    return _area_between(estimate.fpr, estimate.tpr, exact.fpr, exact.tpr)


def pr_area_error(estimate: Curves, exact: Curves) -> float:
    """Area between the estimated and the exact PR curve (precision as a function of recall)."""
    return _area_between(
        estimate.recall[1:], estimate.precision[1:], exact.recall[1:], exact.precision[1:]
    )


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


def _on_own_knots(ux, left, right, g, le, on) -> tuple[np.ndarray, np.ndarray]:
    """`_on_grid` for a grid made mostly of the curve's own knots: each point's knot read
    directly (one gather), and only the few other points interpolated."""
    k = np.maximum(le - 1, 0)
    leaving, arriving = right[k], left[k]
    off = np.flatnonzero(~on)
    if len(off):
        leaving[off], arriving[off] = _on_grid(ux, left, right, g[off], le[off], on[off])
    return leaving, arriving


def _off_own_knots(c, doubled, g, le, on) -> tuple[np.ndarray, np.ndarray]:
    """`_on_grid` for a grid made mostly of points between the curve's knots: one `np.interp`
    through the knots each given twice, (x, left) then (x, right), so a point inside a segment
    gets the line from the right limit to the next left limit (the same line, up to the last
    bit of rounding); the curve's own knots and the points beyond its ends as `_on_grid`."""
    leaving = np.interp(g, *doubled)
    arriving = leaving.copy()
    special = np.flatnonzero(on | (le == 0) | (le == len(c[0])))
    if len(special):
        ux, left, right = c
        leaving[special], arriving[special] = _on_grid(
            ux, left, right, g[special], le[special], on[special]
        )
    return leaving, arriving


class _AreaStream:
    """∫|exact − estimate| dx with the exact curve fed a block of points at a time, in curve
    order (x non-decreasing): the same sum as `_area_between` over the whole curve, with
    memory the size of a block.

    The last run of equal x seen may go on in the next block (its right limit can still move),
    so it is carried; each block's final knots are integrated together with the knot before
    them, and the estimate's knots between."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.estimate = ux, left, right = _limits(x, y)
        self.doubled = np.repeat(ux, 2), np.column_stack([left, right]).ravel()
        self.carry: tuple[float, float, float] | None = None
        self.prev: tuple[float, float, float] | None = None  # the last knot integrated up to
        self.pending: list[tuple[float, float, float]] = []  # final knots not yet integrated
        self.total = 0.0

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        """The next points of the exact curve (x non-decreasing, continuing the last block)."""
        if not len(x):
            return
        head = ([] if self.prev is None else [self.prev]) + self.pending
        self.pending = []
        carry = self.carry
        goes_on = carry is not None and x[0] == carry[0]
        if carry is not None and not goes_on:
            head.append(carry)  # the carried run ended: a final knot
        ux, left, right = _knots_after(head, x, y)
        if carry is not None and goes_on:  # the run goes on: its left limit is the carry's
            left[len(head)] = carry[1]
        self.carry = (float(ux[-1]), float(left[-1]), float(right[-1]))
        self._integrate(ux[:-1], left[:-1], right[:-1], last=False)

    def finish(self) -> float:
        head = ([] if self.prev is None else [self.prev]) + self.pending
        if self.carry is not None:
            head.append(self.carry)
        self.pending, self.carry = [], None
        if head:
            self._integrate(*(np.array(v) for v in zip(*head, strict=True)), last=True)
        return self.total

    def _integrate(self, ux, left, right, *, last: bool) -> None:
        """The area over these knots: the last integrated one (if any) first, then final ones."""
        first = self.prev is None
        if first and len(ux) < 2 and not last:
            # The estimate is extrapolated before the exact curve's first segment: wait for it.
            self.pending = [
                (float(a), float(b), float(c)) for a, b, c in zip(ux, left, right, strict=True)
            ]
            return
        if not len(ux) or (not first and len(ux) < 2):
            return  # no new knot
        ex = self.estimate
        lo = 0 if first else int(np.searchsorted(ex[0], ux[0], side="left"))
        hi = len(ex[0]) if last else int(np.searchsorted(ex[0], ux[-1], side="right"))
        sub = ex[0][lo:hi]
        if len(sub) > len(ux):  # more estimate knots than exact ones here (a small block)
            grid, on1, on2 = _merged_grid(ux, sub)
            exact = _on_own_knots(ux, left, right, grid, np.cumsum(on1), on1)
            est_at = np.flatnonzero(on2)
        else:
            # The estimate's few knots inserted into the exact ones: the exact curve's values
            # at its own knots are inserted along (no search), the few others interpolated.
            at = np.searchsorted(ux, sub, side="left")
            dup = (at < len(ux)) & (ux[np.minimum(at, len(ux) - 1)] == sub)
            at = at[~dup]
            grid = np.insert(ux, at, sub[~dup])
            exact = np.insert(right, at, 0.0), np.insert(left, at, 0.0)
            if len(at):
                ins = at + np.arange(len(at))  # their places in the grid
                exact[0][ins], exact[1][ins] = _on_grid(
                    ux, left, right, grid[ins], at, np.zeros(len(at), bool)
                )
            est_at = np.searchsorted(grid, sub, side="left")
            on2 = np.zeros(len(grid), bool)
            on2[est_at] = True
        # The estimate's knots at or below each grid point: a step at each of its few knots.
        le2 = np.repeat(
            np.arange(lo, lo + len(est_at) + 1), np.diff(est_at, prepend=0, append=len(grid))
        )
        self.total += _area_of(grid, *exact, *_off_own_knots(ex, self.doubled, grid, le2, on2))
        self.prev = (float(ux[-1]), float(left[-1]), float(right[-1]))


def _knots_after(head: list, x: np.ndarray, y: np.ndarray):
    """`_limits(x, y)` for x already non-decreasing, after the knots `head` ((x, left, right)
    each): one allocation per array, no sort and no copy to prepend."""
    new = np.empty(len(x), bool)
    new[0] = True
    np.not_equal(x[1:], x[:-1], out=new[1:])
    first = np.flatnonzero(new)
    h, m = len(head), len(first)
    ux, left, right = np.empty(h + m), np.empty(h + m), np.empty(h + m)
    for i, (a, b, c) in enumerate(head):
        ux[i], left[i], right[i] = a, b, c
    np.take(x, first, out=ux[h:])
    np.take(y, first, out=left[h:])
    np.take(y, first[1:] - 1, out=right[h : h + m - 1])
    right[-1] = y[-1]
    return ux, left, right


def exact_diagnostics(
    s: SortedScores,
    estimate: Curves | None = None,
    *,
    block: int = EXACT_BLOCK,
    cells: int = THIN_CELLS,
) -> tuple[ExactCurves, float | None, float | None]:
    """(exact curves thinned for display, ROC area error, PR area error) in one pass over the
    distinct scores from the top, `block` at a time: AUC, AP and the areas between `estimate`
    and the exact curves are summed over every point on the way (the same values as
    `exact_curves` with `roc_area_error`/`pr_area_error`, up to the order of float sums), but
    only a few thousand points of the curves are kept (all of them when there are no more
    than 4·`cells` + 2). Memory: a block, not the curves' four
    float64 arrays over every distinct score.

    AUC is the trapezoid in integer counts, Σ ΔFP·(TP + TP₋), over 2PN (= the Mann-Whitney
    form); AP is Σ ΔTPR·precision, as scikit-learn sums it."""
    p, n = len(s.positives), len(s.negatives)
    roc = pr = None
    if estimate is not None:
        roc = _AreaStream(estimate.fpr, estimate.tpr)
        pr = _AreaStream(estimate.recall[1:], estimate.precision[1:])
        roc.add(np.zeros(1), np.zeros(1))
    kept: list[tuple[np.ndarray, ...]] = [
        (np.array([np.inf]), np.zeros(1), np.zeros(1), np.ones(1))
    ]
    every: list[tuple[np.ndarray, ...]] | None = list(kept)  # while there are few points
    # The last point seen, (0, 0) at +inf first: (index, t, tpr, fpr, precision, rank cell,
    # arc cell). The rank is the examples at or above the threshold, over all of them.
    last = (0, np.inf, 0.0, 0.0, 1.0, 0, 0)
    last_kept = 0
    tp0 = fp0 = 0
    tpr0 = 0.0
    twice_auc = 0
    ap = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for d in s.distinct_blocks(block, descending=True):
            t = d.values[::-1]
            dp = d.positives[::-1].astype(np.int64)
            dn = d.negatives[::-1].astype(np.int64)
            tp = np.cumsum(dp)
            tp += tp0
            fp = np.cumsum(dn)
            fp += fp0
            twice_auc += int(np.dot(dn, 2 * tp - dp))
            tpr, fpr = tp / p, fp / n
            precision = tp / (tp + fp)  # every distinct score has a count
            ap += float(np.sum(np.diff(tpr, prepend=tpr0) * precision))
            if roc is not None and pr is not None:
                roc.add(fpr, tpr)
                pr.add(tpr, precision)
            if every is not None:
                every.append((t, tpr, fpr, precision))
                if last[0] + len(t) + 1 > 4 * cells + 2:
                    every = None
            # Thinning: the first point in each new cell of rank or of arc, and the point
            # before each. Both rise along the curve, so each cell's first point is found by a
            # binary search for its lower edge (cell ≥ c: count·cells ≥ c·(P + N), arc ≥ c).
            count = tp + fp
            rank_hi = int(count[-1]) * cells // (p + n)
            edges = -(-np.arange(last[5] + 1, rank_hi + 1) * (p + n) // cells)
            starts = np.searchsorted(count, edges, side="left")
            arc_hi = last[6]
            if p and n:  # otherwise the arc is undefined: rank alone
                arc = tpr + fpr
                arc *= cells / 2
                arc_hi = math.floor(arc[-1])
                edges = np.arange(last[6] + 1, arc_hi + 1)
                starts = np.r_[starts, np.searchsorted(arc, edges, side="left")]
            keep = np.unique(np.r_[starts - 1, starts])
            if len(keep) and keep[0] < 0:  # the corner before this block's first point
                keep = keep[1:]
                if last[0] > last_kept:
                    kept.append(tuple(np.array([v]) for v in last[1:5]))
            if len(keep):
                kept.append((t[keep], tpr[keep], fpr[keep], precision[keep]))
                last_kept = last[0] + 1 + int(keep[-1])
            last = (
                last[0] + len(t),
                float(t[-1]),
                float(tpr[-1]),
                float(fpr[-1]),
                float(precision[-1]),
                rank_hi,
                arc_hi,
            )
            tp0, fp0, tpr0 = int(tp[-1]), int(fp[-1]), float(tpr[-1])
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
        ap if p else math.nan,
        auc,
    )
    if roc is None or pr is None:
        return curves, None, None
    return curves, roc.finish(), pr.finish()
