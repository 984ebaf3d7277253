"""Where a release shows its scores smooth at the resolution it was read at, and where not.

Below a leaf the release says nothing: the AUC counts each (positive, negative) pair sharing a
leaf as ½, the AP mixes each leaf's examples uniformly, and the smooth corrections of both
(Richardson steps, `fedeval.evaluate.auc_discretisation_bias`, `leaf_ap_candidates`) and the
random-order spreads (`within_bucket_auc_variance`, `shuffled_ap`) assume that inside a leaf
the scores continue the trend the leaves show. Point masses, scores rounded to a grid, clipped
at 0 or 1, squeezed into a few cells, or one class on a single value break that assumption, and
the error is then a fixed bias of up to the within-leaf worst case (±Σ pᵢnᵢ/(2PN) for the AUC),
not the O(w²) the corrections remove.

What the release can check is the level above: under a density smooth at the scale of a
parent cell (two leaves), the parent's count splits between its children as the density read
from its neighbouring parents predicts. A quadratic through the counts of parents j − 1, j,
j + 1 (each the integral over its own width in the scores' units, so that a warped axis reads
right) predicts the upper child's count; with equal widths that is X/2 + (X₊ − X₋)/16, and it is
exact for any quadratic density; at either end of the range a line through the parent and its
one neighbour. The residual r = upper child − prediction is zero up to the sampling of the data
(Poisson: Σ wₖ²·cₖ over the counts it combines) and the privacy noise (its spread over fresh
noise draws on the release); a point mass, a grid value alone in a leaf, a cliff or a class
squeezed into a few leaves leaves a residual of the order of its own mass. A parent whose
residual exceeds `ROUGH_SDS` of that spread in a class is rough in that class, and the fewest
departing examples that make its residual (`departures`) get the worst case: for the AUC the
pairs they form inside their leaf (`auc_parts`), for the AP the orders and ties they can take
(`rough_ap_reach`); the rest of the leaf keeps the smooth treatment. A parent within that
spread is read as smooth: where noise and sampling dominate the counts the release cannot tell
it from smooth, and their spread is the interval's σ already. Where a smooth density bends too
fast for the quadratic (a class peaking within two coarse leaves), the residual flags it: the
departure is then the misfit alone, paired with the other class's count in that leaf, which
stays small where that class is rare. No test of this kind sees a structure finer than a leaf
that repeats in every leaf (a grid with several values per leaf reads as smooth); there the
AUC's range still runs from the ½-counting (exact for ties) to the extrapolated value, while
the AP's candidates keep the step rule only below 32 leaves (`leaf_ap_candidates`).

All of it is post-processing of the release and its noise draws (no data is read).
"""

from __future__ import annotations

from typing import Literal, TypeAlias, overload

import numpy as np
import numpy.typing as npt
from scipy.special import digamma

from fedeval.core.hierarchy import monotone_cumulative
from fedeval.estimate.metrics import auc_from_buckets
from fedeval.estimate.residual_weights import (
    _own_of,
    _residual_weights,
    _residuals,
    _sampling_variance,
    uniform_edges,
)
from fedeval.estimate.uncertainty import Z95, noise_sd

Floats: TypeAlias = npt.NDArray[np.float64]
"""An array of float64 (counts, sums and ratios of them)."""

RICHARDSON_MIN_CELLS = 8
"""The fewest leaves (or buckets) at which the AUC's discretisation bias is extrapolated, and
below which every leaf gets the worst case: with fewer, the cells are too wide for the bias to
shrink as a power of their width."""

ROUGH_SDS = 4.0
"""A parent is rough where its residual is beyond this many sds of sampling and noise in a
class. A false alarm only widens the interval (its departing examples get their worst case),
so the level is set against false alarms: at 4σ one parent in ~16,000 of smooth data."""


