"""The AP's error from the privacy noise at each candidate height, by simulating the release.

How the noise on the tree's counts reaches the AP depends on where the scores sit, not on a
constant: the estimator fits each class's cumulative counts monotone (isotonic regression, which
pools the noise of empty leaves) and integrates precision over the positives' leaves, so its
error grows with the leaves the noise spreads over and with how concentrated the positives are.
Measured on `benchmarks/hard.py`'s families (distdp, h = 5–11), AP sd × P / count sd is
2.0–2.9 on smooth scores, 0.5–0.9 on scores clipped at 0 and 1, 2.7–3.8 on squeezed scores: any
single constant misjudges the noise against the discretisation by a level or more.

So the height rule runs the AP estimator itself (`release_ap`: the same isotonic tails and
integral rule as `fedeval.estimate.roc_pr.leaf_ap_rows`, checked equal in
tests/test_height_choice.py) on SIM_DRAWS releases simulated from the probe at each candidate
height h: the probe's cells (those under two noise sds read as empty) spread evenly over the
leaves below them (or summed, for h under the probe's level), every released level measured with
Gaussian noise of the tree's count sd at h, the levels made consistent as the decoder does
(`fedeval.core.hierarchy.consistent_leaves`), and the error taken as the root mean square of the
noisy AP less the AP of the same leaves without noise: noise and the bias the noise itself
causes (the clipping of the fit), not the discretisation (the probe's own reading). Gaussian
noise of the same variance stands in for the discrete Laplace and the OUE: the AP is a smooth
function of many counts. Post-processing of the probe only (a fixed-seed generator: the same
probe gives the same prediction).
"""

from __future__ import annotations

import numpy as np

from fedeval.core.hierarchy import coarsen, consistent_leaves, monotone_cumulative

SIM_DRAWS = 8
"""Simulated releases per candidate height: the RMS of 8 draws is known to about ±25%
(√(1/(2·8))), a quarter of a level's noise step (√2 per level or more), and 8 draws of a
height-12 tree cost a few milliseconds."""

SIM_TOP = 10
"""The finest height simulated: a tree of 2^10 leaves costs about 5 ms for 8 draws, one of 2^14
about 300 ms. Beyond it the prediction is carried up from the last two simulated heights: the
count sd's own ratio times the growth of error / count sd per level between them (clamped to
1 … √2: the noise never spreads over fewer leaves, and its share of the leaves at most doubles a
variance per level)."""

SIM_SEED = 20_251_127
"""The simulation's fixed seed: the prediction is a function of the released probe alone."""


def release_ap(leaves: np.ndarray) -> np.ndarray:
    """AP of a stack of (possibly noisy) consistent leaves (..., 2, L) as the release's
    estimator reads it: each class's cumulative counts from the top fitted monotone
    (`monotone_cumulative`), then the integral rule over the leaves with positives,
    ∫₀¹ (a + u·p)/(c + u·m) du = p/m + (a − p·c/m)·ln(1 + m/c)/m (p/m when c = 0), each leaf's
    precision clipped to [0, 1]; nan where the fitted positive total is not positive."""
    neg = monotone_cumulative(leaves[..., 0, :])
    pos = monotone_cumulative(leaves[..., 1, :])
    fp = neg[..., -1:] - neg[..., ::-1]  # top edge first, as `leaf_tails`
    tp = pos[..., -1:] - pos[..., ::-1]
    p, n = np.diff(tp, axis=-1), np.diff(fp, axis=-1)
    a, b = tp[..., :-1], fp[..., :-1]
    c, m = a + b, p + n
    live = p > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        safe_m = np.where(live, m, 1.0)
        log_term = np.where(c > 0, np.log1p(m / np.where(c > 0, c, 1.0)) / safe_m, 0.0)
        prec = p / safe_m + (a - p * c / safe_m) * log_term
        terms = np.where(live, p * np.clip(prec, 0.0, 1.0), 0.0)
        total = tp[..., -1]
        out: np.ndarray = np.where(
            total > 0, np.clip(terms.sum(axis=-1) / np.where(total > 0, total, 1.0), 0, 1), np.nan
        )
    return out


def spread(hist: np.ndarray, height: int) -> np.ndarray:
    """The (2, 2^k) histogram at `height`: summed to 2^height cells where coarser, each cell's
    count split evenly over its 2^(height − k) leaves where finer."""
    k = int(np.log2(hist.shape[-1]))
    if height <= k:
        return coarsen(hist, height)
    return np.repeat(hist / float(1 << (height - k)), 1 << (height - k), axis=-1)


def simulated_ap_error(
    hist: np.ndarray,
    sd: np.ndarray | float,
    heights: np.ndarray,
    count_sd: np.ndarray,
    first_level: int | None,
) -> np.ndarray:
    """(len(heights),): the predicted RMS error the noise gives the AP of a release at each
    candidate height (module docstring), from the probe's noisy histogram (2, 2^k) whose counts
    carry noise of sd `sd` (broadcastable; cells under two sds are read as empty), `count_sd[j]`
    the sd of every released count at heights[j], and `first_level` the coarsest level a
    hierarchy releases (None: the leaves alone). nan where the probe's kept positives are none
    (the AP reading is then noise over noise)."""
    hist = np.asarray(hist, np.float64)
    kept = np.where(hist > 2.0 * np.asarray(sd), hist, 0.0)
    out = np.full(len(heights), np.nan)
    if kept[1].sum() <= 0 or kept[0].sum() < 0:
        return out
    # The same standard normals at every level for every height (common random numbers): the
    # heights' predictions then differ by the noise's scale and the leaves it spreads over, not
    # by which draws each got, so their ratios (what the choice reads) are steadier than each.
    rng = np.random.default_rng(SIM_SEED)
    top = min(int(np.max(heights)), SIM_TOP)
    normals = [rng.standard_normal((SIM_DRAWS, 2, 1 << lv)) for lv in range(top + 1)]
    for j, h in enumerate(np.asarray(heights).tolist()):
        if h > SIM_TOP:
            continue
        truth = spread(kept, int(h))
        levels = [int(h)] if first_level is None else list(range(min(first_level, h), h + 1))
        s = float(count_sd[j])
        measured = [coarsen(truth, lv) + s * normals[lv] for lv in levels]
        leaves = consistent_leaves(measured, [s * s] * len(levels), levels)
        sq = np.square(release_ap(leaves) - release_ap(truth))
        ok = np.isfinite(sq)  # a draw whose positives the fit took to 0 reads no AP
        out[j] = float(np.sqrt(sq[ok].mean())) if ok.any() else np.nan
    return _carried_up(out, np.asarray(heights), np.asarray(count_sd, np.float64))


def _carried_up(err: np.ndarray, heights: np.ndarray, count_sd: np.ndarray) -> np.ndarray:
    """`err` at the heights above SIM_TOP from the last two simulated ones (SIM_TOP)."""
    done = np.flatnonzero(heights <= SIM_TOP)
    if done.size == len(heights) or done.size == 0:
        return err
    last = int(done[-1])
    per_sd = err / count_sd
    growth = per_sd[last] / per_sd[last - 1] if last >= 1 else 1.0
    growth = float(np.clip(np.nan_to_num(growth, nan=1.0), 1.0, np.sqrt(2.0)))
    out = err.copy()
    for j in range(last + 1, len(heights)):
        out[j] = per_sd[last] * growth ** (heights[j] - heights[last]) * count_sd[j]
    return out
