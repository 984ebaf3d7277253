"""Average precision's interval from noisy leaves: the candidates' spread and the random order of
the examples inside a leaf (its mean and variance, `fedeval.estimate.ap_order.shuffled_ap`),
both bounded by the leaves."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedeval.core.hierarchy import monotone_cumulative
from fedeval.estimate.ap_order import shuffled_ap, shuffled_ap_mean
from fedeval.estimate.ap_top_block import TopTails, top_block_low
from fedeval.estimate.interval_parts import IntervalParts
from fedeval.estimate.richardson import shared_step
from fedeval.estimate.roc_pr import leaf_ap, leaf_ap_rows, leaf_tails
from fedeval.estimate.smoothness import rough_ap_reach
from fedeval.estimate.uncertainty import (
    ROUNDING,
    Z90,
    bias_aware_critical_value,
    bias_aware_interval,
    noise_sd,
)

AP_DRAWS = 60
"""Noise draws behind the AP interval of the 'leaves' estimator: the AP is O(L) per draw, and
the fit's bias below is a mean over them (its own spread is sd/√AP_DRAWS)."""


FIT_BIAS_FACTOR = 1.0 / (math.sqrt(2.0) - 1.0)
"""From the bias of a re-noised release to the release's own bias: the monotone fit's bias
grows like σ where a class has no mass (isotonic regression of pure noise scales with it), so
adding noise of the same spread (σ → √2σ) adds (√2 − 1)× the release's own bias."""


def _coarser(leaves: np.ndarray) -> np.ndarray:
    """The leaves one level up: each pair of neighbours summed (post-processing of the release),
    by slicing: the pairs' reduce, one rounding each, without its per-pair loop."""
    pairs: np.ndarray = leaves[..., 0::2] + leaves[..., 1::2]
    return pairs


STEP_TRUSTED_FROM = 32
"""Leaves from which the extrapolated step rule replaces the step rule among the AP's candidates
(`leaf_ap_candidates`): the coarsest level it reads then has 8 cells or more."""


def leaf_ap_candidates(
    leaves: np.ndarray, estimate: float, shares: np.ndarray | None = None, keep_step: bool = False
) -> np.ndarray:
    """Values of the AP the leaves cannot tell apart: the estimate (the integral rule: examples
    mixed uniformly inside each leaf) and, from the leaves one and two levels coarser (Richardson
    steps, post-processing of the same release), the integral rule less its O(w²) bias,
    (AP_{h−1} − AP_h)/3; the step rule extrapolated to zero leaf width, T_h = 2·step_h −
    step_{h−1}; and T_h with its own leftover error taken out by a second (Romberg) step,
    T_h + (T_h − T_{h−1})/3.

    The step rule (each leaf's examples tied, as scikit-learn scores ties) is exact for tied
    scores and is off by O(w) for smooth ones; extrapolated, it tends to the AP of tied scores
    where leaves hold point masses and to that of smooth scores elsewhere. One step leaves an
    error where a point mass shares its leaf with smooth mass (its error does not halve with
    the leaf); the second step is a measure of that error, not a cure: with 8 point masses on
    40% of 300k rows at 32 leaves it took 1.5e-3 to 6e-5 (benchmarks/hard.py, localdp) and
    7e-4 to −1.1e-3 (uniform leaves), so T_h and its second step both stay in the span.
    Below 4 leaves: the estimate and the step rule; below 8, no second step. Below
    STEP_TRUSTED_FROM leaves the step rule itself stays a candidate too: there the extrapolations
    read levels of 2–8 leaves, too coarse for their O(w) model where point masses share leaves
    with smooth mass (8 masses on 40% of 5,000 rows at 16 leaves, distdp ε = 1: both steps
    moved away from the truth, which sat between the step and integral rules, and the AP
    interval held it in 73% of 40 releases; with the step rule kept, see benchmarks/hard.py).
    """
    candidates: npt.NDArray[np.float64] = leaf_ap_candidate_rows(
        leaves[None], np.array([estimate]), shares=shares, keep_step=keep_step
    )[0]
    return candidates


