"""The AP's spread over random orders of the examples inside each leaf (`shuffled_ap`): the
order a release cannot see, with its mean (`shuffled_ap_mean`, scikit-learn's AP averaged over
the orders) and its variance, exact at the top where precisions are ratios of a few positives,
first-order (delta method) below. Read by `fedeval.estimate.average_precision`'s intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import digamma

from fedeval.core.hierarchy import monotone_cumulative
from fedeval.estimate.roc_pr import all_positive, leaf_ap, leaf_tails

ORDER_EXACT_ABOVE = 64
"""Positives ranked above a leaf below which its random-order AP variance is computed exactly
(moments of sampling without replacement). Below them a first-order (delta-method) variance is
within a few percent of the exact one; at the very top, where a precision is a ratio of a few
positives, it can be off many-fold (5 positives among 5,000 negatives: 500-fold)."""


ORDER_EXACT_SIZE = 1 << 22
"""The most examples the exact variances of the top leaves are summed over (memory O(that));
beyond it `shuffled_ap` gives no spread and the interval stays the within-leaf hull."""


ORDER_NODES = 64
"""Positions per leaf at which the first-order variance is evaluated: all of them in a leaf of
at most this many examples, else a quadrature denser at the leaf's top."""


ORDER_CHUNK = 1 << 14
"""Leaves per block of the first-order variance ((block, ORDER_NODES) values at a time)."""


ORDER_LINEAR_BELOW = 0.01
"""A leaf far enough down that its examples are at most this share of those above it (m ≤ r·c)
and its expected positives at most this share of the positives above it (πm ≤ r·a): there the
first-order weights v_l are linear in the position to a relative O(r), so their spread has a
closed form (`_linear_order_variance`) and no positions need summing."""


@dataclass(frozen=True)
class OrderTerms:
    """What the variance of a leaf's sum of precisions over random orders of its examples
    depends on, per leaf: a positives and c examples above it, p positives and m examples in
    it (`shuffled_ap`)."""

    a: npt.NDArray[np.float64]
    c: npt.NDArray[np.float64]
    p: npt.NDArray[np.float64]
    m: npt.NDArray[np.float64]

    def at(self, leaves: np.ndarray) -> OrderTerms:
        """The terms of the leaves selected by the mask `leaves`."""
        return OrderTerms(self.a[leaves], self.c[leaves], self.p[leaves], self.m[leaves])