def smoothness_residuals(class_leaves: np.ndarray, edges: np.ndarray | None = None) -> Floats:
    """Each parent's residual r (`_residual_weights`) for one class's leaves (..., L), L even,
    shape (..., L/2); `edges` the leaves' L + 1 edges in the scores' units (None: equal)."""
    x = np.asarray(class_leaves, dtype=np.float64)
    n_leaves = x.shape[-1]
    w, index, _ = _residual_weights(uniform_edges(n_leaves) if edges is None else edges)
    return _residuals(x, w, index)


def _residual_stats(
    leaves: np.ndarray, draws: np.ndarray | None, edges: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(residuals (2, L/2), their spreads (2, L/2), readable (L/2,)) of leaves (2, L), L ≥ 4
    even: the spread combines the data's sampling (Poisson on the clamped counts) and the
    noise's (over the draws (D, 2, L), None without noise)."""
    n_leaves = leaves.shape[-1]
    w, index, readable = _residual_weights(uniform_edges(n_leaves) if edges is None else edges)
    r = _residuals(leaves, w, index)
    var = np.stack([_sampling_variance(w, index, np.clip(leaves[c], 0.0, None)) for c in (0, 1)])
    if draws is not None and len(draws) > 1:
        var = var + _noise_variance(np.asarray(draws), w, index)
    return r, np.sqrt(var), readable


_NOISE_KEPT_BYTES = 64 << 20
"""Noise draws up to this size have their residuals' variance kept (`_noise_variance`)."""

_noise_cache: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []


def _noise_variance(draws: np.ndarray, w: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The variance over the draws (D, 2, L) of each parent's residual (2, L/2): the noise's
    share of the residuals' spread.

    One evaluation reads the same release and draws four times (the AUC's interval twice, the
    AP's and the ECE's once), and this is most of `departures`' cost (200 draws of 1,024
    leaves: 9 ms a call), so the last result is kept with a copy of the draws it was computed
    from and reused only when the draws are equal, value for value, and the weights the same
    (`_residual_weights` keeps them): the same array bit for bit as computing it again."""
    for kept_w, kept_draws, kept_var in list(_noise_cache):
        same = kept_draws.shape == draws.shape and kept_draws.dtype == draws.dtype
        if kept_w is w and same and np.array_equal(kept_draws, draws):
            return kept_var
    noise = _residuals(draws, w, index)
    var: np.ndarray = np.var(noise, axis=0, ddof=1)
    if draws.nbytes <= _NOISE_KEPT_BYTES:
        var.flags.writeable = False
        _noise_cache[:] = [(w, np.array(draws, copy=True), var)]  # (one assignment: thread-safe)
    return var


def rough_parents(
    leaves: np.ndarray, draws: np.ndarray | None = None, edges: np.ndarray | None = None
) -> np.ndarray:
    """Which parents (pairs of leaves 2j, 2j + 1) of consistent leaves (2, L) the release shows
    not smooth (bool, L/2): a residual beyond ROUGH_SDS spreads in either class, the spread
    combining the data's sampling (Poisson on the clamped counts) and the noise's (over the
    draws (D, 2, L) on the release, None without noise). `edges`: the leaves' L + 1 edges in
    the scores' units (the release axis' `leaf_edges`; None: equal widths). Every parent is
    rough below 4 leaves (no neighbour to read a density from) or with an odd number of
    leaves."""
    leaves = np.asarray(leaves, dtype=np.float64)
    n_leaves = leaves.shape[-1]
    if n_leaves < 4 or n_leaves % 2:
        return np.ones(max(n_leaves // 2, 1), bool)
    r, sd, readable = _residual_stats(leaves, draws, edges)
    rough: npt.NDArray[np.bool_] = ~readable | np.any(np.abs(r) > ROUGH_SDS * sd + 1e-9, axis=0)
    return rough


def departures(
    leaves: np.ndarray,
    draws: np.ndarray | None,
    edges: np.ndarray | None,
    min_cells: int,
    reading: np.ndarray | None = None,
) -> np.ndarray:
    """How many examples of each leaf (..., 2, L; negatives, positives) the release shows
    departing from a density smooth across its parent and their neighbours, read on
    `reading` (..., 2, L; default the release; the release with fresh noise on it gives the
    spread the interval's σ takes), which parents depart decided once on the release.

    Read the leaves of a parent as a smooth part, which splits between them as the smooth
    density predicts, plus departing examples d_L, d_U ≥ 0 in the lower and upper leaf. The
    residual is then r = w_U·d_U + w_L·d_L (w_U > 0 > w_L: the leaves' own weights in it, ±½
    for an interior parent of equal widths). A parent whose |r| is within ROUGH_SDS of its
    spread s (sampling and noise) in a class shows nothing the smooth reading cannot
    explain: none of its mass departs in that class (what the release cannot tell from
    smooth is read as smooth; the noise and sampling of the counts are the interval's σ).
    Where |r| > ROUGH_SDS·s, the fewest departing examples that make r: r/w_U in the upper
    leaf where r > 0, |r/w_L| in the lower one where r < 0. More that cancel in r (mass in
    both leaves) the release cannot see, as it cannot see any structure finer than a leaf
    (README: what no interval from the counts can do). Where that reading comes within
    ROUGH_SDS·s (over the weight) of all the leaf holds, or beyond it (a cliff, a class
    squeezed against an empty leaf: no departure inside the parent makes r), every example of
    the parent in that class departs (a class on one value at a leaf's edge sits exactly at
    the worst case, which a reading a few examples short would miss); so below `min_cells`
    leaves, with an odd count, or where no neighbour gives a slope (inf: the within-leaf worst
    case)."""
    leaves = np.asarray(leaves, dtype=np.float64)
    n_leaves = leaves.shape[-1]
    if n_leaves < max(min_cells, 4) or n_leaves % 2:
        return np.full((2, n_leaves), np.inf)
    edges = uniform_edges(n_leaves) if edges is None else edges
    w, index, _ = _residual_weights(edges)
    r, sd, readable = _residual_stats(leaves, draws, edges)
    w_low, w_up = _own_of(w, index)
    rough = np.abs(r) > ROUGH_SDS * sd + 1e-9
    blind = ~readable | (w_up <= 0) | (w_low >= 0)

    def fewest(res: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where(res > 0, res / np.where(w_up > 0, w_up, 1.0), 0.0)
            low = np.where(res < 0, res / np.where(w_low < 0, w_low, -1.0), 0.0)
        return up, low

    upper, lower = fewest(r)
    # Within the spread of all the leaf holds, or beyond it (no departure inside the parent
    # makes r: a cliff, a class squeezed against an empty leaf): the whole parent departs.
    held = np.clip(leaves, 0.0, None)
    slack = ROUGH_SDS * sd
    whole = (upper * w_up > held[:, 1::2] * w_up - slack) & (upper > 0)
    whole |= (lower * -w_low > held[:, 0::2] * -w_low - slack) & (lower > 0)
    blind = blind | (rough & whole)
    if reading is not None:
        r = _residuals(np.asarray(reading, dtype=np.float64), w, index)
    return _departing(r, rough & ~blind, blind, w_low, w_up)


def _departing(
    r: np.ndarray, keep: np.ndarray, blind: np.ndarray, w_low: np.ndarray, w_up: np.ndarray
) -> Floats:
    """`departures`' counts (..., 2, L) from the residuals r (..., 2, L/2): where `keep` (a
    rough parent the release can read), the fewest departing examples that make r (r/w_U in
    the upper leaf where r > 0, r/w_L in the lower one where r < 0), inf where `blind`, 0
    elsewhere. Written into one array, each value divided only where it is kept: the same
    values bit for bit as dividing everywhere and selecting (`fewest`), in a third of the
    passes over 200 re-noised draws."""
    out = np.zeros((*r.shape, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(r, np.where(w_up > 0, w_up, 1.0), out=out[..., 1], where=keep & (r > 0))
        np.divide(r, np.where(w_low < 0, w_low, -1.0), out=out[..., 0], where=keep & (r < 0))
    np.copyto(out, np.inf, where=blind[..., None])
    departing: Floats = out.reshape(*r.shape[:-1], 2 * r.shape[-1])
    return departing


def with_end_leaves(departing: np.ndarray) -> np.ndarray:
    """`departures` with the range's first and last leaf departing whole, in both classes: what
    the AP's interval reads (`fedeval.api.curves`).

    Nothing lies beyond the end leaves, so the release cannot check the density inside them
    against anything on their far side: the end parent's test is a line through it and its one
    neighbour, and a density that diverges at the bound inside the last leaf (a confident
    model's sigmoid saturating: U-shaped scores, positives Beta(0.6, 0.3) against negatives
    Beta(0.3, 0.6)) splits the parent as a steep line does, within the noise of a localdp
    release. The positives then sit at the very top of the top leaf, where the AP weighs them
    most, while the smooth reading mixes them with that leaf's negatives: the AP's interval
    held the truth in 3 of 20 releases (300,000 rows, 10% positives, localdp ε = 2, h = 4),
    and in 16 of 20 with 1% positives and confident scores at ε = 5; 20 of 20 each with the end
    leaves at their worst. On smooth scores it widens the AP's interval 1.0-1.24× (sample data
    and binormal scores, distdp ε = 1, localdp ε = 2 and 5). The AUC keeps `departures`: it
    weighs every rank alike, held the truth on the same data, and the worst case of a bottom
    leaf holding most negatives would cost rare-positive data far more than it protects."""
    out = np.array(departing, dtype=np.float64, copy=True)
    out[..., 0] = np.inf
    out[..., -1] = np.inf
    return out


def beside_cliffs(
    departing: np.ndarray, leaves: np.ndarray, draws: np.ndarray | None = None
) -> np.ndarray:
    """`departing` (2, L) with, in each class, the leaves next to an empty blind parent
    departing whole (inf) where they hold examples: the leaf across each side of the parent.

    A parent is blind where no departure inside it makes its residual (`departures`: a class
    against an empty parent), but where the parent is empty the examples that make that
    residual sit in its neighbour, which the smooth reading then spreads over its whole leaf:
    515 scores in [0.010, 0.045] on leaves [0, 0.0157), [0.0157, 0.1338), … (thresholds
    declared, h = 4), the second leaf's 442 negatives read across the ECE bin edge at 0.0667,
    an ECE of 0.040 in [0.021, 0.060] around an exact 2.6e-4 with exact counts
    (`benchmarks/shapes.py`, shape S18).

    `draws` (D, 2, L), fresh draws of the release's noise: a parent then reads empty where its
    noisy count is within Z95 of its noise's spread of none, since the noise hides the empty
    parent's residual as well as its emptiness (the same S18 under distdp ε = 1 held the ECE
    in 0.82 of 100 releases with the exact-count rule alone, 0.97 with this one; localdp ε = 5
    0.84 → 0.98)."""
    out = np.array(departing, dtype=np.float64, copy=True)
    held = np.clip(np.asarray(leaves, dtype=np.float64), 0.0, None)
    n_leaves = out.shape[-1]
    if n_leaves < 4 or n_leaves % 2:
        return out
    blind = np.isinf(out[..., 0::2]) & np.isinf(out[..., 1::2])  # (2, L/2)
    parents = held[..., 0::2] + held[..., 1::2]
    empty = parents < 0.5
    if draws is not None and len(draws) > 1:
        # Under noise a parent reads empty where its count cannot be told from none.
        spread = noise_sd(draws[:, :, 0::2] + draws[:, :, 1::2])
        empty |= parents <= Z95 * spread
    cliff = blind & empty
    below = np.zeros_like(out, dtype=bool)  # the upper leaf of the parent below a cliff
    below[..., 1:-2:2] = cliff[..., 1:]
    above = np.zeros_like(out, dtype=bool)  # the lower leaf of the parent above it
    above[..., 2::2] = cliff[..., :-1]
    out[(below | above) & (held > 0)] = np.inf
    return out


@overload
def auc_parts(
    leaves: np.ndarray,
    departing: np.ndarray,
    *,
    order_variance: Literal[True] = ...,
    shares: np.ndarray | None = ...,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...


@overload
def auc_parts(
    leaves: np.ndarray,
    departing: np.ndarray,
    *,
    order_variance: Literal[False],
    shares: np.ndarray | None = ...,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, None]: ...


def auc_parts(
    leaves: np.ndarray,
    departing: np.ndarray,
    *,
    order_variance: bool = True,
    shares: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(raw AUC, smooth bias, rough half-width, smooth order variance) of leaves (..., 2, L),
    given how many examples of each leaf depart from smooth (..., 2, L; `departures`). A pair
    of a positive and a negative sharing a leaf is ordered as a smooth density orders it
    unless one of them departs; then in any order.

    - raw: the AUC counting each pair that shares a leaf as ½ (`auc_from_buckets`);
    - smooth bias: the Richardson step on the smooth parts (leaves less departing examples),
      Σⱼ (p_L·n_U − p_U·n_L)/(6PN) (p, n of the lower leaf L and upper leaf U): a third of the
      pairs a parent counts ½ that its leaves order (`shares`: each parent's own share);
    - rough half-width: Σ (e₊·n + e₋·p − e₊·e₋)/(2PN), the pairs inside a leaf that involve
      a departing example (e₊, e₋ of its p positives and n negatives; counts clamped at 0,
      departures capped at them): each counts ½ in the raw AUC and anything in [0, 1] in the
      true one, so this is their worst case, which holds for any data;
    - smooth order variance: the Mann-Whitney Σ pᵢnᵢ(pᵢ + nᵢ + 1)/12/(PN)² over the smooth
      parts (the departing pairs are inside their worst case already).
    Undefined totals give a bias of 0, a half-width of ½ and no variance; `order_variance=False`
    leaves the variance out (None)."""
    neg, pos = leaves[..., 0, :], leaves[..., 1, :]
    raw = auc_from_buckets(neg, pos)
    p_total, n_total = pos.sum(axis=-1), neg.sum(axis=-1)
    p, n = np.clip(pos, 0.0, None), np.clip(neg, 0.0, None)
    e_p = np.minimum(departing[..., 1, :], p)
    e_n = np.minimum(departing[..., 0, :], n)
    smooth_p, smooth_n = pos - e_p, neg - e_n
    lower_p, upper_p = smooth_p[..., 0::2], smooth_p[..., 1::2]
    lower_n, upper_n = smooth_n[..., 0::2], smooth_n[..., 1::2]
    pairs = lower_p * upper_n
    pairs -= upper_p * lower_n
    with np.errstate(divide="ignore", invalid="ignore"):
        if shares is None:
            bias = pairs.sum(axis=-1) / (6.0 * p_total * n_total)
        else:
            bias = (pairs * shares).sum(axis=-1) / (2.0 * p_total * n_total)
    bias = np.where(np.isfinite(bias), bias, 0.0)
    # Over the noisy totals, as the raw AUC (unbiased for P·N); the clamped counts' sums are
    # biased up by every noise-only leaf, which shrank the worst case of a class on one value
    # below the truth (0.88 of releases held it, distdp ε = 1, 100k rows).
    clamped = p.sum(axis=-1) * n.sum(axis=-1)
    noisy = p_total * n_total
    defined = (noisy > 0) & (clamped > 0)
    inside = e_p * n  # e₊·n + e₋·p − e₊·e₋, each product into one scratch array
    scratch = np.multiply(e_n, p)
    inside += scratch
    inside -= np.multiply(e_p, e_n, out=scratch)
    shared = inside.sum(axis=-1)
    half = np.where(defined, shared / (2.0 * np.where(defined, noisy, 1.0)), 0.5)
    if not order_variance:
        return raw, bias, half, None
    ps, ns = p - e_p, n - e_n
    spread = (ps * ns * (ps + ns + 1.0)).sum(axis=-1) / 12.0
    variance = np.where(defined, spread / np.where(defined, clamped, 1.0) ** 2, 0.0)
    return raw, bias, half, variance