def leaf_ap_candidate_rows(
    leaves: np.ndarray,
    estimate: np.ndarray,
    tails: tuple[np.ndarray, np.ndarray] | None = None,
    shares: np.ndarray | None = None,
    keep_step: bool = False,
) -> np.ndarray:
    """`leaf_ap_candidates` of each of a stack of leaves (R, 2, L) with their estimates (R,),
    shape (R, number of candidates); `tails` are the stack's `leaf_tails` where already known.
    Each level's tails are fitted once and shared by the candidates that read them. `shares`:
    the smooth candidate's Richardson share per parent where the leaves' widths differ
    (`shared_step`; None: ⅓ each). `keep_step`: the step rule stays a candidate at any number of
    leaves (`rough_throughout`)."""
    fp, tp = leaf_tails(leaves) if tails is None else tails
    step = leaf_ap_rows(fp, tp, "step")
    n_leaves = leaves.shape[-1]
    if n_leaves < 4 or n_leaves % 2:
        return np.stack([estimate, step], axis=1)
    coarse = _coarser(leaves)
    fp_c, tp_c = leaf_tails(coarse)
    if shares is None:
        smooth = estimate - (leaf_ap_rows(fp_c, tp_c, "integral") - estimate) / 3.0
    else:
        smooth = estimate - shared_step((fp, tp), (fp_c, tp_c), shares, "integral")
    step_c = leaf_ap_rows(fp_c, tp_c, "step")
    tied = 2.0 * step - step_c
    if n_leaves < 8 or n_leaves % 4:
        return np.stack([estimate, smooth, tied, step], axis=1)
    # The step rule extrapolated from the two coarser levels (a Richardson step on its O(w)
    # error), 2·step_{h−1} − step_{h−2}, then a second (Romberg) step.
    tied_c = 2.0 * step_c - leaf_ap_rows(*leaf_tails(_coarser(coarse)), "step")
    romberg = tied + (tied - tied_c) / 3.0
    if n_leaves < STEP_TRUSTED_FROM or keep_step:
        return np.stack([estimate, smooth, tied, romberg, step], axis=1)
    return np.stack([estimate, smooth, tied, romberg], axis=1)


TREND_CELLS = 8
"""Equal sub-cells each leaf is spread over by `trend_split` (the AP of 8 against 16 sub-cells:
within 1.5e-3 at 16 leaves, 2e-5 at 64, on Beta(5, 2) / Beta(1, 6) scores)."""


TREND_DRAWS_UP_TO = 1 << 10
"""Leaves up to which the trend candidate's noise is read on every draw (AP_DRAWS × 2 ×
TREND_CELLS × L sub-cells at once: 8 MB and ≈ 0.06 CPU-s at 2^10 leaves, 0.25 s at 2^12);
above, the integral rule's, which it follows where leaves are that fine."""


def _log_slopes(density: np.ndarray, mid: np.ndarray) -> np.ndarray:
    """Per leaf, the slope of the log density read from its neighbours' (centred where both
    hold mass, one-sided against the leaf's own where one does, 0 where neither can say).

    The one-sided slope from below at leaf j is the one from above at leaf j − 1 (the same
    difference over the same distance), so the differences are taken once and each reading
    is written where it is finite, the weakest first (the same values as choosing among the
    three full readings, with a third of the temporaries)."""
    occupied = density > 0
    log_d = np.log(np.where(occupied, density, 1.0))
    log_d[~occupied] = np.nan
    with np.errstate(invalid="ignore"):
        step = np.diff(log_d, axis=-1) / np.diff(mid)
        centred = (log_d[..., 2:] - log_d[..., :-2]) / (mid[2:] - mid[:-2])
    slope: npt.NDArray[np.float64] = np.zeros(density.shape)
    for part, reading in ((slope[..., :-1], step), (slope[..., 1:], step)):
        np.copyto(part, reading, where=np.isfinite(reading))  # from above, then from below
    np.copyto(slope[..., 1:-1], centred, where=np.isfinite(centred))
    return slope


