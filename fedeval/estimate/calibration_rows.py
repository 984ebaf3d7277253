"""Histogram binning fitted on a stack of releases at once (the noise draws behind calibrate's
interval): equi-depth edges, bucket counts and the monotone fit of every row in one pass each.

Each row gets what `fedeval.estimate.calibration.histogram_binning` gives it alone: the edges
and counts by the same operations in the same order (bit for bit), the pooled-adjacent-violators
fit by the max–min formula of isotonic regression (to the last few bits: its block means are
summed in another order than scipy's kernel sums them).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fedeval.core.hierarchy import monotone_cumulative


def isotonic_rows(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted least-squares non-decreasing fit of each row of `y` (R, n), weights `w` (R, n)
    all > 0: what `scipy.optimize.isotonic_regression(y[r], weights=w[r]).x` returns per row.

    The max–min formula (Robertson, Wright & Dykstra, "Order Restricted Statistical
    Inference", 1988, theorem 1.4.4): x_i = max_{j ≤ i} min_{k ≥ i} Av(j, k), Av(j, k) the
    weighted mean of y_j … y_k. Every block mean is summed from its own start (no differences
    of prefix sums, which a tiny weight beside large ones would cancel away), so each is within
    a few ulps of the exact mean. O(R·n²) time and memory: for the few buckets of a map.
    """
    y = np.asarray(y, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n = y.shape[-1]
    upper = np.triu(np.ones((n, n), dtype=bool))  # [j, k]: k ≥ j
    # Sums of y·w and w over j..k, each summed from j: (R, j, k).
    s = np.cumsum(np.where(upper, (w * y)[:, None, :], 0.0), axis=-1)
    t = np.cumsum(np.where(upper, w[:, None, :], 0.0), axis=-1)
    mean = np.full_like(s, np.inf)
    np.divide(s, t, out=mean, where=upper)
    # min over k ≥ i of Av(j, k), for each (j, i): a running minimum from the right.
    low = np.minimum.accumulate(mean[..., ::-1], axis=-1)[..., ::-1]
    fit: npt.NDArray[np.float64] = np.max(np.where(upper, low, -np.inf), axis=-2)
    return fit


def searchsorted_rows(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """`np.searchsorted(a[r], v[r], side="left")` for each row r of a non-decreasing `a` (R, m)
    and queries `v` (R, K): the count of a[r] < v[r, k], by a binary search run on all rows at
    once (⌈log2(m + 1)⌉ steps)."""
    rows, m = a.shape
    lo = np.zeros(v.shape, dtype=np.intp)
    hi = np.full(v.shape, m, dtype=np.intp)
    r = np.arange(rows)[:, None]
    for _ in range(int(m).bit_length()):
        mid = (lo + hi) // 2
        right = a[r, np.minimum(mid, m - 1)] < v
        live = lo < hi
        lo = np.where(live & right, mid + 1, lo)
        hi = np.where(live & ~right, mid, hi)
    return lo


def equidepth_edges_rows(
    pooled: np.ndarray, n_buckets: int, prefix: np.ndarray | None = None
) -> np.ndarray:
    """`fedeval.core.hierarchy.equidepth_edges` of each row of `pooled` (R, L): (R, B + 1),
    the same operations per row (monotone prefix sums, the first knot reaching each target,
    linear inside its leaf); `prefix`: their `monotone_cumulative`, taken once for several."""
    cs = monotone_cumulative(pooled) if prefix is None else prefix
    n = cs.shape[-1] - 1
    q = np.linspace(0.0, 1.0, n_buckets + 1)
    total = cs[:, -1:]
    target = q * total
    j = np.clip(searchsorted_rows(cs, target), 1, n)
    lo = np.take_along_axis(cs, j - 1, axis=-1)
    hi = np.take_along_axis(cs, j, axis=-1)
    width = np.where(hi > lo, hi - lo, 1.0)
    frac = np.where(hi > lo, (target - lo) / width, 0.0)
    edges = np.where(total > 0, (j - 1 + frac) / n, np.linspace(0.0, 1.0, n_buckets + 1))
    edges[:, 0], edges[:, -1] = 0.0, 1.0
    return np.maximum.accumulate(edges, axis=-1)


def bucket_counts_rows(
    leaves: np.ndarray, edges: np.ndarray, sums: np.ndarray | None = None
) -> np.ndarray:
    """`fedeval.core.hierarchy.bucket_counts` of each row of `leaves` (R, L) on its own
    `edges` (R, K + 1): (R, K), the same interpolation inside the leaf holding each edge;
    `sums`: `np.cumsum(leaves, axis=-1)`, taken once for several."""
    n = leaves.shape[-1]
    cs = np.cumsum(leaves, axis=-1) if sums is None else sums
    pos = np.clip(edges, 0.0, 1.0) * n
    j = np.minimum(np.floor(pos).astype(np.int64), n - 1)
    frac = pos - j
    below = np.where(j > 0, np.take_along_axis(cs, np.maximum(j - 1, 0), axis=-1), 0.0)
    return np.diff(below + np.take_along_axis(leaves, j, axis=-1) * frac, axis=-1)


def histogram_binning_rows(
    leaves: np.ndarray, n_buckets: int, tiny_weight: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edges, values, mass) of `histogram_binning` on each release of a stack (R, 2, L):
    (R, B + 1), (R, B), (R, B). Empty (or negative noisy) buckets weigh `tiny_weight` in the
    fit, at rate ½, as `histogram_binning` has them."""
    leaves = np.asarray(leaves, dtype=np.float64)
    edges = equidepth_edges_rows(leaves[:, 0] + leaves[:, 1], n_buckets)
    pos = bucket_counts_rows(leaves[:, 1], edges)
    neg = bucket_counts_rows(leaves[:, 0], edges)
    mass = pos + neg
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = pos / mass
    ok = mass > 0
    y = np.where(ok, np.clip(np.nan_to_num(rates, nan=0.5), 0.0, 1.0), 0.5)
    values = np.clip(isotonic_rows(y, np.where(ok, mass, tiny_weight)), 0.0, 1.0)
    return edges, values, mass
