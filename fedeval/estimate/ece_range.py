"""How far the examples behind a release's leaves may move its ECE: the discretisation range
of `fedeval.estimate.ece`'s interval (the worst case, every example anywhere inside its leaf,
and the smooth reading where the release shows the leaves smooth, with the data's sampling
given the counts), read exactly where the leaves across bin edges form a chain.

Split from `fedeval.estimate.ece` (the estimate and its noise interval), which states the
model; this module holds the placement of examples inside their leaves and its bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple, ParamSpec

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog

from fedeval.estimate.ece import (
    bin_gaps,
    class_tilt,
    leaf_bins,
    slope_caps,
    split_gaps,
    split_geometry,
)

P = ParamSpec("P")


def discretisation_parts(
    leaves: np.ndarray,
    edges: np.ndarray,
    departing: np.ndarray,
    n_bins: int,
    *,
    joint: bool = True,
    smooth: np.ndarray | None = None,
) -> tuple[float, float, float, float]:
    """(below, above, sampling below, sampling above): how far the ECE of the examples behind
    leaves (2, L) with these L + 1 edges may sit below and above the leaves' plug-in Σ|D_b|/N
    (each leaf's mass at its midpoint, in the bin of its midpoint), given how many of each
    leaf's examples depart from smooth (`fedeval.estimate.smoothness.departures`, (2, L)).
    Counts clamped at 0.

    A leaf inside one bin moves D_b by at most its count times half its width (placing its
    examples anywhere in it). A leaf across a bin edge (an edge of the M bins is no leaf
    edge) holds examples of both bins: its smooth part is read whole in the bin of its
    midpoint (as the plug-in reads it) or split between them in proportion to the overlap (a
    uniform density, give or take the binomial sampling of the few examples a fine leaf
    holds), each reading with every example placed anywhere in its part; its
    departing examples may be any subset in either bin, adding [−e₋·t, e₊·(1 − u)] to a bin
    it overlaps on [u, t]. Under each reading, each bin's D_b lies in a range [lo_b, hi_b];
    the range is the hull over the two readings. A leaf across a bin edge places its parts
    once for both its bins (its share s in one, 1 − s in the other; each departing example in
    one of them), so Σ|D_b| is bounded jointly (`joint`): where each such leaf crosses one edge
    (the bins then form a chain, each edge crossed by one leaf at most), its maximum is a
    dynamic programme along the bins over the corners of each leaf's placements (a convex
    function's maximum sits at a corner), its minimum a small linear programme; both exact
    (`tests/test_ece_discretisation.py` checks them against every placement). Treating the
    bins apart (Σ min|D_b|, Σ max|D_b|) counted such a leaf's mass in the worst case of both
    bins (tree scores, distdp ε = 1, h = 7: [0.020, 0.084] around a true 0.052, the same
    counts reaching 0.048–0.055; now [0.047, 0.059]); that outer bound is kept where no leaf
    crosses a bin edge (the same result, bit for bit) and with `joint` False, and for the bins
    of a leaf across two edges or more (a few leaves against the M bins). On smooth data that
    is the mass-weighted half leaf (the bound was the widest leaf's half before) and what
    splitting moves; where leaves across a bin edge hold a point mass or a class squeezed into
    a few leaves, the mass's worst case (squeezed scores: the plug-in read 0.281 of a true
    0.263 at 64 leaves, 34% of the examples in leaves across a bin edge).

    `smooth` (2, L; `smooth_offsets`): where given, each leaf's smooth part (its examples less
    the departing ones) is not placed anywhere inside its part but where a density smooth
    across the leaf's parent puts it: its examples' scores sum to its part's centre times
    their count, give or take the leaf's bound on Σ (s − centre) in each class (the slope the
    parent's two children show) and their sampling inside the part (each spread over its
    part's width w: variance ≤ w²/12), neither wider than the worst case. A leaf across a bin
    edge is then read split alone: a smooth density splits each class by the overlap f and
    its slope (reading it whole is the plug-in's error, not a place its examples may sit),
    Binomial(P, p₊) positives and Binomial(N, p₋) negatives on the left, so the gap it
    carries across the edge is the reading's give or take their binomial spread, drawn with
    the rest of the sampling (`_sampling_band`: the sum's 95 % points, the discrete coin flip
    of a leaf holding one to three examples as it falls). On
    smooth scores that is the sampling of the data, not a worst case: binormal scores, 100k
    rows, distdp ε = 1, h = 7: 1.0e-3 of width against 7.8e-3 (the truth 2.7e-5 from the
    midpoint reading). None: the worst case for every example (as before)."""
    counts = np.clip(np.asarray(leaves, dtype=np.float64), 0.0, None)
    total = float(counts.sum())
    if not total > 0:
        return 0.0, 0.0, 0.0, 0.0
    lo_e, hi_e = edges[:-1], edges[1:]
    mid = (lo_e + hi_e) / 2
    # Each (leaf, bin) pair where the leaf overlaps the bin or is assigned to it, in the order
    # of (leaf, bin): every other pair adds ±0 to each bin's sums below, so the sums over these
    # pairs (`np.bincount`, in leaf order) are those over the whole (L, M) table, bit for bit,
    # in memory of a few entries a leaf instead of M.
    geometry = split_geometry(edges, n_bins)
    leaf, b, f = geometry.leaf, geometry.b, geometry.f
    lo_l, hi_l = lo_e[leaf], hi_e[leaf]
    ol, oh = geometry.at_lo, geometry.at_hi  # each pair's part of its leaf (the outer bins open)
    overlap = np.clip(oh - ol, 0.0, None)
    assigned = leaf_bins(mid, n_bins)[leaf] == b
    straddle = (np.bincount(leaf, overlap > 0, minlength=len(lo_e)) > 1)[leaf]
    e_n = np.minimum(np.asarray(departing[0], dtype=np.float64), counts[0])
    e_p = np.minimum(np.asarray(departing[1], dtype=np.float64), counts[1])
    sn, sp = (counts[0] - e_n)[leaf], (counts[1] - e_p)[leaf]

    def by_bin(x: np.ndarray) -> np.ndarray:
        if n_bins == 1:  # one entry a leaf: the (L, 1) table's own (pairwise) sum
            one: npt.NDArray[np.float64] = x.reshape(-1, 1).sum(axis=0)
            return one
        return np.bincount(b, x, minlength=n_bins)

    ep, en = e_p[leaf], e_n[leaf]
    t, u = np.minimum(oh, hi_l), np.maximum(ol, lo_l)
    pair_lo = np.where(straddle, -en * t, ep * (1 - hi_l) - en * hi_l)
    pair_hi = np.where(straddle, ep * (1 - u), ep * (1 - lo_l) - en * lo_l)
    # Leaves across one bin edge are read jointly; a leaf across two or more (a few leaves
    # against the M bins) keeps its bins apart (an outer bound).
    one_edge = straddle & (np.bincount(leaf, minlength=len(lo_e))[leaf] == 2)
    joint = joint and one_edge.any() and _chain(leaf[one_edge], b[one_edge])
    dep_lo = by_bin(np.where(one_edge, 0.0, pair_lo) if joint else pair_lo)
    dep_hi = by_bin(np.where(one_edge, 0.0, pair_hi) if joint else pair_hi)
    low, high = np.inf, -np.inf
    # The split's share is the overlap's up to the sampling of the few examples a fine leaf
    # holds: Binomial(m, f) of them fall on one side, f ± Z95·√(f(1 − f)/m).
    m_s = sp + sn
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(m_s > 0, np.sqrt(f * (1 - f) / m_s), 0.0)
    whole = assigned.astype(float)
    lo_s, hi_s = np.clip(f - 1.96 * spread, 0.0, 1.0), np.clip(f + 1.96 * spread, 0.0, 1.0)
    swap = np.zeros(len(leaf))
    if smooth is not None:
        # Smooth: each class splits by the overlap on its own, Binomial(P, f) positives and
        # Binomial(N, f) negatives on one side, so the gap carried across the edge is f·g
        # give or take a variance f(1 − f)·(P(1 − c)² + N·c²) (c the leaf's centre): the
        # data's sampling, which `_sampling_band` adds (the split itself is read at f).
        lo_s = hi_s = np.where(straddle, f, whole)
        c = mid[leaf]
        swap = np.where(
            straddle, np.clip(f * (1 - f) * (sp * (1 - c) ** 2 + sn * c * c), 0, None), 0
        )
    # The split reading differs from the whole one only at pairs whose share moves (a leaf
    # across a bin edge, or one with examples outside it): elsewhere every entry below is
    # the same, so it is computed once and only the moved pairs afresh (elementwise: the same
    # values, so the bins' sums are the same bit for bit).
    moved = np.flatnonzero((lo_s != whole) | (hi_s != whole))
    offset = None if smooth is None else np.clip(np.asarray(smooth, dtype=np.float64), 0.0, None)
    place = _Placing(
        assigned,
        ol,
        oh,
        lo_l,
        hi_l,
        sp,
        sn,
        one_edge if joint else None,
        None if offset is None else (offset[0] + offset[1])[leaf],
    )
    first = place.at(slice(None), whole, whole)
    split = tuple(a.copy() for a in first)
    for a, part in zip(split, place.at(moved, lo_s[moved], hi_s[moved]), strict=True):
        a[moved] = part
    readings = [((whole, whole), first), ((lo_s, hi_s), split)]
    if offset is not None:  # a smooth density splits a leaf across a bin edge by the overlap
        readings = readings[1:]
    tilted = np.zeros(n_bins)
    tilt = np.zeros((2, len(leaf)))
    if offset is not None:  # the classes' slopes across a leaf move its split (`split_gaps`)
        ends = np.stack([ol, oh])
        # its parts are these ends; the slopes a density cannot have at the bound
        tilt = class_tilt(counts[None], geometry, slope_caps(counts, geometry))[0]
        c_part = ends.mean(axis=0)
        tilted = by_bin((1 - c_part) * tilt[1] - c_part * tilt[0])
    for (share_lo, share_hi), (g_lo, g_hi, c_min, c_max) in readings:
        d_lo = by_bin(c_min) + dep_lo + tilted
        d_hi = by_bin(c_max) + dep_hi + tilted
        if joint:  # the straddling leaves' parts placed once for both their bins
            cand = _straddle_points(one_edge, b, share_lo, share_hi, g_lo, g_hi, ep, en, u, t)
            low = min(low, _least_sum(d_lo, d_hi, cand))
            high = max(high, _most_sum(d_lo, d_hi, cand))
            continue
        least = np.where((d_lo <= 0) & (d_hi >= 0), 0.0, np.minimum(np.abs(d_lo), np.abs(d_hi)))
        low = min(low, float(least.sum()))
        high = max(high, float(np.maximum(np.abs(d_lo), np.abs(d_hi)).sum()))
    s_below = s_above = 0.0
    if offset is None:
        plug = float(np.abs(bin_gaps(counts, mid, n_bins)).sum())
    else:  # about the smooth reading, which the estimate then reads (`ece_estimate`'s edges)
        gaps = split_gaps(counts, edges, n_bins, tilt=tilt)
        plug = float(np.abs(gaps).sum())
        m, part = place.parts(hi_s)
        left = np.flatnonzero(one_edge)[0::2]
        # What the reading puts in each leaf's left part of each class (`split_gaps`: the
        # overlap's share and the class's slope's tilt), of its smooth examples.
        read_p, read_n = f[left] * sp[left] + tilt[1, left], f[left] * sn[left] + tilt[0, left]
        carried = _Carried(sp[left], sn[left], read_p, read_n, mid[leaf[left]])
        s_below, s_above = _sampling_band(
            gaps, by_bin(m * part * part / 12.0), swap, b, one_edge, carried
        )
    return (
        max(plug - low, 0.0) / total,
        max(high - plug, 0.0) / total,
        s_below / total,
        s_above / total,
    )


def _sampling_added(
    parts: Callable[P, tuple[float, float, float, float]], name: str, doc: str
) -> Callable[P, tuple[float, float]]:
    """`parts`' (below, above) with its sampling band (below, above) added to each side."""

    def added(*args: P.args, **kwargs: P.kwargs) -> tuple[float, float]:
        below, above, s_below, s_above = parts(*args, **kwargs)
        return below + s_below, above + s_above

    added.__name__ = added.__qualname__ = name
    added.__doc__ = doc
    return added


discretisation_range = _sampling_added(
    discretisation_parts,
    "discretisation_range",
    """`discretisation_parts` (same arguments) with its sampling band added to its range, side
    by side: a range, not a spread to add in quadrature to the noise's. For one data set the
    sampling inside its leaves is a fixed offset, not a draw: added in quadrature, an offset at
    the band's edge left the noise ~1σ on its side (binormal scores, 100k rows, distdp ε = 1,
    data draw 0, its truth 2.0 sampling SDs from the smooth reading: held 0.930 over 300
    releases; 0.997 added); added, the interval holds every data set whose sampling is inside
    its band at the noise's level.""",
)


class _Placing:
    """Where each (leaf, bin) pair's smooth examples may sit under a reading of its share
    (share_lo, share_hi): the gaps at the two ends of its part (g_lo, g_hi) and the least and
    most its part adds to the bin (over the four corners; 0 at `fixed` pairs, which the joint
    range places itself), for the pairs `rows` (a slice or indices) alone. With `offset` (each
    pair's leaf's bound on its smooth part's |Σ (s − centre)|, both classes), the part sits at
    its centre give or take that bound (`smooth_offsets`), within the worst case."""

    def __init__(
        self,
        assigned: np.ndarray,
        ol: np.ndarray,
        oh: np.ndarray,
        lo_l: np.ndarray,
        hi_l: np.ndarray,
        sp: np.ndarray,
        sn: np.ndarray,
        fixed: np.ndarray | None,
        offset: np.ndarray | None = None,
    ) -> None:
        self.arrays = (assigned, ol, oh, lo_l, hi_l, sp, sn)
        self.fixed = fixed
        self.offset = offset

    def parts(self, share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each pair's smooth examples in its bin, its part's width) under a reading whose
        largest share is `share`."""
        assigned, ol, oh, lo_l, hi_l, sp, sn = self.arrays
        whole = assigned & (share == 1.0)
        width = np.where(whole, hi_l - lo_l, np.minimum(oh, hi_l) - np.maximum(ol, lo_l))
        return share * (sp + sn), np.where(share > 0, np.clip(width, 0.0, None), 0.0)

    def at(
        self, rows: slice | np.ndarray, share_lo: np.ndarray, share_hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        assigned, ol, oh, lo_l, hi_l, sp, sn = (a[rows] for a in self.arrays)
        inside = share_hi > 0
        whole = assigned & (share_lo == 1.0)
        at_lo = np.where(whole, lo_l, np.where(inside, np.maximum(ol, lo_l), 0.0))
        at_hi = np.where(whole, hi_l, np.where(inside, np.minimum(oh, hi_l), 0.0))
        g_lo, g_hi = _gap(sp, sn, at_hi), _gap(sp, sn, at_lo)
        if self.offset is not None:  # smooth inside the part: at its centre, ± the bound
            g_mid = _gap(sp, sn, (at_lo + at_hi) / 2)
            off = self.offset[rows]
            g_lo, g_hi = np.maximum(g_lo, g_mid - off), np.minimum(g_hi, g_mid + off)
        # The four corners' least and most, taken corner after corner (the order a reduce over
        # their stack takes: the same values, without the (4, pairs) stack).
        corners = (share_lo * g_lo, share_lo * g_hi, share_hi * g_lo, share_hi * g_hi)
        least, most = corners[0], corners[0]
        for corner in corners[1:]:
            least, most = np.minimum(least, corner), np.maximum(most, corner)
        if self.fixed is not None:
            fixed = self.fixed[rows]
            least, most = np.where(fixed, 0.0, least), np.where(fixed, 0.0, most)
        return g_lo, g_hi, least, most


def _gap(pos: np.ndarray, neg: np.ndarray, score: np.ndarray) -> npt.NDArray[np.float64]:
    """A part's D_b: its positives' (1 − s) less its negatives' s, at score s."""
    gap: npt.NDArray[np.float64] = pos * (1.0 - score) - neg * score
    return gap


class _Carried(NamedTuple):
    """Each leaf across one bin edge (its left pair): its smooth positives and negatives, how
    many of each the reading puts in its left part, and its centre (where its examples' gaps
    are read)."""

    pos: np.ndarray
    neg: np.ndarray
    read_pos: np.ndarray
    read_neg: np.ndarray
    centre: np.ndarray


SAMPLING_DRAWS = 4000
"""Draws of the data's sampling given the counts (`_sampling_band`): the 2.5 % and 97.5 %
points of a sum of discrete and normal parts, each within ±0.005 in probability (its SD
√(0.025·0.975/4000) = 0.0025)."""

BINOMIAL_MAX = 64
"""Above this many examples of a class a leaf's split is drawn as the normal of its mean and
variance (`_carry_draws`): its binomial's 2.5 % and 97.5 % points are then within one example
of the normal's."""

SAMPLING_SEED = 25
"""The sampling draws' fixed seed: the band is a function of the counts (post-processing of
the release, no privacy noise), the same for the same release."""


def _carry_draws(rng: np.random.Generator, count: np.ndarray, read: np.ndarray) -> np.ndarray:
    """(draws, leaves): how many of each leaf's `count` examples of a class fall in its left
    part beyond the `read` the reading puts there: Binomial(n, p) − `read`, p = read/count in
    [0, 1] (a smooth density's chance of the part) and n the count rounded (a noisy count is
    no integer), scaled back to the count. Where the slope's tilt reads more than the count
    (or any of a class the leaf lacks) the excess is a fixed offset, as the truth sees it."""
    n = np.rint(np.clip(count, 0.0, None)).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        chance = np.where(count > 0, np.clip(read / count, 0.0, 1.0), 0.0)
    # A leaf of many examples splits as a normal does (the coin flips are what few examples
    # make; numpy's binomial draws cost 12 ms a release at a noisy leaf's thousands).
    few = n <= BINOMIAL_MAX
    k = np.empty((SAMPLING_DRAWS, len(n)))
    k[:, few] = rng.binomial(n[few], chance[few], size=(SAMPLING_DRAWS, int(few.sum())))
    m, q = n[~few], chance[~few]
    k[:, ~few] = m * q + rng.standard_normal((SAMPLING_DRAWS, len(m))) * np.sqrt(m * q * (1 - q))
    scale = np.where(n > 0, count / np.maximum(n, 1), 0.0)
    out: np.ndarray = k * scale - read
    return out


def _sampling_band(
    gaps: np.ndarray,
    within: np.ndarray,
    swap: np.ndarray,
    b: np.ndarray,
    one_edge: np.ndarray,
    carried: _Carried,
) -> tuple[float, float]:
    """(below, above): where Σ_b |D_b + E_b| − Σ_b |D_b| sits at 95 % (its 2.5 % and 97.5 %
    points), E_b the data's sampling given the leaf counts, drawn (`SAMPLING_DRAWS`, a fixed
    seed): each bin's smooth examples spread inside their parts (normal, variance `within`,
    independent between bins), and each leaf across one bin edge splitting its classes
    binomially, Binomial(P, p₊) positives and Binomial(N, p₋) negatives in its left part (p
    the reading's share of each class, `_Carried`), what it carries into one bin, read at the
    leaf's centre c, (k₊ − P·p₊)(1 − c) − (k₋ − N·p₋)·c, leaving the other. A leaf across two
    edges or more adds a normal of variance 4·swap to the sum (either sign in each bin).

    The binomial is the point at exact sums: at height 16 a leaf across a bin edge holds one
    to three examples, and where the gaps change sign at that edge one example on the
    unlikely side (chance 0.06 with two examples at a share of 0.97) moves Σ|D_b| by about
    twice its gap. The normal band the delta method gave (mean of the folded normal ± Z95 of
    the SD at the soft signs 2Φ(D/σ) − 1) put that at ±0.66 examples against the 0.8–0.9 it
    moves, and held the truth in 0.85–0.92 of data draws (`benchmarks/ece_width.py`,
    smooth and bimodal, federated, h = 16, 100k rows). Drawn, the sum's quantiles carry the
    coin flip and the fold at D_b ≈ 0 (the folded normal) as they fall."""
    rng = np.random.default_rng(SAMPLING_SEED)
    n_bins = len(gaps)
    draws = rng.standard_normal((SAMPLING_DRAWS, n_bins)) * np.sqrt(np.clip(within, 0.0, None))
    pairs = np.flatnonzero(one_edge)
    left, right = b[pairs[0::2]], b[pairs[1::2]]
    if len(left):
        c = carried.centre
        moved = (
            _carry_draws(rng, carried.pos, carried.read_pos) * (1 - c)
            - _carry_draws(rng, carried.neg, carried.read_neg) * c
        )
        rows = n_bins * np.arange(SAMPLING_DRAWS)[:, None]
        flat = draws.ravel()
        flat += np.bincount((rows + left).ravel(), moved.ravel(), minlength=flat.size)
        flat -= np.bincount((rows + right).ravel(), moved.ravel(), minlength=flat.size)
        draws = flat.reshape(SAMPLING_DRAWS, n_bins)
    err = np.abs(gaps + draws).sum(axis=1) - float(np.abs(gaps).sum())
    wide = float(np.sum(4.0 * np.clip(swap[~one_edge], 0.0, None)))
    if wide > 0:
        err = err + rng.standard_normal(SAMPLING_DRAWS) * math.sqrt(wide)
    q_lo, q_hi = np.quantile(err, [0.025, 0.975])
    return max(-float(q_lo), 0.0), max(float(q_hi), 0.0)


def smooth_offsets(leaves: np.ndarray, edges: np.ndarray) -> npt.NDArray[np.float64]:
    """A bound on |Σ (s − c)| over each leaf's examples of each class (2, L), c the leaf's
    centre, where the density is smooth across the leaf's parent: a density linear across the
    parent (β its slope, in examples per unit score per unit score) puts β·w³/12 there (w the
    leaf's width: ∫ (s − c)·(a + β(s − c)) ds over the leaf), and its two children's
    densities n/w give β = (n_U/w_U − n_L/w_L) / ((w_L + w_U)/2), read on the noisy counts
    (clamped at 0): the noise only adds to |β| on average (E|β + η| ≥ |β|), and the bound is
    summed over many leaves. (Adding Z95 of the noise's SD to each leaf's |β| as well doubled
    the term under localdp ε = 5, 32 leaves: 1.2e-3 a side against 5.7e-4, on binormal scores
    whose exact counts give 2e-4.) Never above the leaf's worst case, n·w/2 (every example at
    one end). A leaf count that is odd has no parents: its worst case."""
    counts = np.clip(np.asarray(leaves, dtype=np.float64), 0.0, None)
    width = np.diff(np.asarray(edges, dtype=np.float64))
    worst = counts * width / 2.0
    n_leaves = counts.shape[-1]
    if n_leaves % 2:
        return worst
    w_l, w_u = width[0::2], width[1::2]
    pair = (w_l + w_u) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(pair > 0, 1.0 / pair, 0.0)
        inv_l = np.where(w_l > 0, 1.0 / w_l, 0.0)
        inv_u = np.where(w_u > 0, 1.0 / w_u, 0.0)
    diff = np.abs(counts[:, 1::2] * inv_u - counts[:, 0::2] * inv_l)
    slope = np.repeat(diff * step, 2, axis=-1)
    bound: npt.NDArray[np.float64] = np.minimum(slope * width**3 / 12.0, worst)
    return bound


def _chain(leaf: np.ndarray, b: np.ndarray) -> bool:
    """Whether the straddling (leaf, bin) pairs form a chain the joint range reads exactly:
    each straddling leaf across one bin edge (two pairs, adjacent bins), each edge crossed by
    one leaf at most. Wider leaves (a few leaves against the M bins) keep the per-bin bound."""
    if len(leaf) % 2:
        return False
    left, right = slice(0, None, 2), slice(1, None, 2)
    same = bool(np.all(leaf[left] == leaf[right]))
    return same and bool(np.all(b[right] == b[left] + 1)) and bool(np.all(np.diff(b[left]) > 0))


def _straddle_points(
    straddle: np.ndarray,
    b: np.ndarray,
    share_lo: np.ndarray,
    share_hi: np.ndarray,
    g_lo: np.ndarray,
    g_hi: np.ndarray,
    ep: np.ndarray,
    en: np.ndarray,
    u: np.ndarray,
    t: np.ndarray,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """For each leaf across a bin edge (pairs in `_chain` order): the edge it crosses (its right
    bin) and the corners of what it adds to its (left, right) bins, one part a row of shape
    (S, K, 2): its smooth part (its share s in the left bin at either end of its range, 1 − s
    in the right — the two bins' share ranges are each other's complement —, each bin's part
    at either end of its overlap: 8), its departing positives all in one bin at one end (4),
    its departing negatives likewise (4). Each part's possible additions are the convex hull
    of its corners (each is linear in the share or the split and the places, inside a box),
    and the leaf's the sum of its parts'."""
    idx = np.flatnonzero(straddle)
    lt, rt = idx[0::2], idx[1::2]
    smooth = np.stack(
        [
            np.stack([s_l * gl, s_r * gr], axis=-1)
            for s_l, s_r in ((share_lo[lt], share_hi[rt]), (share_hi[lt], share_lo[rt]))
            for gl in (g_lo[lt], g_hi[lt])
            for gr in (g_lo[rt], g_hi[rt])
        ],
        axis=1,
    )
    zero = np.zeros(len(lt))
    p, n = ep[lt], en[lt]
    pos = np.stack(
        [
            np.stack(pt, axis=-1)
            for pt in (
                (p * (1 - u[lt]), zero),
                (p * (1 - t[lt]), zero),
                (zero, p * (1 - u[rt])),
                (zero, p * (1 - t[rt])),
            )
        ],
        axis=1,
    )
    neg = np.stack(
        [
            np.stack(pt, axis=-1)
            for pt in (
                (-n * u[lt], zero),
                (-n * t[lt], zero),
                (zero, -n * u[rt]),
                (zero, -n * t[rt]),
            )
        ],
        axis=1,
    )
    return b[rt], [smooth, pos, neg]


def _most_sum(
    d_lo: np.ndarray, d_hi: np.ndarray, cand: tuple[np.ndarray, list[np.ndarray]]
) -> float:
    """max Σ_b |D_b| with D_b in [d_lo_b, d_hi_b] plus what the leaves across its edges add,
    each such leaf's addition chosen once for both its bins. A convex function's maximum over
    the product of the leaves' hulls sits at a corner of each, and the bins form a chain (a
    leaf adds to the two bins beside the edge it crosses), so a dynamic programme along the
    bins over each edge's corners gives it exactly."""
    edge, parts = cand
    corners = parts[0]
    for part in parts[1:]:  # the Minkowski sum's corners: every sum of the parts' corners
        corners = (corners[:, :, None, :] + part[:, None, :, :]).reshape(len(edge), -1, 2)
    n_bins = len(d_lo)
    at_edge: list[np.ndarray] = [np.zeros((1, 2))] * (n_bins + 1)
    for j, e in enumerate(edge):
        at_edge[int(e)] = np.unique(corners[j], axis=0)
    best = np.zeros(1)
    for bin_ in range(n_bins):
        z = at_edge[bin_][:, 1, None] + at_edge[bin_ + 1][None, :, 0]
        cost = np.maximum(np.abs(d_lo[bin_] + z), np.abs(d_hi[bin_] + z))
        best = (best[:, None] + cost).max(axis=0)
    return float(best[0])


def _least_sum(
    d_lo: np.ndarray, d_hi: np.ndarray, cand: tuple[np.ndarray, list[np.ndarray]]
) -> float:
    """min Σ_b dist(0, [d_lo_b, d_hi_b] + what the leaves across its edges add), each such
    leaf's addition chosen once for both its bins: a linear programme (each leaf's addition a
    convex combination of its parts' corners, |·| as t_b ≥ 0, t_b ≥ d_lo_b + z_b,
    t_b ≥ −d_hi_b − z_b), solved by HiGHS and read back at its solution's weights (clipped to
    the simplex), so the value is one the leaves can reach."""
    edge, parts = cand
    n_bins, n_leaf = len(d_lo), len(edge)
    sizes = [part.shape[1] for part in parts]
    n_w = n_leaf * sum(sizes)
    # z = A @ w: row b of A adds each corner's coordinate to the bin it falls in.
    add = np.zeros((n_bins, n_w))
    eq = np.zeros((n_leaf * len(parts), n_w))
    col = 0
    for j, e in enumerate(edge):
        for k, part in enumerate(parts):
            cols = slice(col, col + part.shape[1])
            add[int(e) - 1, cols] = part[j, :, 0]
            add[int(e), cols] = part[j, :, 1]
            eq[j * len(parts) + k, cols] = 1.0
            col += part.shape[1]
    eye = np.eye(n_bins)
    a_ub = np.block([[add, -eye], [-add, -eye]])
    b_ub = np.concatenate([-d_lo, d_hi])
    cost = np.concatenate([np.zeros(n_w), np.ones(n_bins)])
    a_eq = np.hstack([eq, np.zeros((len(eq), n_bins))])
    bounds = [(0.0, None)] * (n_w + n_bins)
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(len(eq)), bounds=bounds)
    x = res.x
    if res.status != 0 or x is None:  # not on a feasible, bounded programme: the per-bin bound
        z_lo, z_hi = np.zeros(n_bins), np.zeros(n_bins)
        for side in (0, 1):
            for part in parts:
                np.add.at(z_lo, edge - 1 + side, part[:, :, side].min(axis=1))
                np.add.at(z_hi, edge - 1 + side, part[:, :, side].max(axis=1))
        return float(np.maximum(np.maximum(d_lo + z_lo, 0.0), -(d_hi + z_hi)).sum())
    w = np.clip(x[:n_w], 0.0, None)
    w = w / (eq.T @ (eq @ w))  # each part's weights summing to 1
    z = add @ w
    reached = float(np.maximum(np.maximum(d_lo + z, 0.0), -(d_hi + z)).sum())
    fun = res.fun  # the solver's value, where its tolerance sits lower
    return reached if fun is None else min(reached, float(fun))
