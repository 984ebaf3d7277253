"""`discretisation_range` sums over the (leaf, bin) pairs a leaf overlaps or is assigned to, not
over the whole (L, M) table (issue 28): the same result bit for bit as the table, here written
out in full as the reference, on warped, tied and zero-width edges, edges on bin edges, one to
twenty bins, negative counts and infinite departures."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.estimate.ece import bin_gaps, leaf_bins
from fedeval.estimate.ece_range import discretisation_range


def _table_range(leaves, edges, departing, n_bins):
    """The (L, M) table formulation: every pair of leaf and bin, zeros where a leaf does not
    touch a bin."""
    counts = np.clip(np.asarray(leaves, dtype=np.float64), 0.0, None)
    total = float(counts.sum())
    if not total > 0:
        return 0.0, 0.0
    lo_e, hi_e = edges[:-1], edges[1:]
    mid = (lo_e + hi_e) / 2
    width = hi_e - lo_e
    bins = np.arange(n_bins)
    b_lo, b_hi = bins / n_bins, (bins + 1) / n_bins
    b_hi[-1] = np.inf
    b_lo[0] = -np.inf
    ol = np.maximum(lo_e[:, None], b_lo[None, :])
    oh = np.minimum(hi_e[:, None], b_hi[None, :])
    overlap = np.clip(oh - ol, 0.0, None)
    assigned = leaf_bins(mid, n_bins)[:, None] == bins[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(width[:, None] > 0, overlap / width[:, None], assigned.astype(float))
    straddle = (overlap > 0).sum(axis=1) > 1
    touches = (overlap > 0) | assigned
    e_n = np.minimum(np.asarray(departing[0], dtype=np.float64), counts[0])
    e_p = np.minimum(np.asarray(departing[1], dtype=np.float64), counts[1])
    sn, sp = (counts[0] - e_n)[:, None], (counts[1] - e_p)[:, None]

    def gap(pos, neg, score):
        return pos * (1.0 - score) - neg * score

    ep, en = e_p[:, None], e_n[:, None]
    t, u = np.minimum(oh, hi_e[:, None]), np.maximum(ol, lo_e[:, None])
    dep_lo = np.where(straddle[:, None], -en * t, ep * (1 - hi_e[:, None]) - en * hi_e[:, None])
    dep_hi = np.where(
        straddle[:, None], ep * (1 - u), ep * (1 - lo_e[:, None]) - en * lo_e[:, None]
    )
    dep_lo = np.where(touches, dep_lo, 0.0).sum(axis=0)
    dep_hi = np.where(touches, dep_hi, 0.0).sum(axis=0)
    low, high = np.inf, -np.inf
    m_s = (sp + sn)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(m_s[:, None] > 0, np.sqrt(f * (1 - f) / m_s[:, None]), 0.0)
    whole = assigned.astype(float)
    for share_lo, share_hi in ((whole, whole), (f - 1.96 * spread, f + 1.96 * spread)):
        share_lo, share_hi = np.clip(share_lo, 0.0, 1.0), np.clip(share_hi, 0.0, 1.0)
        inside = share_hi > 0
        at_lo = np.where(inside, np.maximum(ol, lo_e[:, None]), 0.0)
        at_hi = np.where(inside, np.minimum(oh, hi_e[:, None]), 0.0)
        at_lo = np.where(assigned & (share_lo == 1.0), lo_e[:, None], at_lo)
        at_hi = np.where(assigned & (share_lo == 1.0), hi_e[:, None], at_hi)
        g_lo, g_hi = gap(sp, sn, at_hi), gap(sp, sn, at_lo)
        corners = np.stack([share_lo * g_lo, share_lo * g_hi, share_hi * g_lo, share_hi * g_hi])
        d_lo = corners.min(axis=0).sum(axis=0) + dep_lo
        d_hi = corners.max(axis=0).sum(axis=0) + dep_hi
        least = np.where((d_lo <= 0) & (d_hi >= 0), 0.0, np.minimum(np.abs(d_lo), np.abs(d_hi)))
        low = min(low, float(least.sum()))
        high = max(high, float(np.maximum(np.abs(d_lo), np.abs(d_hi)).sum()))
    plug = float(np.abs(bin_gaps(counts, mid, n_bins)).sum())
    return max(plug - low, 0.0) / total, max(high - plug, 0.0) / total


def _edges(rng: np.random.Generator, kind: int, n_leaves: int) -> np.ndarray:
    if kind == 0:
        return np.linspace(0, 1, n_leaves + 1)
    if kind == 1:  # warped
        return np.sort(np.r_[0.0, rng.random(n_leaves - 1), 1.0])
    if kind == 2:  # ties (zero widths), many on the bin edges k/15 and k/30
        return np.sort(np.r_[0.0, rng.integers(0, 30, n_leaves - 1) / 30, 1.0])
    return np.linspace(0, 1, n_leaves + 1) ** rng.uniform(0.3, 3)  # steep


@pytest.mark.parametrize("seed", range(4))
def test_pairs_equal_the_whole_table(seed):
    rng = np.random.default_rng([28, seed])
    for trial in range(150):
        n_leaves = int(rng.choice([1, 2, 3, 4, 7, 8, 15, 16, 30, 60, 64, 1000]))
        edges = _edges(rng, trial % 4, n_leaves)
        n_bins = int(rng.choice([1, 2, 3, 10, 15, 20]))
        leaves = rng.poisson(rng.uniform(0, 50), (2, n_leaves)).astype(float)
        if trial % 3 == 0:
            leaves += rng.normal(0, 5, leaves.shape)  # noisy, some negative
        departing = np.where(rng.random((2, n_leaves)) < 0.2, rng.uniform(0, 20, (2, n_leaves)), 0)
        if trial % 4 == 0:
            departing[rng.random((2, n_leaves)) < 0.1] = np.inf
        got = discretisation_range(leaves, edges, departing, n_bins, joint=False)
        want = _table_range(leaves, edges, departing, n_bins)
        assert got == want, (trial, n_leaves, n_bins)