def trend_split(leaves: np.ndarray, edges: np.ndarray, cells: int = TREND_CELLS) -> np.ndarray:
    """The leaves (..., 2, L) spread over `cells` equal sub-cells each, (..., 2, cells·L): each
    class's fitted count in a leaf (`monotone_cumulative`, non-negative) split as a density
    exp(g·x) inside the leaf would split it, g the slope of the log density that the
    neighbouring leaves' counts per unit width show (`_log_slopes`). Post-processing of the
    release; `edges` (L + 1) the leaves' edges in score units.

    A sub-cell centred at t (in leaf widths from the leaf's middle) takes a share
    ∝ exp(g·w·t) of the leaf's count (the integral of exp(g·x) over equal sub-cells is that
    up to one factor). Exact for a log-linear density; a uniform mix (the integral rule) is
    g = 0."""
    edges = np.asarray(edges, dtype=np.float64)
    width = np.diff(edges)
    mid = (edges[:-1] + edges[1:]) / 2.0
    counts = np.diff(monotone_cumulative(leaves), axis=-1)
    slopes = _log_slopes(counts / width, mid)
    t = (np.arange(cells) + 0.5) / cells - 0.5
    # exp(clip(g·w·t)), its shares and the counts split by them, each step written over the
    # last (the same operations, so the same values; 60 draws of 2^10 leaves make 8 MB a step)
    weights = slopes[..., None] * width[:, None] * t
    np.clip(weights, -700.0, 700.0, out=weights)
    np.exp(weights, out=weights)
    np.divide(weights, weights.sum(axis=-1, keepdims=True), out=weights)
    split: np.ndarray = np.multiply(counts[..., None], weights, out=weights)
    return split.reshape(*counts.shape[:-1], -1)


def trend_ap(leaves: np.ndarray, edges: np.ndarray | None) -> np.ndarray:
    """The AP (the integral rule) of the leaves (..., 2, L) spread by the trend their
    neighbours show (`trend_split`), shape (...); equal widths on [0, 1] where `edges` is None.

    Why: the other candidates read a leaf as a uniform mix, or ties, or extrapolate those in
    leaf width as if the leaves were fine enough for an O(w²) error. Where a class's density
    changes several-fold across a leaf they are not: 1% Beta(5, 2) positives among Beta(1, 6)
    negatives at 16 leaves (50,000 rows), where the negatives' density falls 7× across one
    top leaf, put the AP 0.006–0.015 below the truth with every candidate (they sit at the
    bottom of their leaves, under the positives), while the leaves read along their
    neighbours' trend came within 1e-3 to 4e-3 of it; at 64 leaves and more the two agree
    within 1e-3."""
    if edges is None:
        edges = np.linspace(0.0, 1.0, leaves.shape[-1] + 1)
    split = trend_split(leaves, edges)
    fp, tp = leaf_tails(split)
    return leaf_ap_rows(
        fp.reshape(-1, fp.shape[-1]), tp.reshape(-1, tp.shape[-1]), "integral"
    ).reshape(leaves.shape[:-2])


ROUGH_THROUGHOUT_SHARE = 0.15
"""The share of a class's occupied parents whose split the release shows departing from
smooth (`fedeval.estimate.smoothness.departures`) from which its leaves are not read as smooth
anywhere (`rough_throughout`). On smooth scores at most one parent in 15–128 departs (a
density bending faster than the check's quadratic); on scores on a 0.01 grid at 64–128 leaves,
7–52%."""

ROUGH_THROUGHOUT_PARENTS = 3
"""The fewest departing parents of a class that make it rough throughout (a rare class's
handful of occupied parents can show one bend without any structure below the leaves)."""


def rough_throughout(leaves: np.ndarray, departing: np.ndarray) -> bool:
    """Whether the release shows structure below its leaves across the range: in a class, at
    least ROUGH_THROUGHOUT_PARENTS and ROUGH_THROUGHOUT_SHARE of the parents that hold more
    than 0.5% of it depart from smooth (the end leaves, departing by design, left out).

    The step rule (each leaf's examples tied) leaves the AP's candidates from 32 leaves up
    because smooth scores are O(w) from it; that presumes the scores smooth inside the leaves.
    A grid of values finer than the leaves aliases with them, and where it does not alias
    evenly every few parents split unlike a smooth density: then the release cannot tell
    tied leaves from smooth ones, and the tie reading stays. Scores on a 0.01 grid (5%
    positives, 500,000 rows, distdp ε = 1, 64 leaves) sit below every smooth candidate by
    ≈ 4e-3 and the AP's interval held them in 11 of 29 releases without it."""
    counts = np.clip(leaves, 0.0, None)
    parents = counts[..., 0::2] + counts[..., 1::2]
    moved = np.where(np.isfinite(departing), departing, 0.0)
    moved[..., 0] = moved[..., -1] = 0.0
    flagged = (moved[..., 0::2] + moved[..., 1::2]) > 0
    totals = parents.sum(axis=-1, keepdims=True)
    occupied = parents > 0.005 * totals
    n_flagged = (flagged & occupied).sum(axis=-1)
    n_occupied = occupied.sum(axis=-1)
    rough = (n_flagged >= ROUGH_THROUGHOUT_PARENTS) & (
        n_flagged >= ROUGH_THROUGHOUT_SHARE * n_occupied
    )
    return bool(rough.any())


