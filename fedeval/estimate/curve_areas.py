"""The area between two curves given as polylines (an estimate against the exact curves of a
simulation), computed exactly on their merged breakpoints in blocks of bounded memory; and the
exact, unthinned ROC and PR curves of sorted scores."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fedeval.estimate.exact import SortedScores
from fedeval.estimate.roc_pr import Curves

Knots = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A curve as `step_limits` gives it: (distinct x, value arriving at, value leaving each)."""


def exact_curves(s: SortedScores) -> Curves:
    """The empirical curves at every distinct score (scikit-learn's roc_curve and
    precision_recall_curve without dropping points), thresholds in the scores' own units.

    Cumulative sums over the distinct scores from the top (`SortedScores.distinct`, linear in
    n): no further sort or search. Precision is TP/(TP + FP) from the integer counts, as
    scikit-learn computes it. Every point is kept (four float64 arrays over the distinct
    scores); `exact_diagnostics` gives the same AUC, AP and areas in bounded memory."""
    d = s.distinct
    p, n = s.n_positives, s.n_negatives
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


def step_limits(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct x (ascending) with the curve's value arriving at (left) and leaving (right) each:
    they differ where the curve jumps vertically. Points must be in curve order.

    A curve's x is usually already non-decreasing (ROC and PR curves are): then no sort, one
    linear pass."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) > 1 and not np.all(x[1:] >= x[:-1]):
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    new = np.empty(len(x), bool)
    new[:1] = True
    np.not_equal(x[1:], x[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(x) - 1)
    return x[first], y[first], y[last]


def _at(
    ux: np.ndarray, left: np.ndarray, right: np.ndarray, g: np.ndarray, side: str
) -> np.ndarray:
    """The curve's value at g, approached from the right of g ('right') or arriving at g from
    its left ('left'); at a knot that is the knot's right or left limit."""
    le = np.searchsorted(ux, g, side="right")
    on = (le > 0) & (ux[np.clip(le - 1, 0, len(ux) - 1)] == g)
    leaving, arriving = on_grid(ux, left, right, np.asarray(g, dtype=np.float64), le, on)
    return leaving if side == "right" else arriving


def on_grid(
    ux: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    g: np.ndarray,
    le: np.ndarray,
    on: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
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

    def line(i: np.ndarray, j: np.ndarray, x: np.ndarray) -> np.ndarray:
        x0, x1, y0, y1 = ux[i], ux[j], right[i], left[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(x1 > x0, (x - x0) / (x1 - x0), 0.0)
        y: np.ndarray = y0 + t * (y1 - y0)
        return y

    x, m = g[off], le[off]
    i = np.minimum(np.maximum(m - 1, 0), n - 1)  # the segment from the last knot below
    leaving[off] = arriving[off] = line(i, np.minimum(i + 1, n - 1), x)
    ends = (m == 0) | (m == n)  # arriving from the left beyond either end: the first or last knot
    if ends.any():
        j = np.minimum(m[ends], n - 1)
        arriving[off[ends]] = line(np.maximum(j - 1, 0), j, x[ends])
    return leaving, arriving


def _merged_grid(ux1: np.ndarray, ux2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _area_between(x1: ArrayLike, y1: ArrayLike, x2: ArrayLike, y2: ArrayLike) -> float:
    """∫|y1(x) − y2(x)| dx, exactly, for two curves whose x runs monotone from 0 to 1 and that
    are linear between their points (vertical jumps allowed: only the limits at a jump matter).

    Linear in the points once each curve's x is in order (a curve's is), in blocks of grid
    intervals."""
    c1, c2 = step_limits(x1, y1), step_limits(x2, y2)
    grid, on1, on2 = _merged_grid(c1[0], c2[0])
    total = 0.0
    below1 = below2 = 0  # knots of each curve before the block
    for s in range(0, len(grid) - 1, AREA_BLOCK):
        e = min(s + AREA_BLOCK + 1, len(grid))  # the block's points: its intervals' both ends
        le1, le2 = below1 + np.cumsum(on1[s:e]), below2 + np.cumsum(on2[s:e])
        below1, below2 = int(le1[-2]), int(le2[-2])  # the last point starts the next block
        total += _area_on_grid(c1, c2, grid[s:e], le1, on1[s:e], le2, on2[s:e])
    return total


def _area_on_grid(
    c1: Knots,
    c2: Knots,
    g: np.ndarray,
    le1: np.ndarray,
    on1: np.ndarray,
    le2: np.ndarray,
    on2: np.ndarray,
) -> float:
    """∫|y1 − y2| over the grid points g (ascending, every knot of either curve between its
    ends among them), given each curve's limits, its knots ≤ each point and which are knots."""
    (ux1, left1, right1), (ux2, left2, right2) = c1, c2
    return area_of(
        g,
        *on_grid(ux1, left1, right1, g, le1, on1),
        *on_grid(ux2, left2, right2, g, le2, on2),
    )


def area_of(
    g: np.ndarray,
    leave1: np.ndarray,
    arrive1: np.ndarray,
    leave2: np.ndarray,
    arrive2: np.ndarray,
) -> float:
    """∫|y1 − y2| over the grid g from each curve's value leaving and arriving at each point."""
    # On each grid interval both curves are linear: difference d0 at the start, d1 at the end.
    d0 = leave1[:-1] - leave2[:-1]
    d1 = arrive1[1:] - arrive2[1:]
    return float(np.sum(area_terms(g[1:] - g[:-1], d0, d1)))


def roc_area_error(estimate: Curves, exact: Curves) -> float:
    """Area between the estimated and the exact ROC curve (TPR as a function of FPR)."""
    return _area_between(estimate.fpr, estimate.tpr, exact.fpr, exact.tpr)


def pr_area_error(estimate: Curves, exact: Curves) -> float:
    """Area between the estimated and the exact PR curve (precision as a function of recall)."""
    return _area_between(
        estimate.recall[1:], estimate.precision[1:], exact.recall[1:], exact.precision[1:]
    )


def area_terms(width: ArrayLike, d0: np.ndarray, d1: np.ndarray) -> np.ndarray:
    """∫|d| over each interval where d is linear from d0 to d1 (two triangles where it changes
    sign), times the interval's width: the terms `area_of` sums."""
    a0, a1 = np.abs(d0), np.abs(d1)
    area = (a0 + a1) / 2
    crossing = d0 * d1 < 0
    area[crossing] = (d0[crossing] ** 2 + d1[crossing] ** 2) / (2 * (a0[crossing] + a1[crossing]))
    terms: np.ndarray = area * width
    return terms
