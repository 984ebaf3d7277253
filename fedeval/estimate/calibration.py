"""Calibration maps and expected calibration error from the per-class score histograms.

Histogram binning and BBQ follow Cormode & Markov (section 5, appendix C.3) and Naeini, Cooper &
Hauskrecht, "Obtaining well calibrated probabilities using Bayesian binning", AAAI 2015. Maps are
step functions on the unit score scale: constant inside each bucket (we step rather than
interpolate, so a bucket's value is exactly the rate the release supports for it). They are kept
monotone and in [0, 1] under noise by pooling adjacent violators over buckets, weighted by mass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import isotonic_regression
from scipy.special import gammaln, logsumexp

from fedeval.core.hierarchy import (
    bucket_counts,
    cumulative,
    equidepth_edges,
    monotone_cumulative,
)
from fedeval.estimate.calibration_rows import (
    bucket_counts_rows,
    equidepth_edges_rows,
    histogram_binning_rows,
    isotonic_rows,
)
from fedeval.estimate.exact import SortedScores, exact_ece_of
from fedeval.estimate.shrinkage import (
    Shrunk,
    kept_rows,
    ratio_variance,
    shrink_toward_identity,
)

BBQ_PRIOR_STRENGTH = 2.0
"""N′ of BBQ's Beta prior per binning (Naeini et al. 2015)."""

MERGE_EDGE_TOLERANCE = 1e-12
"""Edges of merged binnings closer than this are one edge."""

TINY_WEIGHT = 1e-9
"""Weight of a bucket with no (or negative noisy) mass: its value follows its neighbours."""


@dataclass(frozen=True, eq=False)
class CalibrationMap:
    """A monotone step map from unit scores to probabilities.

    `edges` (K + 1, from 0 to 1) delimit K buckets [edges[i], edges[i+1]); `values` (K) are
    non-decreasing in [0, 1]; `mass` (K) is the estimated number of examples in each bucket.
    """

    edges: np.ndarray
    values: np.ndarray
    mass: np.ndarray
    method: str

    def __call__(self, unit_scores: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.edges, unit_scores, side="right") - 1
        return self.values[np.clip(i, 0, len(self.values) - 1)]