TOP_BLOCK_Z = Z90
"""How far, in its noise's σ, a count of the top block (`top_block_high`) may be from what the
world kept needs: each test is one-sided (none, more, fewer), so the one-sided 95% quantile."""


def top_block_high(
    leaves: np.ndarray, tails: TopTails, edges: np.ndarray | None = None
) -> float | None:
    """The AP where the release's top is all positives ranked first, where the release cannot
    rule that out; None where it can. Post-processing of the release and its noise draws.

    The top block: the most leaves, counted from the top, whose negatives (the fitted tail
    FP_k above the k-th edge) are within z·s_k of none (z = TOP_BLOCK_Z), s_k the spread of
    that tail's noise over the draws (`tails`: the raw tails of the draws, the noise of the top k
    leaves' sum). The world kept: the block's positives ranked above its negatives (the noise cannot
    place those few negatives; they may all sit below), and the leaves below read along their
    neighbours' trend (`trend_split`, `edges` the leaves' edges; None: equal widths). Where the
    block's positives TP_k are themselves within z·s_k of none (their noise as large as their
    count), the block may hold TP_k + z·s_k positives and the leaves below z·s' fewer than the
    release shows (s' the noise of their sum), each sub-cell's share of them scaled pro rata.
    Its AP: the integral rule (the estimate's) over the block's positives, its negatives and
    the leaves below, in that order.

    The leaves below the block were read as uniform mixes before; where the negatives' density
    falls several-fold across each leaf below the top (Beta(1, 6) negatives under 1% Beta(5, 2)
    positives, 16 leaves) that world sat below the truth with the candidates (0.785 against
    0.803 on average over 100 distdp releases).

    Why: the candidates assume the release's order inside the leaves and the monotone fit's
    placement of a few noisy counts; where a handful of positives sits at the top above every
    negative (AP 1) and the leaves' noise is as large as they are, the fit spreads them over
    the top leaves and among the negatives below, and the re-noised spread (a bootstrap
    around the release, not around the truth) does not reach back to 1: 5 positives on
    [0.98, 1] above 4,995 negatives on [0, 0.5], distdp ε = 1, 16 leaves, held in 184 of 200
    releases (seeds 1000–1199; 197 with this world among the candidates), fewtop (10 such
    positives) under localdp ε = 5 in 177 of 200 (199), every miss below the truth. On smooth
    data the block is the few leaves above the negatives' first noise-clear count (300k
    binormal rows, distdp ε = 1: 7 of 128 leaves, about 20 negatives under 7,300 positives):
    the world moves the AP's span by about 1e-4 and the interval's median width by 1.4%
    (benchmarks/hard.py's smooth family, 200 releases).
    """
    fp, tp, noise, s_pos = tails.fp, tails.tp, tails.noise, tails.s_pos
    k = tails.block(TOP_BLOCK_Z)
    if k == 0 or not tp[-1] > 0:
        return None
    top, total = float(tp[k]), float(tp[-1])
    # the leaves below the block read along their neighbours' trend (`trend_split`), top first
    if edges is None:
        edges = np.linspace(0.0, 1.0, leaves.shape[-1] + 1)
    split = trend_split(leaves, edges)[:, ::-1][:, k * TREND_CELLS :]
    below = split[1]  # positives per sub-cell below the block, top first
    spread = float(s_pos[k - 1])
    if top <= TOP_BLOCK_Z * spread:  # the block's positives are noise-dominated: more may sit there
        rest = total - top
        # the noise of the positives below the block: the draws' sum over those leaves
        rest_spread = float(noise_sd(noise[:, 1, -1] - noise[:, 1, k - 1]))
        top += TOP_BLOCK_Z * spread
        below = below * (max(rest - TOP_BLOCK_Z * rest_spread, 0.0) / rest if rest > 0 else 0.0)
    # top first: the block's positives, then its negatives, then the leaves below
    pos = np.concatenate([[top, 0.0], below])
    neg = np.concatenate([[0.0, fp[k]], split[0]])
    return leaf_ap(*leaf_tails(np.stack([neg[::-1], pos[::-1]])), "integral")


