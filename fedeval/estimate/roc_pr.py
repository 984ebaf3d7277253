"""ROC and PR curves from the per-class score histograms.

Two estimators (`CURVE_METHODS`), on the same consistent, possibly noisy leaves:

- **leaves** (the default): TP(t) and FP(t) at every leaf edge from the reverse cumulative sums of
  the leaves, made monotone after summing (`leaf_tails`); ROC = (FP/N, TP/P), PR = (TP/P,
  TP/(TP + FP)), straight inside a leaf (examples mixed uniformly). ROC AUC is the trapezoid over
  the edges (the half-credit-within-leaf AUC); AP integrates precision exactly along each leaf
  (`ap_rule="integral"`, used under noise), averages it over random orders of the leaf's
  examples ("shuffled", used on exact counts) or steps at its lower edge as scikit-learn does
  for ties ("step").
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
import numpy.typing as npt
from scipy.special import digamma

from fedeval.core.hierarchy import monotone_cumulative, quantiles, quantiles_of
from fedeval.estimate.smoothness import ap_hull

EVAL_GRID = 4097
"""Uniform thresholds added to the quantile knots when the areas are integrated."""

CURVE_METHODS = ("leaves", "pchip")
"""'leaves': the curves at every leaf edge from the cumulated leaf counts; 'pchip': the papers'
Q-quantile PCHIP estimator."""

DEFAULT_CURVE_METHOD = "leaves"
"""The more accurate of the two, measured (benchmarks/rare.py; figures in the module docstring)."""

AP_RULES = ("integral", "step", "shuffled")
"""How the leaves estimator takes AP inside a leaf: 'integral' integrates precision exactly along
the leaf's straight (FP, TP) segment (examples mixed uniformly); 'step' takes the whole leaf at
once, as scikit-learn does for tied scores; 'shuffled' is the mean over random orders of the
leaf's examples, the discrete form of 'integral' (`shuffled_ap_mean`), for exact counts."""


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
    from scipy.interpolate import PchipInterpolator  # ~60 ms to import: only the pchip curves

    f = PchipInterpolator(x, r, extrapolate=False)
    lo, hi = x[0], x[-1]

    def ecdf(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        inside = np.clip(t, lo, hi)
        return np.where(t < lo, 0.0, np.where(t >= hi, 1.0, f(inside)))

    return ecdf


def _precision(
    tpr: np.ndarray, fpr: np.ndarray, positives: float, negatives: float
) -> npt.NDArray[np.float64]:
    tp, fp = positives * tpr, negatives * fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        precision: npt.NDArray[np.float64] = np.where(tp + fp > 0, tp / (tp + fp), 1.0)
    return precision


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
    Leaves (2, L) give two arrays (L + 1,); a stack (..., 2, L) gives (..., L + 1).

    The sums are made monotone after cumulating (`monotone_cumulative`: isotonic regression of the
    prefix sums, then clamped into [0, the raw total]), never per leaf: clamping noisy leaves one
    by one would add the positive part of every empty leaf's noise. Both start at 0 and rise to
    the class total.
    """
    neg = monotone_cumulative(leaves[..., 0, :])
    pos = monotone_cumulative(leaves[..., 1, :])
    return _tails(neg, pos)


def _tails(neg: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`leaf_tails` from each class's `monotone_cumulative`."""
    return neg[..., -1:] - neg[..., ::-1], pos[..., -1:] - pos[..., ::-1]


def leaf_ap(fp: np.ndarray, tp: np.ndarray, rule: str) -> float:
    """AP over the leaves from their tails (top edge first), as Σ over leaves of the recall each
    adds times its precision: 'step' at the leaf's lower edge (scikit-learn's AP when the scores
    are tied within each leaf), 'integral' exactly along the leaf under a uniform mix,
    'shuffled' its mean over random orders of the leaf's examples (`shuffled_ap_mean`).

    A leaf with a positives and b negatives above it, p and n inside (c = a + b, m = p + n):
    ∫₀¹ (a + u·p)/(c + u·m) du = p/m + (a − p·c/m)·ln(1 + m/c)/m, and p/m when c = 0.
    """
    return float(leaf_ap_rows(fp[None], tp[None], rule)[0])


def leaf_ap_rows(fp: np.ndarray, tp: np.ndarray, rule: str) -> np.ndarray:
    """`leaf_ap` of each row of tails (R, L + 1), e.g. of a stack of noise draws: the precisions
    of every row's leaves with positives in one pass, then each row's sum over its own, as
    `leaf_ap` sums them (the same terms in the same order, so the same value bit for bit)."""
    if rule not in AP_RULES:
        raise ValueError(f"`ap_rule` must be one of {', '.join(AP_RULES)}. Found {rule!r}.")
    total = tp[:, -1]
    p, n = np.diff(tp, axis=-1), np.diff(fp, axis=-1)
    live = p > 0  # m ≥ p > 0 there
    ends = np.cumsum(np.count_nonzero(live, axis=1))
    # The live leaves of every row, row after row (row-major order keeps each row's together).
    if rule == "shuffled":
        terms = _precision_terms(p[live], n[live], tp[:, :-1][live], fp[:, :-1][live], rule)
    else:
        # Every leaf's term, then the live ones kept: the same values where p > 0 (elementwise
        # arithmetic), the others never read; one gather of the terms instead of four of the
        # counts (60 draws × 2^13 sub-cells, `trend_ap`: each fresh copy is 4 MB of pages).
        with np.errstate(all="ignore"):
            every = _precision_terms(p, n, tp[:, :-1], fp[:, :-1], rule, own=True)
        terms = every[live]
    out = np.zeros(len(tp))
    bounds = np.r_[0, ends].tolist()
    totals = total.tolist()
    for i in np.flatnonzero(~(total <= 0)).tolist():  # a sum per row: leaf_ap's pairwise order
        s = float(np.add.reduce(terms[bounds[i] : bounds[i + 1]]))
        out[i] = min(max(s / totals[i], 0.0), 1.0)
    return out


def _precision_terms(
    p: np.ndarray, n: np.ndarray, a: np.ndarray, b: np.ndarray, rule: str, *, own: bool = False
) -> np.ndarray:
    """Each leaf's sum of precisions at its positives under `rule` (`leaf_ap`), from its p
    positives and n negatives (p > 0) and the a positives and b negatives above it. `own`:
    `n` is the caller's scratch, and the leaves' totals p + n are written over it."""
    c, m = a + b, (np.add(p, n, out=n) if own else p + n)
    if rule == "step":
        prec = (a + p) / (c + m)
    elif rule == "shuffled":
        h = digamma(c + m + 1) - digamma(c + 1)
        prec = (all_positive(p, m, 1) * (a + 1) * h + all_positive(p, m, 2) * (m - (c + 1) * h)) / p
    else:  # "integral"
        # Each step written over the last (the same operations in the same order, so the same
        # values, with a third of the temporaries: 60 draws' 2^13 sub-cells, `trend_ap`).
        above = c > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            log_term = np.where(above, c, 1.0)
            np.divide(m, log_term, out=log_term)
            np.log1p(log_term, out=log_term)
            np.divide(log_term, m, out=log_term)
        log_term[~above] = 0.0
        tilt = np.multiply(p, c, out=c)
        tilt /= m
        np.subtract(a, tilt, out=tilt)
        tilt *= log_term
        prec = np.divide(p, m, out=log_term)  # its last read was above
        prec += tilt
    np.clip(prec, 0.0, 1.0, out=prec)
    terms: np.ndarray = np.multiply(p, prec, out=prec)
    return terms


def leaf_ap_terms(fp: np.ndarray, tp: np.ndarray, rule: str) -> np.ndarray:
    """Each leaf's term of `leaf_ap_rows` (its sum of precisions at its positives), for rows of
    tails (..., L + 1), as (..., L), top leaf first, 0 where a leaf has no positives: the AP
    is their sum over the class total."""
    p, n = np.diff(tp, axis=-1), np.diff(fp, axis=-1)
    live = p > 0
    out = np.zeros(p.shape)
    out[live] = _precision_terms(p[live], n[live], tp[..., :-1][live], fp[..., :-1][live], rule)
    return out


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
    # Each class's monotone prefix sums fitted once, for its tails and its quantiles.
    neg_cs, pos_cs = monotone_cumulative(leaves[0]), monotone_cumulative(leaves[1])
    fp, tp = _tails(neg_cs, pos_cs)
    n_leaves = fp.size - 1
    positives, negatives = tp[-1], fp[-1]
    ap = leaf_ap(fp, tp, ap_rule)
    min_tp = max(1.0, MIN_TOP_RECALL * positives)
    first = np.flatnonzero(tp >= min_tp)
    start = float(tp[first[0]] / (tp[first[0]] + fp[first[0]])) if first.size else 1.0

    def rates(tp_t: np.ndarray, fp_t: np.ndarray, t: np.ndarray) -> Curves:
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.where(tp_t >= min_tp, tp_t / (tp_t + fp_t), start)
        tpr, fpr = _rates(tp_t, fp_t, t, positives, negatives)
        precision[0] = start
        return Curves(t, tpr, fpr, np.clip(precision, 0.0, 1.0), ap)

    edges, keep = _dense_edges(fp, tp)
    dense = rates(tp[keep], fp[keep], edges[keep])

    # The points worth printing: the curves at both classes' Q-quantiles, linear inside a leaf.
    ranks = np.linspace(0.0, 1.0, n_quantiles + 1)
    knots = np.union1d(quantiles_of(neg_cs, ranks), quantiles_of(pos_cs, ranks))[::-1]
    ascending = np.arange(n_leaves + 1) / n_leaves  # the edges of tp[::-1], fp[::-1]
    tp_k = np.interp(knots, ascending, tp[::-1])
    fp_k = np.interp(knots, ascending, fp[::-1])
    t = np.concatenate([[np.inf], knots, [-np.inf]])
    points = rates(np.r_[0.0, tp_k, positives], np.r_[0.0, fp_k, negatives], t)
    return dense, points


def _rates(
    tp_t: np.ndarray, fp_t: np.ndarray, t: np.ndarray, positives: float, negatives: float
) -> tuple[np.ndarray, np.ndarray]:
    """(TPR, FPR) at thresholds `t` (highest first) from TP and FP there, from (0, 0) to (1, 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = tp_t / positives if positives > 0 else (t == -np.inf).astype(float)
        fpr = fp_t / negatives if negatives > 0 else (t == -np.inf).astype(float)
    tpr, fpr = np.clip(tpr, 0.0, 1.0), np.clip(fpr, 0.0, 1.0)
    tpr[0] = fpr[0] = 0.0
    tpr[-1] = fpr[-1] = 1.0
    return tpr, fpr


def _dense_edges(fp: np.ndarray, tp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(every leaf edge top first, ±inf at the ends; the edges the dense curves keep): the first
    edge of each run of equal counts (the lower edge of a non-empty leaf) and both ends."""
    n_leaves = fp.size - 1
    edges = np.arange(n_leaves, -1, -1) / n_leaves
    edges[0], edges[-1] = np.inf, -np.inf
    keep = np.r_[True, (np.diff(tp) != 0) | (np.diff(fp) != 0)]
    keep[-1] = True
    return edges, keep


def leaf_roc_auc_rows(fp: np.ndarray, tp: np.ndarray) -> np.ndarray:
    """The 'leaves' ROC AUC (`Curves.roc_auc` of `leaf_curves`' dense curves) of each row of
    tails (R, L + 1): the trapezoid over the edges where a count changes."""
    n_leaves = tp.shape[-1] - 1
    edges = np.arange(n_leaves, -1, -1) / n_leaves
    edges[0], edges[-1] = np.inf, -np.inf
    # `_dense_edges`' kept edges of every row at once
    keep = np.ones(tp.shape, bool)
    keep[:, 1:] = (np.diff(tp, axis=-1) != 0) | (np.diff(fp, axis=-1) != 0)
    keep[:, -1] = True
    out = np.empty(len(tp))
    for i in range(len(tp)):
        k = keep[i]
        tpr, fpr = _rates(tp[i][k], fp[i][k], edges[k], tp[i][-1], fp[i][-1])
        out[i] = np.trapezoid(tpr, fpr)
    return out


def within_leaf_bounds(leaves: np.ndarray) -> tuple[float, float, float, float]:
    """(AUC low, AUC high, AP low, AP high) over every order of the examples inside each leaf,
    and over ties there.

    The leaves fix everything but the order within a leaf: AUC moves by at most ±Σpᵢnᵢ/(2PN)
    (a tie counts ½, inside that range); AP is highest with each leaf's positives first and
    lowest with them last, and the sum over a leaf has a closed form: Σₖ₌₁ᵖ (a + k)/(a + b + k)
    = p − b·(ψ(a + b + p + 1) − ψ(a + b + 1)) for a positives and b negatives above it. A tie is
    outside that range for the AP (scikit-learn gives every tied positive the precision at the
    tie: many positives tied with a few negatives below many negatives score higher than any
    order of them), so each leaf's sum also takes its tie value (`fedeval.estimate.smoothness.
    ap_hull`; with every positive on one score and negatives around it, the orders' range
    missed the AP by 0.2).
    """
    # Non-negative leaves from the monotone prefix sums (not clamped leaves, whose positive
    # noise in empty leaves would invent examples at the top of the ranking).
    neg = np.diff(monotone_cumulative(leaves[0]))[::-1]  # top leaf first
    pos = np.diff(monotone_cumulative(leaves[1]))[::-1]
    p_total, n_total = pos.sum(), neg.sum()
    if p_total <= 0 or n_total <= 0:
        return 0.0, 1.0, 0.0, 1.0
    fp_above = np.concatenate([[0.0], np.cumsum(neg)[:-1]])

    ap_lo, ap_hi = ap_hull(leaves)
    # AUC with ties at ½ over the leaves, and its extremes
    below = n_total - fp_above - neg  # negatives in leaves below (scores lower)
    auc_mid = float(np.sum(pos * (below + neg / 2)) / (p_total * n_total))
    half = float(np.sum(pos * neg) / (2 * p_total * n_total))
    return auc_mid - half, auc_mid + half, ap_lo, ap_hi


def all_positive(p: np.ndarray, m: np.ndarray, j: int) -> np.ndarray:
    """p(p − 1)…(p − j + 1) / m(m − 1)…(m − j + 1): the chance that j given positions of a leaf
    all hold positives when its examples are in random order (0 below j examples)."""
    out = np.ones(np.shape(p))
    for i in range(j):
        ok = m - i > 0
        out = out * np.where(ok, (p - i) / np.where(ok, m - i, 1.0), 0.0)
    return np.clip(out, 0.0, 1.0)
