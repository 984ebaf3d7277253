"""ROC and PR curves from the per-class score histograms.

Two estimators (`CURVE_METHODS`), on the same consistent, possibly noisy leaves:

- **leaves** (the default): TP(t) and FP(t) at every leaf edge from the reverse cumulative sums of
  the leaves, made monotone after summing (`leaf_tails`); ROC = (FP/N, TP/P), PR = (TP/P,
  TP/(TP + FP)), straight inside a leaf (examples mixed uniformly). ROC AUC is the trapezoid over
  the edges (the half-credit-within-leaf AUC); AP integrates precision exactly along each leaf
  (`ap_rule="integral"`) or steps at its lower edge as scikit-learn does for ties ("step").
  The PR curve starts at recall 0 with the precision of the top non-empty leaf.
- **pchip** (Xu & Cormode, "Federated Computation of ROC and PR Curves", arXiv 2510.04979,
  section 3): each class's ECDF is rebuilt from Q of its quantiles by monotone PCHIP;
  TPR = 1 − F₊, FPR = 1 − F₋ and precision = P·TPR / (P·TPR + N·FPR). Estimating the two
  classes separately keeps precision ≤ 1 (the paper's "separate" strategy).

Why 'leaves' is the default (benchmarks/rare.py: n = 1M, Q = 100, h = 9, |error| median over 10
draws; AP / ROC AUC):

    data           model        leaves            leaves, step AP   pchip
    smooth         federated    4.6e-06 / 1.8e-06 3.7e-04 / 1.8e-06 1.8e-03 / 2.4e-04
    smooth         distdp ε=1   4.4e-05 / 1.3e-05 4.0e-04 / 1.3e-05 2.0e-03 / 2.4e-04
    smooth         localdp ε=5  2.5e-03 / 7.6e-04 2.5e-03 / 7.6e-04 2.5e-03 / 9.2e-04
    1.5% positives federated    1.2e-05 / 8.7e-07 1.0e-03 / 8.7e-07 8.7e-02 / 2.1e-03
    1.5% positives distdp ε=1   1.4e-03 / 2.2e-04 2.1e-03 / 2.2e-04 1.4e-01 / 2.4e-03
    1.5% positives localdp ε=5  5.4e-02 / 1.9e-03 5.0e-02 / 1.9e-03 1.4e-01 / 3.1e-03

PCHIP through Q quantiles loses the top tail where rare positives sit; the leaves keep it. Under
localdp ε = 5 at this fixed h = 9 the leaves are still biased low on rare positives: the FP count
at the top (truly ≈ 0) carries noise of several hundred, and the monotone fit keeps part of it,
lowering precision (at the auto height, 2.2e-2: benchmarks/hard.py). Holding the fit's ends at 0
and the raw total (`monotone_cumulative`) took this from 1.2e-01, and rare distdp from 3.4e-03.
Thresholds here are on the unit scale [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.special import digamma

from fedeval.estimate.exact import SortedScores
from fedeval.hierarchy import monotone_cumulative, quantiles

EVAL_GRID = 4097
"""Uniform thresholds added to the quantile knots when the areas are integrated."""

CURVE_METHODS = ("leaves", "pchip")
"""'leaves': the curves at every leaf edge from the cumulated leaf counts; 'pchip': the papers'
Q-quantile PCHIP estimator."""

DEFAULT_CURVE_METHOD = "leaves"
"""The more accurate of the two, measured (benchmarks/rare.py; figures in the module docstring)."""

AP_RULES = ("integral", "step")
"""How the leaves estimator takes AP inside a leaf: 'integral' integrates precision exactly along
the leaf's straight (FP, TP) segment (examples mixed uniformly); 'step' takes the whole leaf at
once, as scikit-learn does for tied scores."""


def curve_height(n_quantiles: int) -> int:
    """The papers' default height for Q quantiles: ⌈log₂ Q⌉ + 2 (branching 2)."""
    return max(1, math.ceil(math.log2(max(n_quantiles, 2)))) + 2