def leaf_ap_interval_parts(
    leaves: np.ndarray,
    estimate: float,
    hull: tuple[float, float],
    draws: np.ndarray | None,
    tails: tuple[np.ndarray, np.ndarray] | None = None,
    shuffled_mean: float | None = None,
    departing: np.ndarray | None = None,
    shares: np.ndarray | None = None,
    edges: np.ndarray | None = None,
) -> tuple[tuple[float, float], APParts]:
    """95% interval of the 'leaves' AP, and its parts from the same pass over the release (what
    an evaluation keeps, so that a difference of two releases reuses them).

    The interval is bias-aware (`bias_aware_interval`, Armstrong–Kolesár) over the span of what
    the release cannot tell apart, with σ the larger spread, over AP_DRAWS fresh noise draws on
    the release (`draws`), of the two candidates that bound the span. `hull` is the AP's
    within-leaf worst case (`within_leaf_bounds`); `tails` are the `leaf_tails` of leaves +
    draws[:AP_DRAWS] where the caller already has them, and `shuffled_mean` the leaves'
    `shuffled_ap_mean` (without noise) where it has that.

    The span holds (1) `leaf_ap_candidates`, each kept inside the hull: ties or a uniform mix
    inside the leaves; (2) the bias of the monotone, non-negative fit of the noisy tails, from
    none to FIT_BIAS_FACTOR·b̂, with b̂ = mean AP(leaves + d) − AP(leaves) measured by noising the
    release again. Bias-aware rather than span ± z·σ: the latter covers 97.5–99% where the span
    is about one σ (benchmarks/hard.py). Without noise (exact sums) σ is the spread of the
    order inside the leaves (`_order_interval`). Where the noise is larger than the hull the
    interval is the hull, the bound that holds for every data set (the fit's bias is then no
    small perturbation, and re-noising underestimates it).

    Under noise too the order of the examples inside a leaf is unknown: the random-order mean
    (`shuffled_ap`, on the noisy leaves) is among the candidates and its spread is added to
    the noise's in quadrature, as the AUC adds its within-cell Mann-Whitney variance. Without
    it a narrow peak of distinct scores (the point masses of benchmarks/hard.py spread over
    2^-30, in random order: the same leaves as ties) was held 68% of the time under distdp
    ε = 1 at 300k rows, 1000 releases; where leaves hold a few thousand smooth examples the
    spread is a small fraction of the noise's.

    Under noise the span also reaches up to `top_block_high`, the AP where the release's top is
    all positives ranked first, where the release cannot rule that out (a handful of positives
    at the top, as noisy as they are few: the fitted leaves, and so every candidate and their
    re-noised spread, smear them among the negatives).

    Under noise the candidates also hold `trend_ap`, the leaves read along the trend their
    neighbours show (`edges`: the leaves' edges in score units; None: equal widths), with its
    own re-noised spread (up to TREND_DRAWS_UP_TO leaves; the integral rule's above, and never
    less than it). Where a class's density changes several-fold across a leaf every other
    candidate reads it as if it did not: 1% Beta(5, 2) positives among Beta(1, 6) negatives,
    6 more at the top, 50,000 rows, distdp ε = 1, auto h = 4 (16 leaves), every exact-count
    candidate 0.006–0.015 below the truth and the fit's bias −0.006 more: the interval held
    0.910 of 200 releases (truth above in all 18 misses); 0.945 with the trend among the
    candidates and in the top block's world (`top_block_high`).

    `departing` ((2, L); `fedeval.estimate.smoothness.departures`): the examples of each leaf
    the release shows departing from smooth. The candidates extrapolate in leaf width as if
    every leaf were smooth or one tie; the departing examples may sit anywhere their leaves'
    orders and ties allow, so the span is widened, below and above, by how far that moves the
    precision sums from the integral rule's (`rough_ap_reach`, its noise over the same draws
    added to σ in quadrature). Without it scores on a 0.01 grid (5% positives, 200k, distdp
    ε = 1, 32 leaves) were held in 22% of 200 releases, scores squeezed into [0.45, 0.55] in
    none.

    `shares` (`fedeval.estimate.richardson.richardson_shares` of the leaves' edges): the smooth
    candidates' Richardson share per parent where the leaves' widths differ (None: ⅓).

    The parts (`fedeval.estimate.interval_parts`, before the critical value): the span (widened
    by the departing examples' reach and the fit's bias) as its range, the candidates' and the
    reach's re-noised spreads as its noise, `shuffled_ap`'s spread as its order. Where the
    order's spread cannot be summed (nan) the range is the hull with no spread. On exact counts
    (no draws) the range is the span of `_order_interval` widened by the reach and kept inside
    the hull, the spread the order's (`hull` set).
    """
    ap_lo, ap_hi = hull
    if departing is None:
        departing = np.zeros(leaves.shape, np.float64)
    keep_step = rough_throughout(leaves, departing)
    if draws is None:
        return _exact_leaf_ap(leaves, estimate, hull, shuffled_mean, departing, shares, keep_step)
    below, above = (float(x) for x in rough_ap_reach(leaves, departing))
    order_mean, order_sd = shuffled_ap(leaves)
    if not np.isfinite(order_sd):  # too many examples at the top to sum: the worst case
        lo, hi = float(min(estimate, ap_lo)), float(max(estimate, ap_hi))
        return (lo, hi), APParts(lo, hi, 0.0, 0.0, order_sd, reach=(below, above))
    # Where the release shows structure below its leaves throughout (`rough_throughout`), a
    # smooth trend inside them is no reading it can claim: the uniform mix (the estimate) stands.
    trend = estimate if keep_step else float(trend_ap(leaves, edges))
    candidates = np.clip(
        np.append(leaf_ap_candidates(leaves, estimate, shares, keep_step), [order_mean, trend]),
        ap_lo,
        ap_hi,
    )
    lo, hi = min(estimate, float(candidates.min())), max(estimate, float(candidates.max()))
    renoised = leaves + draws[:AP_DRAWS]
    if tails is None:
        tails = leaf_tails(renoised)
    estimates = leaf_ap_rows(*tails, "integral")
    resampled = leaf_ap_candidate_rows(renoised, estimates, tails, shares, keep_step)
    spread = noise_sd(resampled)  # of each candidate; [0] is the integral rule
    # σ of the two candidates that bound the span: the interval is exact at the span's ends, so
    # it is their noise that counts (the Romberg step's, where it bounds the span, is ~10%
    # above the others': point masses under localdp covered 0.930 with the other two's σ).
    # the order mean's noise: the integral rule's; the trend's its own where the sub-cells of
    # every draw are few enough (TREND_DRAWS_UP_TO), else the integral rule's too
    trend_sd = spread[0]
    if leaves.shape[-1] <= TREND_DRAWS_UP_TO and not keep_step:
        trend_sd = float(np.fmax(noise_sd(trend_ap(renoised, edges)), spread[0]))
    spread = np.append(spread, [spread[0], trend_sd])
    sd = float(np.fmax(spread[np.argmin(candidates)], spread[np.argmax(candidates)]))
    reach_below, reach_above = rough_ap_reach(renoised, departing)
    # Each end takes its own side's reach noise (`end_spreads`); `sd` and `noise`, the larger
    # of the two ends', are what a difference of two releases reads (`difference_parts`).
    reach_lo, reach_hi = float(noise_sd(reach_below)), float(noise_sd(reach_above))
    reach_sd = float(np.fmax(reach_lo, reach_hi))
    noise = math.hypot(sd, reach_sd)
    # a side whose reach has no spread (nan) takes the larger, as both sides did before
    own = np.where(np.isnan([reach_lo, reach_hi]), reach_sd, [reach_lo, reach_hi])
    ends = end_spreads(sd, order_sd, float(own[0]), float(own[1]))
    sd = math.hypot(sd, order_sd, reach_sd)
    lo, hi = lo - below, hi + above
    integral = resampled[:, 0]
    finite = integral[np.isfinite(integral)]
    if finite.size:
        fit_bias = FIT_BIAS_FACTOR * (float(finite.mean()) - estimate)
        lo, hi = lo - max(fit_bias, 0.0), hi - min(fit_bias, 0.0)
    top = TopTails.of(leaves, draws[:AP_DRAWS])  # both worlds of the top block read it
    top_high = top_block_high(leaves, top, edges)
    if top_high is not None:
        hi = max(hi, top_high)
    if not sd < ap_hi - ap_lo:
        lo, hi = min(lo, ap_lo), max(hi, ap_hi)
    if not np.isfinite(sd):
        sd = noise = 0.0
        ends = (0.0, 0.0)
    parts = APParts(lo, hi, sd, noise, order_sd, reach=(below, above), ends_sd=ends)
    ci = parts.interval()
    top_low = top_block_low(top)
    if top_low is not None:
        ci[0] = min(ci[0], top_low)
    return (float(np.clip(ci[0], 0.0, 1.0)), float(np.clip(ci[1], 0.0, 1.0))), parts