def _leaf_terms(leaves: Floats) -> tuple[Floats, ...]:
    """(p, n, a, c) per leaf, top leaf first, of the non-negative leaves (..., 2, L) from the
    monotone prefix sums: positives and examples inside each leaf (n: negatives) and above it
    (a: positives, c: examples)."""
    neg = np.diff(monotone_cumulative(leaves[..., 0, :]), axis=-1)[..., ::-1]
    pos = np.diff(monotone_cumulative(leaves[..., 1, :]), axis=-1)[..., ::-1]
    a = np.cumsum(pos, axis=-1) - pos
    c = a + np.cumsum(neg, axis=-1) - neg
    return pos, neg, a, c


def _precision_sums(
    p: Floats,
    n: Floats,
    a: Floats,
    c: Floats,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per leaf, the sum of precisions at its positives (a leaf's share of AP·P): lowest and
    highest over every order and over ties inside it, and under a uniform mix (the integral
    rule, `leaf_ap_rows`). Orders: positives last or first, Σₖ (a + k)/(c' + k) = p − (c' − a)
    ·(ψ(c' + p + 1) − ψ(c' + 1)) with c' the examples above them (`within_leaf_bounds`); ties:
    every positive at the leaf's precision, p·(a + p)/(c + m), as scikit-learn scores a tied
    score. A tie is outside the orders' range (one positive tied with many is not at any
    rank), so a bound for any data takes both. Highest of all: the positives tied in one
    block above the leaf's negatives, p·(a + p)/(c + p) — a positive with k positives and j
    negatives at or above it in its leaf scores (a + k)/(c + k + j) ≤ (a + p)/(c + p), as
    a ≤ c; positives first in order stay below it (each k < p), and so does the whole leaf
    tied. (The orders' top alone missed the AP of leaves whose positives share a score: 0.43
    above a hull of 0.30, tests/test_rough_intervals.py.)"""
    m = p + n

    def ordered(above: Floats) -> Floats:
        return p - (above - a) * (digamma(above + p + 1) - digamma(above + 1))

    with np.errstate(divide="ignore", invalid="ignore"):
        tie = np.where(c + m > 0, p * (a + p) / np.where(c + m > 0, c + m, 1.0), 0.0)
        low = np.minimum(ordered(c + n), tie)
        block = np.where(c + p > 0, p * (a + p) / np.where(c + p > 0, c + p, 1.0), 0.0)
        high = np.maximum(np.maximum(ordered(c), tie), block)
        log_term = np.where(c > 0, np.log1p(m / np.where(c > 0, c, 1.0)) / m, 0.0)
        mix = np.where(m > 0, p / m + (a - p * c / m) * log_term, 0.0)
    mix = p * np.clip(np.nan_to_num(mix), 0.0, 1.0)
    return np.where(p > 0, low, 0.0), np.where(p > 0, high, 0.0), mix


def ap_hull(leaves: np.ndarray) -> tuple[float, float]:
    """(low, high) of the AP over every order of the examples inside each leaf and over ties
    there (`_precision_sums`): the range that holds the AP of any data with these leaves.
    (0, 1) where the positives' total is not positive."""
    p, n, a, c = _leaf_terms(np.asarray(leaves, dtype=np.float64))
    total = float(p.sum())
    if not total > 0:
        return 0.0, 1.0
    low, high, _ = _precision_sums(p, n, a, c)
    return float(low.sum() / total), float(high.sum() / total)


def _positives_in_order(q: Floats, above_pos: Floats, above: Floats) -> Floats:
    """Σₖ₌₁^q (a + k)/(c + k): the precisions at q positives ranked one after another below c
    examples, a of them positive (`within_leaf_bounds`' closed form)."""
    total: Floats = q - (above - above_pos) * (digamma(above + q + 1) - digamma(above + 1))
    return total


def _mixed(p: Floats, n: Floats, above_pos: Floats, above: Floats) -> Floats:
    """The integral rule's sum of precisions at p positives mixed uniformly with n negatives
    below c examples, a of them positive (`_precision_sums`' `mix`)."""
    m = p + n
    with np.errstate(divide="ignore", invalid="ignore"):
        safe_m = np.where(m > 0, m, 1.0)
        log_term = np.where(above > 0, np.log1p(m / np.where(above > 0, above, 1.0)) / safe_m, 0.0)
        mix = np.where(m > 0, p / safe_m + (above_pos - p * above / safe_m) * log_term, 0.0)
    mixed: Floats = p * np.clip(np.nan_to_num(mix), 0.0, 1.0)
    return mixed


def _tied(q: Floats, r: Floats, above_pos: Floats, above: Floats) -> Floats:
    """q positives tied with r negatives below c examples, a of them positive: each at the
    tie's precision (a + q)/(c + q + r), as scikit-learn scores a tied score."""
    total = above + q + r
    tied: Floats = np.where(total > 0, q * (above_pos + q) / np.where(total > 0, total, 1.0), 0.0)
    return tied


def rough_ap_reach(leaves: np.ndarray, departing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(below, above): how far the AP of leaves (..., 2, L) may sit below and above the
    integral rule's value from the examples departing from smooth (`departures`, (..., 2, L),
    capped at each leaf's counts) alone, over P; 1 where the positives' total is not positive.

    In a leaf of p positives and n negatives with a positives and c examples above it, e₊ and
    e₋ of them departing: the rest (pₛ, nₛ) mix uniformly (the integral rule), the departing
    ones sit anywhere in the leaf or tie. Lowest: the departing negatives above the mix and
    the departing positives below it, or the departing ones tied in one block above or below
    the mix; highest: the departing positives tied in one block above the mix (each at the
    block's precision, above any order of them: `_precision_sums`), or the tied block. With every
    example departing that is `_precision_sums`' range over orders and ties; with none, the
    integral rule itself."""
    p, n, a, c = _leaf_terms(np.asarray(leaves, dtype=np.float64))
    dep = np.asarray(departing, dtype=np.float64)[..., ::-1]  # top leaf first, as the terms
    e_p = np.minimum(dep[..., 1, :], p)
    e_n = np.minimum(dep[..., 0, :], n)
    # A leaf with no departing example reaches exactly the integral rule's value (every term
    # below is then mix + 0): its differences are 0, and only the others are computed.
    live = p > 0
    moved = live & ((e_p != 0) | (e_n != 0))
    below_l, above_l = np.zeros(p.shape), np.zeros(p.shape)
    below_l[moved], above_l[moved] = _reach(*(x[moved] for x in (p, n, a, c, e_p, e_n)))
    total = p.sum(axis=-1)
    defined = total > 0
    safe = np.where(defined, total, 1.0)
    below = np.clip(below_l.sum(axis=-1), 0.0, None) / safe
    above = np.clip(above_l.sum(axis=-1), 0.0, None) / safe
    return np.where(defined, below, 1.0), np.where(defined, above, 1.0)


def _reach(
    p: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
    a: npt.NDArray[np.float64],
    c: npt.NDArray[np.float64],
    e_p: npt.NDArray[np.float64],
    e_n: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(mix − lowest, highest − mix) of leaves of p positives and n negatives below a positives
    and c examples, e₊ and e₋ of them departing (`rough_ap_reach`)."""
    ps, ns = p - e_p, n - e_n
    mix = _mixed(p, n, a, c)
    with np.errstate(divide="ignore", invalid="ignore"):
        tie_top = _tied(e_p, e_n, a, c) + _mixed(ps, ns, a + e_p, c + e_p + e_n)
        tie_bottom = _mixed(ps, ns, a, c) + _tied(e_p, e_n, a + ps, c + ps + ns)
        low = np.minimum(
            _mixed(ps, ns, a, c + e_n) + _positives_in_order(e_p, a + ps, c + e_n + ps + ns),
            np.minimum(tie_top, tie_bottom),
        )
        high = np.maximum(  # the departing positives tied in one block above the mix
            _tied(e_p, 0.0 * e_n, a, c) + _mixed(ps, ns, a + e_p, c + e_p),
            np.maximum(tie_top, tie_bottom),
        )
    return mix - low, high - mix