@dataclass(frozen=True, eq=False)
class Curves:
    """ROC and PR curves sampled at thresholds, highest first, from (0, 0) to (1, 1).

    `thresholds[0]` is +inf and `thresholds[-1]` is −inf (every example negative / positive).
    `precision` is 1 where nothing is predicted positive (scikit-learn's convention).
    """

    thresholds: np.ndarray
    tpr: np.ndarray
    fpr: np.ndarray
    precision: np.ndarray
    ap: float | None = None
    """AP computed by the estimator itself (the leaves' exact within-leaf integral); None: the
    step sum over the points."""

    @property
    def recall(self) -> np.ndarray:
        return self.tpr

    @property
    def roc_auc(self) -> float:
        """Trapezoidal area under the ROC curve."""
        return float(np.trapezoid(self.tpr, self.fpr))

    @property
    def average_precision(self) -> float:
        """Σ (Rₖ − Rₖ₋₁)·Pₖ over thresholds from high to low, as scikit-learn defines it (or the
        estimator's own `ap`)."""
        if self.ap is not None:
            return self.ap
        return float(np.sum(np.diff(self.tpr) * self.precision[1:]))


def class_ecdf(leaves: np.ndarray, n_quantiles: int) -> Callable[[np.ndarray], np.ndarray]:
    """F(t) of one class from its Q-quantiles by monotone PCHIP (0 below the first, 1 above the
    last). Equal quantiles (a spike, or noise) keep the highest rank, as an ECDF jumps there."""
    ranks = np.linspace(0.0, 1.0, n_quantiles + 1)
    x = quantiles(leaves, ranks)
    keep = np.r_[x[1:] > x[:-1], True]
    x, r = x[keep], ranks[keep]
    if len(x) < 2:  # all mass at one point
        return lambda t: (np.asarray(t) >= x[0]).astype(float)
    f = PchipInterpolator(x, r, extrapolate=False)
    lo, hi = x[0], x[-1]

    def ecdf(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        inside = np.clip(t, lo, hi)
        return np.where(t < lo, 0.0, np.where(t >= hi, 1.0, f(inside)))

    return ecdf


def _precision(tpr, fpr, positives: float, negatives: float) -> np.ndarray:
    tp, fp = positives * tpr, negatives * fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tp + fp > 0, tp / (tp + fp), 1.0)


def estimate_curves(
    leaves: np.ndarray,
    n_quantiles: int,
    *,
    grid: int = EVAL_GRID,
    method: str = DEFAULT_CURVE_METHOD,
    ap_rule: str = "integral",
) -> tuple[Curves, Curves]:
    """(dense curves for areas, knot curves for output) from consistent leaves of shape (2, L).

    The knot curves are sampled at the 2(Q + 1) quantiles only: the points worth printing.
    `method` picks the estimator ('leaves' or 'pchip', see `CURVE_METHODS`); `grid` is used by
    'pchip' only and `ap_rule` by 'leaves' only.
    """
    if n_quantiles < 2:
        raise ValueError(f"`n_quantiles` must be at least 2. Found {n_quantiles}.")
    if method == "leaves":
        return leaf_curves(leaves, n_quantiles, ap_rule=ap_rule)
    if method != "pchip":
        raise ValueError(f"`method` must be one of {', '.join(CURVE_METHODS)}. Found {method!r}.")
    f_neg = class_ecdf(leaves[0], n_quantiles)
    f_pos = class_ecdf(leaves[1], n_quantiles)
    positives = max(float(leaves[1].sum()), 0.0)
    negatives = max(float(leaves[0].sum()), 0.0)
    ranks = np.linspace(0.0, 1.0, n_quantiles + 1)
    knots = np.union1d(quantiles(leaves[0], ranks), quantiles(leaves[1], ranks))

    def sample(t: np.ndarray) -> Curves:
        t = np.concatenate([[np.inf], np.sort(t)[::-1], [-np.inf]])
        tpr = 1.0 - f_pos(t)
        fpr = 1.0 - f_neg(t)
        tpr[0] = fpr[0] = 0.0
        tpr[-1] = fpr[-1] = 1.0
        return Curves(t, tpr, fpr, _precision(tpr, fpr, positives, negatives))

    dense = sample(np.union1d(knots, np.linspace(0.0, 1.0, grid)))
    return dense, sample(knots)