def _leaf_sums(leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(p, n, a, b) per leaf, top leaf first, of the non-negative leaves from the monotone prefix
    sums: positives and negatives inside each leaf and above it."""
    neg = np.diff(monotone_cumulative(leaves[0]))[::-1]
    pos = np.diff(monotone_cumulative(leaves[1]))[::-1]
    a = np.concatenate([[0.0], np.cumsum(pos)[:-1]])
    b = np.concatenate([[0.0], np.cumsum(neg)[:-1]])
    return pos, neg, a, b


def shuffled_ap_mean(leaves: np.ndarray) -> float:
    """The AP's mean over random orders of the examples inside each leaf (exact, discrete).

    A leaf with a positives and b negatives above it (c = a + b), p and n inside (m = p + n):
    its sum of precisions at its positives, S = Σₖ Xₖ(a + Tₖ)/(c + k), has mean
    (p/m)(a + 1)·H + p(p − 1)/(m(m − 1))·(m − (c + 1)·H), H = ψ(c + m + 1) − ψ(c + 1), since
    E[Xₖ] = p/m and E[Xₖ Tₖ] = p/m + (k − 1)·p(p − 1)/(m(m − 1)). Unlike the integral rule
    (a continuous uniform mix) it has no discreteness bias where leaves hold a few examples.
    """
    return leaf_ap(*leaf_tails(leaves), "shuffled")


def _exact_order_variance(t: OrderTerms) -> npt.NDArray[np.float64]:
    """Var over random orders of each leaf's S = Σₖ Xₖ(a + Tₖ)/(c + k), exactly: S = (a + 1)U + V
    with U = Σ Xₖfₖ, V = Σ_{l<k} X_l Xₖ fₖ, fₖ = 1/(c + k), from the joint moments of 1 to 4
    positions under sampling without replacement. O(m) per leaf, vectorised over leaves."""
    a, c, p, m = t.a, t.c, t.p, t.m
    size = np.rint(m).astype(np.int64)
    leaf = np.repeat(np.arange(size.size), size)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    k = np.arange(leaf.size) - start[leaf] + 1.0  # 1..m inside each leaf
    f = 1.0 / (c[leaf] + k)
    cum = np.cumsum(f)
    g = cum - np.concatenate([[0.0], cum])[start][leaf]  # Σ_{l≤k} f_l inside the leaf

    def per_leaf(x: np.ndarray) -> np.ndarray:
        return np.bincount(leaf, weights=x, minlength=size.size)

    f1, f2 = per_leaf(f), per_leaf(f * f)
    pairs = per_leaf(f * (g - f))  # Σ_{l<k} f_l fₖ
    own = per_leaf((k - 1.0) * f * f)  # Σ_{l<k} fₖ²
    c1 = per_leaf((k - 1.0) * f)  # Σ_{l<k} fₖ = E[V]/μ₂
    touching = per_leaf(((f1[leaf] - g) + (k - 1.0) * f) ** 2)  # Σ over k of (weights at k)²
    mu1, mu2, mu3, mu4 = (all_positive(p, m, j) for j in (1, 2, 3, 4))
    eu, ev = mu1 * f1, mu2 * c1
    var_u = mu1 * f2 + mu2 * (f1 * f1 - f2) - eu * eu
    cov = mu2 * (pairs + own) + mu3 * (f1 * c1 - pairs - own) - eu * ev
    var_v = mu4 * c1 * c1 + (mu3 - mu4) * (touching - own) + (mu2 - mu3) * own - ev * ev
    var: npt.NDArray[np.float64] = np.maximum(
        (a + 1.0) ** 2 * var_u + 2.0 * (a + 1.0) * cov + var_v, 0.0
    )
    return var


def _first_order_variance(t: OrderTerms) -> npt.NDArray[np.float64]:
    """Var of each leaf's S to first order in the positives' deviations δ_l = X_l − p/m:
    S ≈ E + Σ δ_l v_l with v_l = (a + πl)/(c + l) + π·Σ_{k=l}^{m} 1/(c + k), π = p/m, so
    Var = π(1 − π)·m/(m − 1)·Σ_l (v_l − v̄)² (sampling without replacement). The sum runs over
    every position of a leaf of at most ORDER_NODES examples (leaves sorted by size, so that a
    block is padded to its largest), else by quadrature, with ψ for the sum over k."""
    a, c, p, m = t.a, t.c, t.p, t.m
    out = np.zeros(p.size)
    order = np.argsort(m, kind="stable")
    for s in range(0, p.size, ORDER_CHUNK):
        i = order[s : s + ORDER_CHUNK]
        a_, c_, p_, m_ = (x[i, None] for x in (a, c, p, m))
        pi = p_ / m_
        if m_[-1, 0] <= ORDER_NODES:  # every position: l = 1 … m
            pos = np.arange(1.0, math.floor(m_[-1, 0]) + 1.0)
            w = (pos <= m_).astype(np.float64)
            tail = np.cumsum((w / (c_ + pos))[:, ::-1], axis=1)[:, ::-1]
        else:  # quadrature nodes, denser at the leaf's top: l = 1 + (m − 1)t, t = u²
            u = (np.arange(ORDER_NODES) + 0.5) / ORDER_NODES
            small = m_ <= ORDER_NODES
            pos = np.where(small, np.arange(1.0, ORDER_NODES + 1.0), 1.0 + (m_ - 1.0) * u * u)
            w = np.where(small, pos <= m_, 2.0 * u)
            tail = digamma(c_ + m_ + 1) - digamma(c_ + pos)
        v = (a_ + pi * pos) / (c_ + pos) + pi * tail
        w = w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300)
        spread = np.sum(w * (v - np.sum(w * v, axis=1, keepdims=True)) ** 2, axis=1)
        pi, m_ = pi[:, 0], m_[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            var = pi * (1.0 - pi) * m_ * m_ / (m_ - 1.0) * spread
        out[i] = np.where(m_ > 1.0, var, 0.0)
    return out


def _linear_order_variance(t: OrderTerms) -> npt.NDArray[np.float64]:
    """`_first_order_variance` of leaves far below the top (ORDER_LINEAR_BELOW): the weights'
    step v_{l+1} − v_l = −(a + π(l + 1))/((c + l)(c + l + 1)) is nearly constant over the leaf,
    so their spread over l = 1 … m is that step at the leaf's middle, squared, times
    (m² − 1)/12, and Var = π(1 − π)·m²(m + 1)/12·step²."""
    a, c, p, m = t.a, t.c, t.p, t.m
    pi = p / m
    mid = (m + 1.0) / 2.0
    step = (a + pi * (mid + 1.0)) / ((c + mid) * (c + mid + 1.0))
    var: npt.NDArray[np.float64] = np.where(
        m > 1.0, pi * (1.0 - pi) * m * m * (m + 1.0) / 12.0 * step * step, 0.0
    )
    return var


def shuffled_ap(leaves: np.ndarray, mean: float | None = None) -> tuple[float, float]:
    """(mean, sd) of the AP over random orders of the examples inside each leaf (exchangeable
    within a leaf; leaves independent): the AP's spread over data draws that the leaves' exact
    counts leave open. The mean is `shuffled_ap_mean`; the variance is exact for the leaves with
    fewer than ORDER_EXACT_ABOVE positives above them and first-order below, in closed form
    far below the top (nan: too many examples at the top to sum exactly). `mean`: the
    caller's `shuffled_ap_mean(leaves)`, where it has it."""
    if mean is None:
        mean = shuffled_ap_mean(leaves)
    p, n, a, b = _leaf_sums(leaves)
    total = p.sum()
    mixed = (p > 0) & (n > 0)
    if total <= 0 or not mixed.any():
        return mean, 0.0
    p, m, a, c = p[mixed], p[mixed] + n[mixed], a[mixed], a[mixed] + b[mixed]
    top = a < ORDER_EXACT_ABOVE
    if m[top].sum() > ORDER_EXACT_SIZE:
        return mean, float("nan")
    far = ~top & (m <= ORDER_LINEAR_BELOW * c) & (p <= ORDER_LINEAR_BELOW * a)
    near = ~top & ~far
    terms = OrderTerms(a, c, p, m)
    variance = _exact_order_variance(terms.at(top)).sum()
    variance += _first_order_variance(terms.at(near)).sum()
    variance += _linear_order_variance(terms.at(far)).sum()
    return mean, float(np.sqrt(variance) / total)