def _monotone(rates: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """Pool adjacent violators over buckets, weighted by mass, then clip into [0, 1]."""
    ok = mass > 0
    y = np.where(ok, np.clip(np.nan_to_num(rates, nan=0.5), 0.0, 1.0), 0.5)
    w = np.where(ok, mass, TINY_WEIGHT)
    return np.clip(isotonic_regression(y, weights=w).x, 0.0, 1.0)


def histogram_binning(leaves: np.ndarray, n_buckets: int) -> CalibrationMap:
    """ĝ(s) = p_i / (p_i + n_i) on B equi-depth buckets of the pooled scores (section 5)."""
    edges = equidepth_edges(leaves[0] + leaves[1], n_buckets)
    pos = bucket_counts(leaves[1], edges)
    neg = bucket_counts(leaves[0], edges)
    mass = pos + neg
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = pos / mass
    return CalibrationMap(edges, _monotone(rates, mass), mass, "binning")


def histogram_binning_maps(stack: np.ndarray, n_buckets: int) -> list[CalibrationMap]:
    """`histogram_binning` of each release of a stack (R, 2, L), fitted all at once
    (`estimate.calibration_rows`): the same edges and masses bit for bit, the values to within
    a few ulps (the monotone fit's block means summed in another order)."""
    edges, values, mass = histogram_binning_rows(stack, n_buckets, TINY_WEIGHT)
    return [CalibrationMap(e, v, m, "binning") for e, v, m in zip(edges, values, mass, strict=True)]


def bbq_bucket_range(n: float, n_leaves: int) -> np.ndarray:
    """The binnings BBQ averages: B from N^{1/3}/10 to 10·N^{1/3} (Naeini et al.), log-spaced,
    and no finer than half the leaves (a bucket inside one leaf would only split it uniformly)."""
    root = max(n, 1.0) ** (1 / 3)
    lo = max(2, math.floor(root / 10))
    hi = max(lo, min(math.ceil(10 * root), n_leaves // 2))
    return np.unique(np.round(np.geomspace(lo, hi, 16)).astype(int))


def bbq(leaves: np.ndarray, buckets: np.ndarray | None = None) -> CalibrationMap:
    """Bayesian Binning into Quantiles over several equi-depth binnings merged from the leaves.

    Each binning is scored by its marginal likelihood
    Π_b Γ(N′/B)/Γ(N_b + N′/B) · Γ(m_b + α_b)/Γ(α_b) · Γ(n_b + β_b)/Γ(β_b), α_b = (N′/B)·s_b,
    β_b = (N′/B)(1 − s_b), s_b the bucket midpoint (in log space); the map is the
    score-weighted average of the binnings' posterior means (m_b + α_b)/(N_b + α_b + β_b).
    Noisy counts are clamped at 0 here: the Gamma function needs non-negative counts.
    """
    pooled = leaves[0] + leaves[1]
    if buckets is None:
        buckets = bbq_bucket_range(float(pooled.sum()), leaves.shape[-1])
    log_scores, binnings = [], []
    # Every binning reads the same prefix sums: taken once.
    prefix = monotone_cumulative(pooled)
    sums = np.cumsum(np.asarray(leaves, dtype=np.float64), axis=-1)
    for b in buckets:
        edges = equidepth_edges(pooled, int(b), prefix)
        m = np.clip(bucket_counts(leaves[1], edges, sums[1]), 0.0, None)
        n = np.clip(bucket_counts(leaves[0], edges, sums[0]), 0.0, None)
        score, means = _bbq_binning(m, n, edges, int(b))
        log_scores.append(float(score))
        binnings.append((edges, means))
    weights = np.exp(np.asarray(log_scores) - logsumexp(log_scores))
    return _bbq_merged(pooled, binnings, weights)


def bbq_maps(stack: np.ndarray) -> list[CalibrationMap]:
    """`bbq` of each release of a stack (R, 2, L), bit for bit: each binning's edges, counts
    and score for all rows at once (rows grouped by their range of B, which follows each row's
    total), the merge of the binnings (edges that differ in number from row to row) per row."""
    stack = np.asarray(stack, dtype=np.float64)
    pooled = stack[:, 0] + stack[:, 1]
    ranges = [tuple(int(b) for b in bbq_bucket_range(float(p.sum()), p.shape[-1])) for p in pooled]
    maps: dict[int, CalibrationMap] = {}
    for key in dict.fromkeys(ranges):
        rows = [i for i, r in enumerate(ranges) if r == key]
        sub, p = stack[rows], pooled[rows]
        prefix = monotone_cumulative(p)
        sums = np.cumsum(sub, axis=-1)
        log_scores, binnings = [], []
        for b in key:
            edges = equidepth_edges_rows(p, b, prefix)
            m = np.clip(bucket_counts_rows(sub[:, 1], edges, sums[:, 1]), 0.0, None)
            n = np.clip(bucket_counts_rows(sub[:, 0], edges, sums[:, 0]), 0.0, None)
            score, means = _bbq_binning(m, n, edges, b)
            log_scores.append(score)
            binnings.append((edges, means))
        scores = np.stack(log_scores, axis=-1)  # (rows, binnings)
        weights = np.exp(scores - logsumexp(scores, axis=-1, keepdims=True))
        for k, i in enumerate(rows):
            maps[i] = _bbq_merged(pooled[i], [(e[k], v[k]) for e, v in binnings], weights[k])
    return [maps[i] for i in range(len(stack))]


def _bbq_binning(
    m: np.ndarray, n: np.ndarray, edges: np.ndarray, b: int
) -> tuple[np.ndarray, np.ndarray]:
    """(log marginal likelihood, posterior means) of one binning of B buckets (`bbq`), from its
    clamped counts m, n (..., B) and edges (..., B + 1); the score summed over the last axis."""
    prior = BBQ_PRIOR_STRENGTH / b
    s = np.clip((edges[..., :-1] + edges[..., 1:]) / 2, 1e-6, 1 - 1e-6)
    a, c = prior * s, prior * (1 - s)
    score = np.sum(
        gammaln(prior)
        - gammaln(m + n + prior)
        + gammaln(m + a)
        - gammaln(a)
        + gammaln(n + c)
        - gammaln(c),
        axis=-1,
    )
    return score, (m + a) / (m + n + a + c)


def _bbq_merged(
    pooled: np.ndarray, binnings: list[tuple[np.ndarray, np.ndarray]], weights: np.ndarray
) -> CalibrationMap:
    """BBQ's map: the binnings' posterior means averaged with `weights` on their merged edges,
    made monotone."""
    edges = np.unique(np.concatenate([e for e, _ in binnings]))
    # Binnings share quantiles up to rounding: merge edges closer than MERGE_EDGE_TOLERANCE so the
    # map has no zero-width buckets.
    edges = edges[np.r_[True, np.diff(edges) > MERGE_EDGE_TOLERANCE]]
    edges[-1] = 1.0  # every binning ends at 1; its edge may have merged into a neighbour
    mids = (edges[:-1] + edges[1:]) / 2
    values = np.zeros(len(mids))
    for w, (e, v) in zip(weights, binnings, strict=True):
        values += w * v[np.clip(np.searchsorted(e, mids, side="right") - 1, 0, len(v) - 1)]
    mass = np.diff(cumulative(pooled, edges))
    return CalibrationMap(edges, _monotone(values, mass), mass, "bbq")


MASS_Z = 4.0
"""A bucket's noisy mass must be this many of its noise SDs above 0 for its frequency to count in
the shrinkage (nearer 0 the ratio P̃/Ã has no usable variance); others keep the identity."""


@dataclass(frozen=True)
class MapCheck:
    """What the release says about a noisy map against the scores themselves
    (`check_noisy_map`): the estimated gain (mass-weighted mean squared gap removed; > 0
    helps), its SD, and whether the map was kept (gain − 1.645·SD > 0) or is the scores
    themselves (to within a leaf)."""

    gain: float
    gain_sd: float
    kept: bool

    def to_dict(self) -> dict[str, str | float | bool]:
        return {
            "metric": "estimated reduction, from the noisy release alone, of the mass-weighted "
            "mean squared gap between each bucket's frequency and its mean score, the map "
            "against the scores themselves (Stein's unbiased risk estimate; > 0 helps)",
            "gain": self.gain,
            "noise_sd": self.gain_sd,
            "kept": self.kept,
            "rule": "keep the map if gain − 1.645·noise_sd > 0, the gain that of the buckets "
            "shrunk toward the scores by their noise variance (empirical Bayes); else the map "
            "is the scores themselves (a step on the leaves)",
            "post_processing": "every step reads only the noisy release and fresh noise draws: "
            "no further privacy cost",
        }


def bucket_mean_scores(
    leaves: np.ndarray, leaf_scores: np.ndarray, edges: np.ndarray
) -> np.ndarray:
    """Each bucket's mean score: its leaves' scores weighted by their noisy mass clamped at 0
    (the score at the bucket's centre where no mass is seen)."""
    m = np.clip(leaves[0] + leaves[1], 0.0, None)
    w = bucket_counts(m, edges)
    s = bucket_counts(m * leaf_scores, edges)
    n = len(leaf_scores)
    centre = np.interp((edges[:-1] + edges[1:]) / 2, (np.arange(n) + 0.5) / n, leaf_scores)
    return np.where(w > 0, s / np.where(w > 0, w, 1.0), centre)


def _shrunk_buckets(
    leaves: np.ndarray,
    draws: np.ndarray,
    leaf_scores: np.ndarray,
    edges: np.ndarray,
    fit: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, Shrunk | None]:
    """(ok, mean scores, shrinkage) of the buckets `edges`: the buckets whose noisy mass is
    MASS_Z noise SDs above 0, each bucket's mean score, and the shrinkage of their
    frequencies (or of `fit`, the map's values) toward it (`estimate.shrinkage`)."""
    pos, neg = bucket_counts(leaves[1], edges), bucket_counts(leaves[0], edges)
    mass = pos + neg
    var_pos = np.mean(bucket_counts(draws[:, 1], edges) ** 2, axis=0)  # zero-mean noise
    var_neg = np.mean(bucket_counts(draws[:, 0], edges) ** 2, axis=0)
    ident = bucket_mean_scores(leaves, leaf_scores, edges)
    ok = mass > MASS_Z * np.sqrt(var_pos + var_neg)
    if not ok.any():
        return ok, ident, None
    a, c = mass[ok], ident[ok]
    raw = np.clip(pos[ok] / a, 0.0, 1.0)
    f = isotonic_regression(raw, weights=a).x if fit is None else fit[ok]
    vp, vn = var_pos[ok], var_neg[ok]
    var = np.maximum(ratio_variance(f, a, vp, vn), ratio_variance(c, a, vp, vn))
    # No credit for pooling: the fitted value's variance is taken as the bucket's own, and
    # ∂fit/∂r as 1 (both conservative).
    return ok, ident, shrink_toward_identity(raw, f, var, var, np.ones_like(var), c, a)


IDENTITY_STEPS = 1024
"""At most this many steps stand for the scores themselves in a map that fell back (the
identity to within half a step): the leaves, merged in runs where the release has more."""


def _identity_edges(n_leaves: int) -> np.ndarray:
    """The leaf edges, at most IDENTITY_STEPS + 1 of them (runs of leaves merged beyond)."""
    steps = min(n_leaves, IDENTITY_STEPS)
    return np.arange(steps + 1) / steps


def check_noisy_map(
    cmap: CalibrationMap,
    leaves: np.ndarray,
    draws: np.ndarray,
    leaf_scores: np.ndarray,
    check_edges: np.ndarray | None = None,
) -> tuple[CalibrationMap, MapCheck]:
    """A map fitted on a noisy release (scores that are probabilities), kept only where the
    release shows it beats the scores themselves, so that it is never worse than them in
    expectation: the gain of the map's buckets, shrunk toward the scores by their noise
    variance (`estimate.shrinkage`: empirical-Bayes weights; Stein's unbiased risk estimate of
    the mass-weighted squared gap removed), must be above 1.645 of its SD. Kept, the map is
    `cmap` as fitted; else it is the scores themselves, a step on the leaves (at most
    IDENTITY_STEPS steps, each at its step's centre score). `draws` (R, 2, L): fresh draws of
    the release's noise (the buckets' noise variances); `leaf_scores` (L,): each leaf's score.

    The shrunk map is only the check's: measured on the sample data (localdp ε = 5, held-out
    ECE), mapping each bucket to w·value + (1 − w)·score cost 7.0e-3 → 8.5e-3, since the part
    left to the scores keeps their miscalibration in every bucket alike, where the noise it
    removes partly cancels within an ECE bin. Histogram binning is checked on its own buckets;
    BBQ, whose merged buckets are too small to check one by one, on `check_edges` (the
    binning's buckets, with the binning's frequencies).
    """
    if check_edges is None:  # binning: its own buckets and values
        _, _, s = _shrunk_buckets(leaves, draws, leaf_scores, cmap.edges, cmap.values)
    else:
        _, _, s = _shrunk_buckets(leaves, draws, leaf_scores, check_edges, None)
    check = MapCheck(
        0.0 if s is None else s.gain_per_mass,
        0.0 if s is None else s.sd_per_mass,
        s is not None and s.kept,
    )
    if check.kept:
        return cmap, check
    return identity_map(leaves, leaf_scores, cmap.method), check


def identity_map(leaves: np.ndarray, leaf_scores: np.ndarray, method: str) -> CalibrationMap:
    """The scores themselves as a map, what a noisy map that failed its check falls back to: a
    step on the leaves (at most IDENTITY_STEPS steps), each at its step's centre score."""
    fine = _identity_edges(leaves.shape[-1])
    centre = (fine[:-1] + fine[1:]) / 2
    n = len(leaf_scores)
    values = np.interp(centre, (np.arange(n) + 0.5) / n, leaf_scores)  # non-decreasing
    mass = np.diff(cumulative(leaves[0] + leaves[1], fine))
    return CalibrationMap(fine, np.clip(values, 0.0, 1.0), mass, method)


def checks_kept(
    stack: np.ndarray,
    draws: np.ndarray,
    leaf_scores: np.ndarray,
    edges: np.ndarray,
    fit: np.ndarray | None,
    draw_sums: np.ndarray,
) -> np.ndarray:
    """Whether `check_noisy_map` keeps the map of each release of a stack (R, 2, L), checked on
    that release's buckets `edges` (R, K + 1) with the map's values `fit` (R, K) (binning) or
    the buckets' monotone frequencies (None: BBQ's check), all rows at once: (R,) booleans.

    The buckets' counts, noise variances and mean scores are `_shrunk_buckets`' bit for bit;
    the isotonic fit (`isotonic_rows`, on each row's usable buckets moved to its front) and
    the shrinkage's sums (`estimate.shrinkage.kept_rows`) to within a few ulps, so a row's
    verdict can differ only where its gain is within those ulps of 1.645 SDs."""
    pos = bucket_counts_rows(stack[:, 1], edges)
    neg = bucket_counts_rows(stack[:, 0], edges)
    mass = pos + neg
    # The draws' counts in every row's buckets: (draws, R, K), averaged over the draws.
    var_pos = np.mean(bucket_counts(draws[:, 1], edges, draw_sums[:, 1]) ** 2, axis=0)
    var_neg = np.mean(bucket_counts(draws[:, 0], edges, draw_sums[:, 0]) ** 2, axis=0)
    m = np.clip(stack[:, 0] + stack[:, 1], 0.0, None)
    w, s = bucket_counts_rows(m, edges), bucket_counts_rows(m * leaf_scores, edges)
    n = len(leaf_scores)
    centre = np.interp((edges[:, :-1] + edges[:, 1:]) / 2, (np.arange(n) + 0.5) / n, leaf_scores)
    ident = np.where(w > 0, s / np.where(w > 0, w, 1.0), centre)
    ok = mass > MASS_Z * np.sqrt(var_pos + var_neg)
    a = np.where(ok, mass, 1.0)
    raw = np.clip(pos / a, 0.0, 1.0)
    if fit is None:
        # Each row's usable buckets first (in order), the rest after them at +inf: the fit of
        # the front is that of the usable buckets alone.
        order = np.argsort(~ok, axis=-1, kind="stable")
        front = np.take_along_axis(ok, order, axis=-1)
        y = np.where(front, np.take_along_axis(raw, order, axis=-1), np.inf)
        f = np.empty_like(raw)
        np.put_along_axis(f, order, isotonic_rows(y, np.take_along_axis(a, order, axis=-1)), -1)
        f = np.where(ok, f, 0.0)
    else:
        f = fit
    var = np.maximum(
        ratio_variance(f, a, var_pos, var_neg), ratio_variance(ident, a, var_pos, var_neg)
    )
    return kept_rows(raw, f, var, ident, a, ok)


def ece_from_histogram(
    leaves: np.ndarray,
    n_bins: int = 15,
    calibration: CalibrationMap | None = None,
    scores: np.ndarray | None = None,
) -> float:
    """ECE over M equal-width bins from the release: each leaf's mass sits at its midpoint score
    (`scores`, when the axis is warped; else the unit midpoint), or at what `calibration` maps
    that unit midpoint to. ECE = Σ_b |pos_b − Σ score|_b / N, at most 1 (noisy counts can
    push the sum past N where the release holds few examples; no data set reaches it)."""
    return float(ece_rows(np.asarray(leaves)[None], n_bins, calibration, scores)[0])


def ece_rows(
    leaves: np.ndarray,
    n_bins: int = 15,
    calibration: CalibrationMap | None = None,
    scores: np.ndarray | None = None,
) -> np.ndarray:
    """`ece_from_histogram` of each of a stack of leaves (R, 2, L), shape (R,): one bincount
    over the stack (the noise draws behind an interval), the same sums in the same order.
    `scores` may be (R, L), each row's own (a map refitted on each draw)."""
    n_rows, n_leaves = leaves.shape[0], leaves.shape[-1]
    mid = (np.arange(n_leaves) + 0.5) / n_leaves
    if calibration is not None:
        score = calibration(mid)
    else:
        score = mid if scores is None else np.asarray(scores, dtype=np.float64)
    mass = leaves[:, 0] + leaves[:, 1]
    b = np.minimum((score * n_bins).astype(np.int64), n_bins - 1)
    cell = (b + n_bins * np.arange(n_rows)[:, None]).ravel()
    size = n_rows * n_bins
    pos = np.bincount(cell, leaves[:, 1].ravel(), minlength=size).reshape(n_rows, n_bins)
    score_sum = np.bincount(cell, (mass * score).ravel(), minlength=size).reshape(n_rows, n_bins)
    total = mass.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ece = np.minimum(np.sum(np.abs(pos - score_sum), axis=-1) / total, 1.0)
    return np.where(total > 0, ece, np.nan)


def exact_ece(
    s: SortedScores,
    n_bins: int = 15,
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
) -> float:
    """ECE of the raw scores (already on [0, 1]) or of `transform(scores)`, from the data:
    summed over the distinct scores with their counts (`fedeval.estimate.exact.exact_ece_of`)."""
    return exact_ece_of(s, n_bins, transform)