def leaf_tails(leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FP, TP) at the leaf edges k/L for k = L, L − 1, …, 0 (top edge first): the examples of
    each class scoring at or above the edge, from the reverse cumulative sums of the leaves.

    The sums are made monotone after cumulating (`monotone_cumulative`: isotonic regression of the
    prefix sums, then clamped into [0, the raw total]), never per leaf: clamping noisy leaves one
    by one would add the positive part of every empty leaf's noise. Both start at 0 and rise to
    the class total.
    """
    neg, pos = monotone_cumulative(leaves[0]), monotone_cumulative(leaves[1])
    return neg[-1] - neg[::-1], pos[-1] - pos[::-1]


def leaf_ap(fp: np.ndarray, tp: np.ndarray, rule: str) -> float:
    """AP over the leaves from their tails (top edge first), as Σ over leaves of the recall each
    adds times its precision: 'step' at the leaf's lower edge (scikit-learn's AP when the scores
    are tied within each leaf), 'integral' exactly along the leaf under a uniform mix.

    A leaf with a positives and b negatives above it, p and n inside (c = a + b, m = p + n):
    ∫₀¹ (a + u·p)/(c + u·m) du = p/m + (a − p·c/m)·ln(1 + m/c)/m, and p/m when c = 0.
    """
    total = tp[-1]
    if total <= 0:
        return 0.0
    p, n = np.diff(tp), np.diff(fp)
    a, b = tp[:-1], fp[:-1]
    c, m = a + b, p + n
    live = p > 0  # m ≥ p > 0 there
    p, n, a, c, m = p[live], n[live], a[live], c[live], m[live]
    if rule == "step":
        prec = (a + p) / (c + m)
    elif rule == "integral":
        with np.errstate(divide="ignore", invalid="ignore"):
            log_term = np.where(c > 0, np.log1p(m / np.where(c > 0, c, 1.0)) / m, 0.0)
        prec = p / m + (a - p * c / m) * log_term
    else:
        raise ValueError(f"`ap_rule` must be one of {', '.join(AP_RULES)}. Found {rule!r}.")
    return float(np.clip(np.sum(p * np.clip(prec, 0.0, 1.0)) / total, 0.0, 1.0))


MIN_TOP_RECALL = 0.01
"""The share of the positives a PR-curve point needs above it to show its own precision."""


def leaf_curves(
    leaves: np.ndarray, n_quantiles: int, *, ap_rule: str = "integral"
) -> tuple[Curves, Curves]:
    """The 'leaves' estimator: (curves at every leaf edge where a count changes, curves at the
    2(Q + 1) class quantiles) from consistent leaves of shape (2, L), possibly noisy.

    TP and FP at each edge come from `leaf_tails`; within a leaf the examples are taken as
    uniformly mixed, so the curves are straight between edges: the ROC AUC is the trapezoid over
    the edges (= the half-credit-within-leaf AUC) and AP is integrated per `ap_rule`. Above the
    first MIN_TOP_RECALL of the positives (at least one), where a precision is a ratio of a few
    examples or, under noise, of a few the fit put at the top, the PR curve takes the precision
    of that whole top region: it starts at the right height, with no spike towards 0 at recall 0.
    """
    fp, tp = leaf_tails(leaves)
    n_leaves = fp.size - 1
    positives, negatives = tp[-1], fp[-1]
    ap = leaf_ap(fp, tp, ap_rule)
    min_tp = max(1.0, MIN_TOP_RECALL * positives)
    first = np.flatnonzero(tp >= min_tp)
    start = float(tp[first[0]] / (tp[first[0]] + fp[first[0]])) if first.size else 1.0

    def rates(tp_t: np.ndarray, fp_t: np.ndarray, t: np.ndarray) -> Curves:
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.where(tp_t >= min_tp, tp_t / (tp_t + fp_t), start)
            tpr = tp_t / positives if positives > 0 else (t == -np.inf).astype(float)
            fpr = fp_t / negatives if negatives > 0 else (t == -np.inf).astype(float)
        tpr, fpr = np.clip(tpr, 0.0, 1.0), np.clip(fpr, 0.0, 1.0)
        tpr[0] = fpr[0] = 0.0
        tpr[-1] = fpr[-1] = 1.0
        precision[0] = start
        return Curves(t, tpr, fpr, np.clip(precision, 0.0, 1.0), ap)

    # Every edge, top first; keep the first edge of each run of equal counts (the lower edge of
    # a non-empty leaf) and both ends.
    edges = np.arange(n_leaves, -1, -1) / n_leaves
    edges[0], edges[-1] = np.inf, -np.inf
    keep = np.r_[True, (np.diff(tp) != 0) | (np.diff(fp) != 0)]
    keep[-1] = True
    dense = rates(tp[keep], fp[keep], edges[keep])

    # The points worth printing: the curves at both classes' Q-quantiles, linear inside a leaf.
    ranks = np.linspace(0.0, 1.0, n_quantiles + 1)
    knots = np.union1d(quantiles(leaves[0], ranks), quantiles(leaves[1], ranks))[::-1]
    ascending = np.arange(n_leaves + 1) / n_leaves  # the edges of tp[::-1], fp[::-1]
    tp_k = np.interp(knots, ascending, tp[::-1])
    fp_k = np.interp(knots, ascending, fp[::-1])
    t = np.concatenate([[np.inf], knots, [-np.inf]])
    points = rates(np.r_[0.0, tp_k, positives], np.r_[0.0, fp_k, negatives], t)
    return dense, points


def within_leaf_bounds(leaves: np.ndarray) -> tuple[float, float, float, float]:
    """(AUC low, AUC high, AP low, AP high) over every order of the examples inside each leaf.

    The leaves fix everything but the order within a leaf: AUC moves by at most ±Σpᵢnᵢ/(2PN);
    AP is highest with each leaf's positives first and lowest with them last, and the sum over
    a leaf has a closed form: Σₖ₌₁ᵖ (a + k)/(a + b + k) = p − b·(ψ(a + b + p + 1) − ψ(a + b + 1))
    for a positives and b negatives above it.
    """
    # Non-negative leaves from the monotone prefix sums (not clamped leaves, whose positive
    # noise in empty leaves would invent examples at the top of the ranking).
    neg = np.diff(monotone_cumulative(leaves[0]))[::-1]  # top leaf first
    pos = np.diff(monotone_cumulative(leaves[1]))[::-1]
    p_total, n_total = pos.sum(), neg.sum()
    if p_total <= 0 or n_total <= 0:
        return 0.0, 1.0, 0.0, 1.0
    tp_above = np.concatenate([[0.0], np.cumsum(pos)[:-1]])
    fp_above = np.concatenate([[0.0], np.cumsum(neg)[:-1]])

    def precision_sum(a, b, p):
        return p - b * (digamma(a + b + p + 1) - digamma(a + b + 1))

    ap_hi = float(precision_sum(tp_above, fp_above, pos).sum() / p_total)
    ap_lo = float(precision_sum(tp_above, fp_above + neg, pos).sum() / p_total)
    # AUC with ties at ½ over the leaves, and its extremes
    below = n_total - fp_above - neg  # negatives in leaves below (scores lower)
    auc_mid = float(np.sum(pos * (below + neg / 2)) / (p_total * n_total))
    half = float(np.sum(pos * neg) / (2 * p_total * n_total))
    return auc_mid - half, auc_mid + half, ap_lo, ap_hi


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