def end_spreads(
    candidate_sd: float, order_sd: float, reach_lo_sd: float, reach_hi_sd: float
) -> tuple[float, float]:
    """(σ of the AP span's low end, σ of its high end): the larger spread of the two candidates
    that bound the span and the order's, each end with the spread of the departing examples'
    reach on its own side only (the reach below moves only the low end, the reach above only
    the high end), all in quadrature.

    Before, both ends took the larger of the two reaches' spreads. Where the reach counts a
    noisy handful on one side only, that side's noise widened the other end too: smooth
    Beta(2, 1)/(1, 2) scores, 30% positives, 300,000 rows, distdp ε = 1, auto h = 7, where the
    top leaf's ≈ 30 negatives may all sit above its 2,050 positives (1.07e-3 below the
    integral rule, its spread over the draws 2.7e-4, the reach above's 1.1e-4): σ 4.1e-4 on
    both ends, now 4.1e-4 below and 3.4e-4 above (40 releases).

    The candidates' spread stays the larger of the two ends': each end's own, read from the
    draws as one quantity (the bounding candidate with its reach), fell 7–30% short of that
    end's spread over releases where the truth sat near the high end (squeezed scores, distdp:
    1.17e-3 against 1.68e-3; rare positives, distdp: 5.3e-3 against 6.3e-3; unequal clients,
    localdp: 3.9e-3 against 4.4e-3; benchmarks/hard.py --quick, 200 releases), and the interval
    held 0.975, 0.955 and 0.930 of them (0.990, 0.980 and 0.955 with the larger spread)."""
    return (
        math.hypot(candidate_sd, order_sd, reach_lo_sd),
        math.hypot(candidate_sd, order_sd, reach_hi_sd),
    )


