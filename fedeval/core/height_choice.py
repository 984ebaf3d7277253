"""The release height `--height auto` picks under DP, from a probe's noisy coarse histogram.

A release at height h answers each metric X with an error of two parts: the privacy noise on
the counts it sums, whose sd grows with h, and the discretisation inside the leaves, which
shrinks with h at a rate set by where the scores sit. Class totals alone cannot tell the
second part (a rare class concentrated in the top cells, scores squeezed into a narrow range
or rounded to a grid all look like smooth scores spread over [0, 1]), so the probe releases a
coarse per-class histogram (`fedeval.privacy.probe`: 2^k cells per class, k = PROBE_LEVEL),
and for every candidate h this module predicts, per metric,

    err_X(h) = √(noise_X(h)² + bias_X(h)²)

and picks the h that minimises the geometric mean over the metrics of err_X(h) / min_h′
err_X(h′): the height closest to every metric's own best at once, in the sense of the smallest
total log-excess. Not the largest ratio: the metrics' best heights differ (P/R/A at declared
thresholds have no discretisation and prefer the coarsest tree, AUC and AP a finer one), and
where they differ by more than a level no height is near both; the largest ratio then trades the
AUC for the P/R/A's noise (the rule's own predictions for smooth scores, distdp ε = 1, 1M rows:
largest ratio 1.99 at h = 7, the AUC's, and 2.00 at h = 8, P/R/A's, so it would take h = 7 and
double the AUC's error), while the mean takes h = 8, where the smooth-data target (AUC ≤ 2e-5)
holds. A run that reports or gates on some metrics only names them (`--height auto:auc`,
`auto:ap`, `auto:precision`, …: `fedeval.core.config.HEIGHT_METRICS`) and the same mean is
taken over those alone: P/R/A alone take the floor height, the AUC alone its own best. The
metric set is a public setting, so the choice stays post-processing of the probe only.

**Noise** (sd of one released count, `count_sd` ∝ √v(h) per the mechanism at that height:
discrete Laplace of α = exp(−ε_tree/Δ(h)) under distdp, where Δ grows with the levels; OUE
with the reports split over g(h) levels under localdp, v ∝ g·n·σ²_OUE), propagated to each
metric with constants measured on `benchmarks/hard.py`'s smooth and rare families (300k rows,
20 releases per height, sd of the estimate over √v and the class-total scale below):
AUC sd ≈ K·√v·√(1/P² + 1/N²) with K ≈ 0.24–0.50 (distdp), 0.16–0.58 (localdp); AP sd ≈
K·√v/P, K ≈ 1.0–3.2 and 0.6–1.1; recall sd ≈ 0.8–1.0·√v/P. P/R/A at declared thresholds sit on
cell edges from the alignment floor up (`fedeval.core.axis`), so they have no discretisation
term: their error ratio between heights is the noise ratio alone, whatever the constant.

**Discretisation** of AUC and AP from the probe's levels ℓ = 0 … k (the histogram coarsened):
the metric at each level, V(ℓ) (AUC counting pairs inside a cell as ½, the leaves' estimator;
AP by the integral rule, examples mixed uniformly inside a cell), and its steps
Δ_ℓ = V(ℓ + 1) − V(ℓ). The bias at a level ℓ < k is read directly, |V(ℓ) − V(k)| plus the bias
left at k; beyond k it is extrapolated from |Δ_{k−1}| step by step: where the scores are smooth
at the resolution reached each step is ¼ of the one before (the bias is O(w²)); where they are
not (point masses, ties, a class cut off inside a cell, a narrow range) the steps fall by about
½. Which applies is read from how many cells the data fill (`occupied_cells`, exp(entropy) per
class): ½ while they fill fewer than SMOOTH_CELLS at that level, unless every class already
fills SPREAD_SHARE of the probe's cells. bias(h) = Σ_{j ≥ h} Δ_j.
|Δ_{k−1}| is the last step read, or an earlier one carried up at ¼ per level where the later
readings are lost in the noise, but never past the most a later step's own reading allows at
a level whose cells divide the data (DIVIDED_CELLS: point masses, once each sits in its own
cell, stop the steps, and a large coarse step carried up is a bias the estimator does not
have). A coarser tree is given at least twice the next finer one's bias (where its direct
reading is lost in the noise), again no more than that reading allows there.
Each step and each direct reading is read through a parametric bootstrap: re-noised copies of
the probe at its own noise variance give its noise sd and its bias (the AP clips and reads cells
under two sds as empty, so its steps on a noisy probe are biased), and only what exceeds z sds
of that noise, z set by FALSE_STEP over the levels, is taken as discretisation; a reading that
is undefined on the probe or any copy (a class total within its noise of 0) is none. A probe
that shows nothing leaves the bias at 0 and the choice to the noise, where the noise of so small
a population dominates anyway.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from fedeval.core.config import HEIGHT_METRICS, PrivacyModel, check_height_for

PROBE_LEVEL = {PrivacyModel.DISTDP: 6, PrivacyModel.LOCALDP: 4}
"""k of the probe's 2^k cells per class (`fedeval.privacy.probe`; coarser where the data were
read coarser). Under distdp each cell carries the same noise whatever k (one example is one
count), so 64 cells cost only the class totals' precision (their sd grows as √(2^k): about 226
at ε = 1, s = 0.05); under localdp every OUE bit carries the noise floor of all probe reports,
so 16 cells keep the class totals within about ±20% at 1M reports, 1.5% positives, ε = 5.
Either resolves a score range a tenth of the axis wide into several cells, which is what tells
the rule that the data are coarse relative to the cells."""

METRICS = ("AUC", "AP", "P/R/A")
"""The rows of `HeightChoice`'s predictions; `fedeval.core.config.HEIGHT_METRICS` names them as
`--height auto:METRIC,…` does (auc, ap, pra)."""

NOISE_SCALE = {"distdp": (0.4, 2.0), "localdp": (0.3, 0.8)}
"""(K_AUC, K_AP) of the module docstring's noise model, per DP model: the middle of the
measured ranges."""

FALSE_STEP = 0.05
"""The chance that a probe showing no discretisation still reads one in a metric: each of the
metric's k steps (and each direct reading) is taken as discretisation only beyond z sds of its
noise, z = Φ⁻¹(1 − FALSE_STEP/(2k)) (Bonferroni over the k readings, since the largest one read
is carried up; 2.64 at k = 6, 2.50 at k = 4; `significant`). Taken less one sd, a step of
noise alone passed one time in three: on probes of scores uniform in both classes (no bias at
any height) the height left the coarsest candidate in 78 of 200 probes under that rule, in 2
of 200 under this one (tests/test_height_choice.py)."""

READ_SDS = 3.0
"""The AP is read from a probe only where its positives' total is beyond this many sds of its
noise (known to within a third): each level's AP is a ratio over that total. On 20,000 paired
rows under distdp ε = 0.5 (1,000 positives, a total sd of 450: 1–2 sds) AP steps of 0.3 between
levels were a few noise spikes, and moved the height from 4 to 6–8 in 8% of releases; 1.5%
positives at 1M under localdp ε = 5 sit at 3.5–6.3 sds and keep their AP."""

STEP_DRAWS = 32
"""Re-noised copies of the probe used to estimate each step's noise sd (a fixed-seed generator:
the choice is a deterministic function of the released probe)."""

SLOWEST_RATE, SMOOTH_RATE = 0.5, 0.25
"""The bias's decay per level beyond the probe: O(w) while the data fill few cells (a cut, a
mass or a steep edge inside a cell), O(w²) once they are smooth over many."""

SMOOTH_CELLS = 40.0
"""The cells a class must fill (exp(entropy) of its counts) for its bias to fall as O(w²). On
`benchmarks/hard.py`'s squeezed family (100k rows, scores in [0.45, 0.55], 10 of 64 cells
filled at level 6) the exact AUC's steps fall by 0.52 and 0.64 per level until 40 cells are
filled (level 8), then by 0.27, 0.22; smooth binormal scores fill 42–45 of 64."""

DIVIDED_CELLS = 10.0
"""The cells the data must fill at a level (`occupied_cells` scaled by 2^(ℓ − k)) for a step
read there to bound the steps after it. Where they fill many cells, every split divides data
and a small step read is a small bias left: point masses, once each has its own cell, stop the
AUC's steps (`benchmarks/hard.py`'s pointmass, 100k rows: exact |AUC(h) − AUC(16)| ≤ 8.6e-5
from h = 5, while the step from level 3 to 4 carried up at ¼ per level predicted 4.1e-4 at
h = 5). Where they fill a few, a split may divide none of them: scores in [0.45, 0.55] lie in
the same one or two cells from level 1 to 4, whose steps are 0, and the steps are large again
from level 5 (the AUC's bias 9.4e-3 at h = 6); the same reading as a bound took the height
of 100k such rows under localdp ε = 5 from 7 to 6 (tests/test_height_choice.py). 10 is a
quarter of SMOOTH_CELLS: squeezed scores fill 1–6 cells at every probe level, point masses
16–32 at levels 5–6."""

ONE_CELL = 1.5
"""Data the probe holds in fewer cells than this (`occupied_cells`: exp(entropy) of the smaller
class's counts above the noise) are unresolved at its finest level: no level's split divides
them, so the steps it reads are 0 whatever the bias (`unresolved_floor`). Scores in [0, 0.01]
on the [0, 1] axis fill 1.0 cell of 64 at level 6; scores in [0.45, 0.55], 1–6."""

SPREAD_SHARE = 0.5
"""Data whose every class fills at least this share of the probe's cells are taken as smooth at
its resolution whatever the count (smooth binormal scores: 0.67–0.69 of 64 and of 16 cells,
and their AUC's steps fall by 0.22–0.26 per level from level 3 on; a 16-cell probe could
never show 40 filled cells). Squeezed scores fill 0.16–0.25, a rare class 0.36, tied grid
scores 0.16–0.18."""


@dataclass(frozen=True)
class HeightChoice:
    """The chosen height and the predictions behind it: `error[i, j]` is metric METRICS[i]'s
    predicted error at `heights[j]` (noise and discretisation combined); `metrics`, the rows
    (HEIGHT_METRICS' names) the height was chosen for."""

    height: int
    heights: np.ndarray
    noise: np.ndarray
    bias: np.ndarray
    metrics: tuple[str, ...] = HEIGHT_METRICS

    @property
    def error(self) -> np.ndarray:
        out: np.ndarray = np.hypot(self.noise, self.bias)
        return out

    @property
    def ratio(self) -> np.ndarray:
        """Each metric's predicted error over its own best among the candidates."""
        err = self.error
        best = err.min(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(best > 0, err / np.where(best > 0, best, 1.0), 1.0)


def coarsen_levels(hist: np.ndarray) -> list[np.ndarray]:
    """The histogram (..., 2, 2^k) at every level 0 … k (pairs of neighbours summed)."""
    out = [hist]
    while out[0].shape[-1] > 1:
        h = out[0]
        out.insert(0, h[..., 0::2] + h[..., 1::2])
    return out


def level_auc(hist: np.ndarray) -> np.ndarray:
    """AUC of (..., 2, L) counts, pairs inside a cell counted ½ (unclipped: bilinear, so
    unbiased under independent zero-mean noise on the two classes); nan where a class's noisy
    total is not positive (the integer counts of a discrete-Laplace probe can sum to exactly 0:
    the ratio is then ±inf, of a sign that changes between levels)."""
    neg, pos = hist[..., 0, :], hist[..., 1, :]
    p, n = pos.sum(axis=-1), neg.sum(axis=-1)
    above = p[..., None] - np.cumsum(pos, axis=-1)
    defined = (p > 0) & (n > 0)
    pairs = np.where(defined, p * n, 1.0)
    return np.where(defined, (neg * (above + 0.5 * pos)).sum(axis=-1) / pairs, np.nan)


def level_ap(hist: np.ndarray) -> np.ndarray:
    """AP of (..., 2, L) counts (clipped at 0) by the integral rule: inside a cell with p
    positives and n negatives below a positives and b negatives (c = a + b, m = p + n),
    ∫₀¹ (a + u·p)/(c + u·m) du = p/m + (a − p·c/m)·ln(1 + m/c)/m (p/m when c = 0)."""
    h = np.clip(hist, 0.0, None)[..., ::-1]  # top cell first
    p, n = h[..., 1, :], h[..., 0, :]
    a = np.cumsum(p, axis=-1) - p
    c = a + np.cumsum(n, axis=-1) - n
    m = p + n
    with np.errstate(divide="ignore", invalid="ignore"):
        safe_c = np.where(c > 0, c, 1.0)
        safe_m = np.where(m > 0, m, 1.0)
        log_term = np.where(c > 0, np.log1p(m / safe_c) / safe_m, 0.0)
        prec = np.where(m > 0, p / safe_m + (a - p * c / safe_m) * log_term, 0.0)
        total = p.sum(axis=-1)
        out: np.ndarray = (p * np.clip(prec, 0.0, 1.0)).sum(axis=-1) / np.where(
            total > 0, total, np.nan
        )
        return out


def level_values(hist: np.ndarray, sd: np.ndarray | float = 0.0) -> np.ndarray:
    """(metric, ..., level): AUC and AP of (..., 2, 2^k) counts at every level 0 … k. The AP
    reads cells under two noise sds (`sd`, per finest cell) as empty: its clipping would
    otherwise turn the noise of empty cells above the positives into false positives there.
    Where those cells hold more than half of the positives (the kept cells' positives are under
    half the noisy total) the AP is nan at every level: what is left is a few noise spikes,
    whose AP jumps between levels by more than any discretisation and more than its re-noised
    copies show (a probe of 20,000 rows under distdp ε = 0.5 read an AP step of 0.17 where the
    copies' steps were 0.02 ± 0.1, and chose h = 8 over the floor of 4); so is it where the
    positives' noisy total is within READ_SDS sds of its noise."""
    levels = coarsen_levels(hist)
    kept = np.where(hist > 2.0 * np.asarray(sd), hist, 0.0)
    positives = hist[..., 1, :].sum(axis=-1)
    total_sd = np.sqrt(np.broadcast_to(np.square(sd), hist.shape)[..., 1, :].sum(axis=-1))
    readable = (kept[..., 1, :].sum(axis=-1) >= 0.5 * positives) & (positives > READ_SDS * total_sd)
    ap = np.stack([level_ap(x) for x in coarsen_levels(kept)], axis=-1)
    return np.stack(
        [
            np.stack([level_auc(x) for x in levels], axis=-1),
            np.where(readable[..., None], ap, np.nan),
        ]
    )


def discretisation(hist: np.ndarray, variance: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """(2, len(heights)): predicted |bias| of AUC and AP at each candidate height from a noisy
    probe histogram (2, 2^k) whose counts carry `variance` (broadcastable), per the module
    docstring."""
    hist = np.asarray(hist, dtype=np.float64)
    k = int(np.log2(hist.shape[-1]))
    rng = np.random.default_rng(0)
    variance = np.broadcast_to(np.asarray(variance, np.float64), hist.shape)
    # A probe with no reports (localdp) says nothing: no noise to re-draw, no step to read.
    sd = np.sqrt(np.where(np.isfinite(variance), variance, 0.0))
    if not np.all(np.isfinite(variance)):
        hist = np.zeros_like(hist)
    copies = hist + sd * rng.standard_normal((STEP_DRAWS, *hist.shape))
    values = level_values(np.concatenate([hist[None], copies]), sd)  # (2, 1 + R, k + 1)
    steps, steps_most = significant(np.diff(values, axis=-1), k)  # (2, k) each
    direct, direct_most = significant(values[..., -1:] - values, k)  # V(k) − V(ℓ): (2, k + 1)
    # Each step beyond the probe: ½ of the one before while the data fill fewer than
    # SMOOTH_CELLS cells at that level, ¼ from there (the smooth regime).
    top = max(int(np.max(heights)), k) + 1
    occupied = occupied_cells(hist, sd)
    filled = occupied * 2.0 ** (np.arange(k, top) - k)
    spread = occupied >= SPREAD_SHARE * hist.shape[-1]
    rates = np.where((filled < SMOOTH_CELLS) & ~spread, SLOWEST_RATE, SMOOTH_RATE)
    # Levels 0 … k whose cells divide the data: a reading there can bound what is carried.
    divided = occupied * 2.0 ** (np.arange(k + 1) - k) >= DIVIDED_CELLS
    out = np.zeros((2, len(heights)))
    for i in range(2):
        # |Δ_{k−1}|: the last step, or an earlier one carried up at the smooth rate (a lower
        # bound where the last steps are lost in the probe's noise), whichever is more; but
        # never above what the probe's own reading of a finer step allows (`steps_most`) at a
        # level whose cells divide the data (DIVIDED_CELLS).
        cap = np.where(divided[1:], steps_most[i], np.inf)
        last = 0.0
        for j in range(k):
            last = max(float(steps[i, j]), min(SMOOTH_RATE * last, float(cap[j])))
        beyond = last * np.cumprod(rates)  # Δ_k, Δ_{k+1}, …
        tail = np.cumsum(beyond[::-1])[::-1]  # bias(k), bias(k + 1), …: the steps left
        for j, h in enumerate(heights.tolist()):
            if h >= k:
                out[i, j] = tail[h - k]
            else:
                out[i, j] = direct[i, h] + tail[0]
        # A coarser tree never has less bias than half the next finer one's (the slowest
        # decay): this holds where the direct reading at a coarse level is lost in the
        # probe's noise, not where that reading shows it smaller (`direct_most`) at a level
        # whose cells divide the data.
        for j in range(len(heights) - 2, -1, -1):
            h = int(heights[j])
            most = direct_most[i, h] + tail[0] if h < k and divided[h] else np.inf
            out[i, j] = max(out[i, j], min(out[i, j + 1] / SLOWEST_RATE, most))
    # Data the probe shows in one cell (every class's counts above the noise, but filling
    # fewer than ONE_CELL cells): no level divides them, so every step reads 0 and the rule
    # above would take the bias for none. It is unknown; the AUC's is at most the share of
    # pairs sharing a cell, Σ pᵢnᵢ/(2PN) at the probe's finest level (scores in [0, 0.01] on
    # the [0, 1] axis: ½, every pair tied), carried down at the slowest rate.
    out[0] = np.maximum(out[0], unresolved_floor(hist, sd, heights, occupied))
    # A metric the probe cannot read at all (undefined at every level) has an unknown bias,
    # not none: nan, which leaves it out of the choice (`choose_height`) instead of voting for
    # the coarsest tree as a bias-free metric would.
    unreadable = np.isnan(values[:, 0]).all(axis=-1)
    out[unreadable] = np.nan
    return out


def unresolved_floor(
    hist: np.ndarray, sd: np.ndarray, heights: np.ndarray, occupied: float
) -> np.ndarray:
    """The AUC's bias floor at each candidate height where the probe holds the data in fewer
    than ONE_CELL cells (0 elsewhere): the pairs sharing a cell at the probe's finest level k,
    Σ pᵢnᵢ/(2PN) over cells above two noise sds (every pair in a cell counted ½ is off by at
    most that), halved per level beyond k (SLOWEST_RATE: a mass or a narrow range inside a
    cell); at a level ≤ k the same share there, which never falls as cells merge. Only where
    those cells hold at least half of each class's noisy total."""
    k = int(np.log2(hist.shape[-1]))
    kept = np.where(hist > 2.0 * sd, hist, 0.0)
    neg, pos = kept
    total = float(neg.sum() * pos.sum())
    # The cells above the noise must hold most of each class (a small probe whose counts are
    # mostly under the noise shows one cell by chance, not data in one cell).
    held = bool(np.all(kept.sum(axis=-1) >= 0.5 * np.asarray(hist).sum(axis=-1)))
    if occupied >= ONE_CELL or not total > 0 or not held:
        return np.zeros(len(heights))
    levels = coarsen_levels(kept)
    shared = np.array([float((x[0] * x[1]).sum()) / (2.0 * total) for x in levels])
    h = np.asarray(heights, dtype=np.int64)
    beyond = shared[k] * SLOWEST_RATE ** np.maximum(h - k, 0)
    return np.where(h <= k, shared[np.minimum(h, k)], beyond)


def significant(readings: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """|reading| of the probe (readings[..., 0, :]) beyond z sds of its noise, bias-corrected by
    the bootstrap (readings[..., 1:, :]: the same on re-noised copies of the probe; any leading
    axes, e.g. the audit's trials): 2·x − mean(x*)
    (Efron & Tibshirani, An Introduction to the Bootstrap, 1993, ch. 10), then soft-thresholded
    at z·sd(x*), z for FALSE_STEP over the k readings. 0 where the probe cannot tell the
    reading from its noise, and where the reading is undefined on the probe or on half its
    copies (a class total within its noise of 0, a class under the noise: `level_values`; the
    metric's value is then noise over noise, and read as a bias it chose heights on noise);
    the copies where it is undefined are left out of the mean and sd. Second, the most the
    reading can be, |2·x − mean(x*)| + z·sd(x*) (inf where undefined): a bound that what is
    carried from other readings must not pass."""
    from scipy.special import ndtri  # not at the top: Flower's apps import this module, unused

    probe, copies = readings[..., 0, :], readings[..., 1:, :]
    defined = ~np.isnan(copies)
    undefined = np.isnan(probe) | (defined.sum(axis=-2) < max(copies.shape[-2] // 2, 2))
    z = float(ndtri(1.0 - FALSE_STEP / (2.0 * max(k, 1))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the undefined ones: nan, dropped
        centre = np.nanmean(copies, axis=-2)
        spread = np.nanstd(copies, axis=-2, ddof=1)
    corrected = 2.0 * probe - centre
    read = np.maximum(np.abs(corrected) - z * spread, 0.0)
    most = np.abs(corrected) + z * spread
    return (
        np.where(undefined, 0.0, np.nan_to_num(read)),
        np.where(undefined | np.isnan(most), np.inf, most),
    )


def occupied_cells(hist: np.ndarray, sd: np.ndarray) -> float:
    """How many probe cells the data fill: per class exp(entropy) of its cells' counts, cells
    under two noise sds taken as empty; the smaller class's (the pooled counts' where a class
    shows no cell above its noise)."""
    kept = np.where(hist > 2.0 * sd, hist, 0.0)
    fills = []
    for row in (*kept, kept.sum(axis=0)):
        total = row.sum()
        if total <= 0:
            continue
        f = row[row > 0] / total
        fills.append(float(np.exp(-(f * np.log(f)).sum())))
    if not fills:
        return 1.0
    return min(fills[:-1]) if len(fills) == 3 else fills[-1]


def choose_height(
    hist: np.ndarray,
    variance: np.ndarray | float,
    heights: np.ndarray,
    count_sd: np.ndarray,
    model: str,
    metrics: tuple[str, ...] = (),
) -> HeightChoice:
    """The candidate of `heights` (ascending, from the thresholds' alignment floor up) whose
    predicted error ratios over `metrics` (HEIGHT_METRICS' names: auc, ap, pra; () for all
    three, the default `auto`) have the smallest geometric mean, from the probe's noisy
    histogram (2, 2^k) with per-count `variance`, and `count_sd`[j] the sd of one released
    count of the tree at heights[j] (module docstring; or (3, H), one row per metric of
    HEIGHT_METRICS: a distdp tree whose ε is split over its levels reads each metric at its own
    noise, `fedeval.privacy.level_split.read_sd_factors`). A metric whose bias the probe cannot
    read (nan) has a ratio of 1 at every height (`HeightChoice.ratio`), so it does not move the
    choice; where that leaves none of `metrics` readable, the choice is the default's, over all
    three (a ratio of 1 everywhere would otherwise tie every height, and ties go to the finest,
    the noisiest). Ties go to the finer height.
    `count_sd` may also be (3, H), one row per metric (AUC, AP, P/R/A): a localdp split of the
    reports over the levels gives them different noise (`fedeval.privacy.report_split`)."""
    hist = np.asarray(hist, dtype=np.float64)
    heights = np.asarray(heights, dtype=np.int64)
    sd_auc, sd_ap, sd_pra = np.broadcast_to(np.asarray(count_sd, np.float64), (3, len(heights)))
    neg, pos = (max(float(t), 1.0) for t in hist.sum(axis=-1))
    k_auc, k_ap = NOISE_SCALE[model]
    noise = np.stack(
        [
            k_auc * sd_auc * np.sqrt(1.0 / pos**2 + 1.0 / neg**2),
            k_ap * sd_ap / pos,
            sd_pra / min(pos, neg),
        ]
    )
    bias = np.zeros_like(noise)
    bias[:2] = discretisation(hist, np.asarray(variance, np.float64), heights)
    chosen = check_height_for(metrics) or HEIGHT_METRICS
    rows = [HEIGHT_METRICS.index(m) for m in chosen]
    if np.isnan(bias[rows]).all():
        chosen, rows = HEIGHT_METRICS, [0, 1, 2]
    pick = HeightChoice(int(heights[0]), heights, noise, bias, chosen)
    score = np.nan_to_num(np.log(pick.ratio[rows]).mean(axis=0), nan=np.inf)
    j = int(np.flatnonzero(score <= score.min() + 1e-12)[-1]) if np.isfinite(score.min()) else 0
    return replace(pick, height=int(heights[j]))