def ends_interval(low: float, high: float, sd_low: float, sd_high: float) -> np.ndarray:
    """`bias_aware_interval` over [low, high] whose two ends are read with noise of their own
    spreads sd_low and sd_high: each end extended by its own spread times (c − t), with
    c = `bias_aware_critical_value`(t) at t = half-width / σ, σ the larger spread (the
    symmetric interval where the spreads are equal).

    Why it holds 95% with the truth at either end of the range (Armstrong & Kolesár's argument,
    section 2, with an end's own noise for each end): with the truth at the low end, a miss
    below needs the low end's noise above (c − t)·σ_l, probability 1 − Φ(c − t); a miss above
    needs the high end's noise below −(2·half + (c − t)·σ_h), probability
    Φ(−(c − t) − 2·half/σ_h) ≤ Φ(−c − t) since half/σ_h ≥ t; the two sum to at most the 5%
    that defines c. The same holds at the high end. c − t falls from 1.96 (t = 0) to 1.645 as
    t grows, so t read at the larger spread is the cautious one."""
    sd = max(sd_low, sd_high)
    symmetric = bias_aware_interval(low, high, sd)
    if sd_low == sd_high or not sd > 0:
        return symmetric
    # The noisier end is the symmetric interval's own (bit for bit); the other reaches less.
    half = abs(high - low) / 2
    t = half / sd
    extra = float(bias_aware_critical_value(t)) - t
    if sd_low < sd:
        symmetric[0] = low - extra * sd_low
    else:
        symmetric[1] = high + extra * sd_high
    return symmetric


def _exact_leaf_ap(
    leaves: np.ndarray,
    estimate: float,
    hull: tuple[float, float],
    shuffled_mean: float | None,
    departing: np.ndarray,
    shares: np.ndarray | None = None,
    keep_step: bool = False,
) -> tuple[tuple[float, float], APParts]:
    """On exact counts (no draws): the interval (`_order_interval` widened by the departing
    examples' reach, inside the hull) and the parts (its span widened by the reach, inside the
    hull, the order's spread) from one reach and one span."""
    ap_lo, ap_hi = hull
    below, above = (float(x) for x in rough_ap_reach(leaves, departing))
    span_lo, span_hi, order = _order_span(leaves, estimate, hull, shuffled_mean, shares, keep_step)
    lo, hi = _span_interval(span_lo, span_hi, order, hull)
    # ROUNDING on both ends, not only where the hull bounds them: where every leaf holds one
    # example the span, the hull and the spread collapse onto the estimate, whose sum runs in
    # another order than the exact AP's (300 rows at 2^16 leaves: 2e-15 apart, and an interval
    # of width 2e-15 held the exact AP in 3 of 5 data draws).
    interval = (
        float(np.clip(max(lo - below, ap_lo) - ROUNDING, 0.0, 1.0)),
        float(np.clip(min(hi + above, ap_hi) + ROUNDING, 0.0, 1.0)),
    )
    # The hull holds the AP of any data with these counts: the reach stops at it.
    lo, hi = max(span_lo - below, ap_lo), min(span_hi + above, ap_hi)
    return interval, APParts(lo, hi, order, 0.0, order, hull, reach=(below, above))


@dataclass(frozen=True)
class APParts(IntervalParts):
    """`IntervalParts` of the AP, with how far the departing examples reach below and above
    (`rough_ap_reach`), which the exact-count interval adds after its own clipping."""

    reach: tuple[float, float] = (0.0, 0.0)
    ends_sd: tuple[float, float] | None = None

    def interval(self) -> np.ndarray:
        """The release's own interval (unclipped): `ends_interval` over the range with each
        end's own spread, where the parts have them; else the symmetric one."""
        if self.ends_sd is None:
            return super().interval()
        return ends_interval(self.low, self.high, *self.ends_sd)


def _order_interval(
    leaves: np.ndarray,
    estimate: float,
    hull: tuple[float, float],
    shuffled_mean: float | None = None,
) -> tuple[float, float]:
    """95% interval of the AP from exact leaves: bias-aware over the values the leaves cannot
    tell apart, with σ the spread over random orders inside the leaves (`shuffled_ap`), kept
    inside the within-leaf hull (which always holds the AP). The values: the random-order mean,
    it less its O(w²) bias from the scores' trend inside a leaf ((mean_{h−1} − mean_h)/3), and
    the tie candidates of `leaf_ap_candidates` (exact where a leaf holds one tied score). The
    integral rule (a continuous mix) is not among them: with few examples per leaf its
    discreteness bias is 9–25σ (benchmarks/hard.py, h = 16)."""
    return _span_interval(*_order_span(leaves, estimate, hull, shuffled_mean), hull)


def _span_interval(
    span_lo: float, span_hi: float, sd: float, hull: tuple[float, float]
) -> tuple[float, float]:
    """`_order_interval` from its span and spread (`_order_span`)."""
    ap_lo, ap_hi = hull
    if not np.isfinite(sd):
        return span_lo, span_hi
    ci = bias_aware_interval(span_lo, span_hi, sd)
    lo = max(float(ci[0]), ap_lo - ROUNDING)
    hi = min(float(ci[1]), ap_hi + ROUNDING)
    return (float(np.clip(lo, 0.0, 1.0)), float(np.clip(hi, 0.0, 1.0)))


def _order_span(
    leaves: np.ndarray,
    estimate: float,
    hull: tuple[float, float],
    shuffled_mean: float | None = None,
    shares: np.ndarray | None = None,
    keep_step: bool = False,
) -> tuple[float, float, float]:
    """(low, high, sd) of `_order_interval`: the span of the values the exact leaves cannot
    tell apart, kept inside the hull, and the random order's spread; where that spread cannot
    be summed (nan), the hull and the estimate as the span."""
    ap_lo, ap_hi = hull
    mean, sd = shuffled_ap(leaves, shuffled_mean)
    if not np.isfinite(sd):
        return float(min(estimate, ap_lo)), float(max(estimate, ap_hi)), sd
    values = [mean]
    n_leaves = leaves.shape[-1]
    if n_leaves >= 4 and n_leaves % 2 == 0:
        if shares is None:
            values.append(mean - (shuffled_ap_mean(_coarser(leaves)) - mean) / 3.0)
        else:
            tails = leaf_tails(leaves[None]), leaf_tails(_coarser(leaves)[None])
            values.append(mean - float(shared_step(*tails, shares, "shuffled")[0]))
    values.extend(leaf_ap_candidates(leaves, estimate, shares, keep_step)[2:])
    span = np.clip(values, ap_lo, ap_hi)
    return float(span.min()), float(span.max()), sd
