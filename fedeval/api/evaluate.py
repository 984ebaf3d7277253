"""The evaluation API: scores and labels in, private estimates beside the exact values out.

>>> import numpy as np, fedeval
>>> rng = np.random.default_rng(0)
>>> y = rng.integers(0, 2, 5000); s = np.clip(0.3 * y + 0.7 * rng.random(5000), 0, 1)
>>> r = fedeval.evaluate(y, s, model="distdp", epsilon=1.0, seed=1)
>>> abs(r.auc.estimate - r.auc.exact) < 0.05
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Unpack

import numpy as np
from numpy.typing import ArrayLike

from fedeval.api.calibrate import release_ece
from fedeval.api.curves import (
    DEFAULT_QUANTILES,
    CurveResult,
    curve_result,
    release_departures,
    start_curves,
)
from fedeval.api.inputs import ArrayKeywords, FileKeywords, ReadOptions
from fedeval.core.axis import DEFAULT_THRESHOLDS, ScoreAxis, release_axis
from fedeval.core.config import parse_buckets
from fedeval.core.errors import UsageError
from fedeval.core.hierarchy import bucket_counts, coarsen, equidepth_edges
from fedeval.core.release import ScoreHistogram
from fedeval.core.results import Estimate, undetermined_note
from fedeval.core.results import ThresholdMetrics as ThresholdMetrics  # its public home
from fedeval.core.spec import ReleaseKeywords, ReleaseSpec, release_spec
from fedeval.documents.files import document_text
from fedeval.estimate.calibration import exact_ece
from fedeval.estimate.exact import exact_auc, exact_threshold_counts
from fedeval.estimate.interval_parts import IntervalParts, ReleaseParts, leaf_auc_parts
from fedeval.estimate.metric_registry import (
    THRESHOLD_METRIC_NAMES,
    THRESHOLD_METRICS,
    ThresholdMetric,
    ThresholdParts,
    threshold_interval,
    threshold_parts_of,
    threshold_values,
)
from fedeval.estimate.metrics import (
    auc_from_buckets,
    clip_unit,
    precision_recall_accuracy,
    threshold_counts,
)
from fedeval.estimate.richardson import step_variance
from fedeval.estimate.smoothness import RICHARDSON_MIN_CELLS
from fedeval.estimate.sparse_precision import sparse_note, sparse_precision_of
from fedeval.estimate.uncertainty import (
    noise_sd,
    shared_pairs_half_width,
    within_bucket_auc_variance,
)
from fedeval.protocol.simulate import Simulated, simulate
from fedeval.tables.scored import ScoredData
from fedeval.views.dicts import evaluation_dict


@dataclass(frozen=True)
class Evaluation:
    """The result of one evaluation: the simulated release, its metrics and curve areas."""

    run: Simulated = field(repr=False)
    auc: Estimate
    thresholds: tuple[ThresholdMetrics, ...]
    buckets: int | None
    curves: CurveResult = field(repr=False)
    ece: Estimate | None = None
    parts: ReleaseParts | None = field(default=None, repr=False, compare=False)
    """The parts of the intervals, for a difference of two releases (None without intervals)."""

    config = property(lambda self: self.run.config)
    mechanism = property(lambda self: self.run.mechanism)
    histogram = property(lambda self: self.run.histogram)
    rows = property(lambda self: self.run.rows)
    clients = property(lambda self: self.run.clients)
    seed = property(lambda self: self.run.seed)
    path = property(lambda self: self.run.path)
    delta = property(lambda self: self.run.delta)

    def to_dict(self, *, source: str | None = None) -> dict[str, Any]:
        """The `fedeval.report/2` document ``fedeval evaluate --format json`` writes (`source`:
        the input's name, stated in a simulation report)."""

        return evaluation_dict(self, source=source)

    def to_json(self, *, source: str | None = None) -> str:
        """`to_dict` as the sealed JSON text the command line writes."""

        return document_text(self.to_dict(source=source))


@dataclass(frozen=True, eq=False)
class MetricEstimates:
    """Metrics estimated from one decoded histogram (arrays over thresholds)."""

    auc: float
    precision: np.ndarray
    recall: np.ndarray
    accuracy: np.ndarray


def estimate_metrics(
    hist: ScoreHistogram, unit_thresholds: np.ndarray, buckets: int | None = None
) -> MetricEstimates:
    """AUC and P/R/A at thresholds (already mapped to [0, 1]) from a decoded histogram.

    AUC is computed over the leaves, or, with `buckets`, over B equi-depth buckets whose edges are
    the estimated quantiles of the pooled scores (Cormode & Markov, section 4). P/R/A always use
    the leaves: the finest partition, with the leaf that holds t taken as uniform.
    """
    leaves = hist.leaves
    auc = estimate_auc(hist, buckets)
    tp, fp = threshold_counts(leaves, unit_thresholds)
    p, r, a = precision_recall_accuracy(tp, fp, hist.positives, hist.negatives)
    return MetricEstimates(auc, clip_unit(p), clip_unit(r), clip_unit(a))


def estimate_auc(hist: ScoreHistogram, buckets: int | None = None) -> float:
    """The AUC over the leaves, or over B equi-depth `buckets` (`estimate_metrics`)."""
    return float(clip_unit(auc_from_buckets(*auc_buckets(hist.leaves, buckets))))


def auc_interval(
    leaves: np.ndarray,
    draws: np.ndarray | None,
    buckets: int | None,
    edges: np.ndarray | None = None,
) -> np.ndarray:
    """95% interval of the AUC from consistent leaves (2, L) and fresh noise draws on them
    (draws, 2, L) or None, clipped to [0, 1]: bias-aware (`bias_aware_interval`) over a range
    of what the release cannot tell apart, with spread √(σ² + the Mann-Whitney variance of the
    smooth leaves), σ the largest re-noised spread of the range's ends.

    The range (`fedeval.estimate.smoothness.auc_parts`) splits each leaf's examples by what the
    release shows of them (`departures`; `edges`: the leaves' edges in the scores' units, None:
    equal widths): the pairs of the smooth part are ordered as a smooth density orders them, from
    the ½-counting (ties) to it less the Richardson step's bias (pairs a parent counts ½ that its
    leaves order, a third of them, or where the leaves' widths differ each parent's own share,
    `fedeval.estimate.richardson`) and on to the Romberg value one step further where the Richardson
    step has not reached its rate (`leaf_auc_parts`); the pairs that involve an example departing
    from smooth (a point mass, a grid, a cliff, a class squeezed into a leaf: the fewest examples
    that make its parent's residual) take the worst case ± their number/(2PN), which holds for any
    data. With fewer than RICHARDSON_MIN_CELLS leaves every example departs. Before: the Richardson
    range over every leaf, which on scores squeezed into [0.45, 0.55] (7 occupied leaves of 128)
    corrected 40% of the bias and held the AUC in 0 of 200 releases (benchmarks/hard.py). Taking
    every pair of a flagged parent at its worst instead doubled the interval on smooth scores with
    2% positives (34,000 rows, distdp ε = 0.5), whose negatives' density bends faster than the
    smooth model across the lowest coarse leaves; the pairs those departing negatives make with the
    few positives of their leaf are 1.03–1.11× as wide (tests/test_rough_intervals.py).

    Around the unclipped estimate: near 1 (or 0) the clipped one shifts the interval inwards and
    its far side covers more than the noise allows (measured: 0.98 for an AUC of 0.992 under
    localdp, 1.5% positives).

    σ is that of the ends, not of the raw estimate alone: the interval is exact at the range's
    ends, so where the truth sits at an end its coverage is that end's, and its centre moves
    with both (sd((a + b)/2) ≤ max(sd a, sd b)). The bias estimate is a difference of two AUCs
    whose noise is shared only in part: at 16 leaves (1.5% positives, 20,000 rows, distdp
    ε = 1) the corrected AUC's spread is 1.09× the raw one's, and σ from the raw one alone
    covered 0.930 over 2000 releases (0.952 with the ends' σ). The departures and their pairs
    are read from noisy counts too, so each draw's ends (raw or corrected, less or plus the
    half-width, departures read on that draw) carry them; which parents depart stays the
    release's.

    With equi-depth `buckets` (not a dyadic tree: no parent to check) the range is the
    Richardson one over B and B/2 buckets, or the worst case below RICHARDSON_MIN_CELLS."""
    ci: np.ndarray = np.clip(auc_interval_parts(leaves, draws, buckets, edges).interval(), 0.0, 1.0)
    return ci


def auc_interval_parts(
    leaves: np.ndarray,
    draws: np.ndarray | None,
    buckets: int | None,
    edges: np.ndarray | None = None,
    departing: np.ndarray | None = None,
) -> IntervalParts:
    """`auc_interval` before its critical value: its range, noise and order spreads
    (`fedeval.estimate.interval_parts`), which a difference of two releases combines;
    `departing` as `leaf_auc_parts` takes it."""
    if buckets is not None:
        return _bucket_auc_parts(leaves, draws, buckets)
    return leaf_auc_parts(leaves, draws, edges, departing)


def _bucket_auc_parts(leaves: np.ndarray, draws: np.ndarray | None, buckets: int) -> IntervalParts:
    """`auc_interval` over B equi-depth buckets: the Richardson range from B and B/2 buckets
    with the buckets' Mann-Whitney variance and the step's own (`step_variance`: B/2 equi-depth
    buckets are the B ones in pairs), or below RICHARDSON_MIN_CELLS the worst case."""
    neg, pos = auc_buckets(leaves, buckets)
    coarse = neg.shape[-1] < RICHARDSON_MIN_CELLS
    order = 0.0 if coarse else within_bucket_auc_variance(neg, pos)
    step = 0.0 if coarse else float(step_variance(neg, pos))
    variance, noise_variance = order + step, 0.0
    if draws is not None:
        resampled = leaves + draws
        raws = np.array([auc_from_buckets(*auc_buckets(x, buckets)) for x in resampled])
        biases = np.array([auc_discretisation_bias(x, buckets) for x in resampled])
        noise = np.maximum(noise_sd(raws), noise_sd(raws - biases))
        noise_variance = float(np.square(noise))
        variance += noise_variance
    raw = float(auc_from_buckets(neg, pos))
    if coarse:
        half = shared_pairs_half_width(neg, pos)
        lo, hi = raw - half, raw + half
    else:
        corrected = raw - float(auc_discretisation_bias(leaves, buckets))
        lo, hi = min(raw, corrected), max(raw, corrected)
    sd = float(np.sqrt(variance))
    return IntervalParts(
        lo, hi, sd, float(np.sqrt(noise_variance)), float(np.sqrt(order)), step_sd=math.sqrt(step)
    )


def metric_intervals(
    run: Simulated,
    est: MetricEstimates,
    unit_thresholds: np.ndarray,
    buckets: int | None,
    parts: ReleaseParts | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | tuple[None, None, None, None]:
    """95% intervals of AUC (`auc_interval`) and of P/R/A at each threshold
    (`threshold_interval`): Fieller's pivot over the worst case of where the examples of the
    leaf that holds t sit (none of it to all of it ≥ t; nothing when t is on a leaf edge). All
    None when intervals are switched off (ci_draws = 0). `parts`: the run's (`release_parts`),
    where already computed."""
    if run.ci_draws == 0:
        return None, None, None, None
    if parts is None:
        parts = release_parts(run, unit_thresholds, buckets, None)
    by_name = dict(zip(THRESHOLD_METRIC_NAMES, parts.thresholds, strict=True))
    return (
        np.clip(parts.auc.interval(), 0.0, 1.0),
        threshold_interval(est.precision, by_name["precision"]),
        threshold_interval(est.recall, by_name["recall"]),
        threshold_interval(est.accuracy, by_name["accuracy"]),
    )


def release_parts(
    run: Simulated,
    unit_thresholds: np.ndarray,
    buckets: int | None,
    ap: IntervalParts | None,
    departing: np.ndarray | None = None,
    noisy_counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> ReleaseParts:
    """The parts of a release's AUC interval (`auc_interval_parts`) and P/R/A intervals
    (`threshold_parts`), with the AP's (`fedeval.api.curves.CurveResult.ap_parts`);
    `departing`: the run's `release_departures`, `noisy_counts` its
    `noisy_threshold_counts`, where already computed."""
    leaves = run.histogram.leaves
    edges = run.axis.leaf_edges(leaves.shape[-1])
    auc = auc_interval_parts(leaves, run.noise_draws, buckets, edges, departing)
    return ReleaseParts(auc, ap, threshold_parts(run, unit_thresholds, noisy_counts))


def threshold_parts(
    run: Simulated,
    unit_thresholds: np.ndarray,
    noisy_counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[ThresholdParts, ...]:
    """(noise σ (T,), worst-case bounds (T, 2), Fieller pieces) of each threshold metric
    (`THRESHOLD_METRICS`, in its order) at each threshold
    (`fedeval.estimate.metric_registry.threshold_parts_of`): the parts of their intervals; a
    difference of two releases combines σ and the bounds (ranges linearly, noise in
    quadrature). `noisy_counts`: the run's `noisy_threshold_counts`, where
    already computed."""
    leaves, draws = run.histogram.leaves, run.noise_draws
    return threshold_parts_of(leaves, draws, unit_thresholds, noisy_counts)


def noisy_threshold_counts(
    run: Simulated, unit_thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(TP, FP) of each of the run's re-noised releases (its leaves + each noise draw) at each
    threshold (`threshold_counts`), None without draws: what the P/R/A intervals' noise σ
    (`threshold_parts`) and the sparse precision's (`sparse_precision`) both read, so that
    one evaluation takes them once (200 draws of 2^10 leaves: ~1.7 ms)."""
    draws = run.noise_draws
    if draws is None:
        return None
    return threshold_counts(run.histogram.leaves + draws, unit_thresholds)


def sparse_precision(
    run: Simulated,
    unit_thresholds: np.ndarray,
    noisy_counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, float, np.ndarray]:
    """(sparse, estimate, predicted): where few or no examples are predicted positive, the
    precision to report there, and the estimated predicted-positive count at each threshold.

    Precision TP/(TP + FP) is undefined when nothing scores ≥ t, and noise divided by noise when
    the predicted-positive count is within `SPARSE_SDS` noise standard deviations of 0. That is
    judged on the worst case of the leaf that holds t (none of its mass ≥ t,
    `count_bounds`), so a threshold inside a leaf whose examples might all score below it counts
    too. scikit-learn returns 0 there (with a warning); a 0 reads as a verdict on the model, and
    nan reaches a reader as a silent null. We answer instead with the limit as t comes down to
    the top scores: the precision of the smallest top region of leaves holding more examples
    than `SPARSE_SDS` noise standard deviations of its count (`top_region_precision`), with the
    full [0, 1] interval and a note, so that a gate on either bound of the interval fails safe
    while the table still shows a value. `noisy_counts`: the run's `noisy_threshold_counts`,
    where already computed.
    """
    leaves, draws = run.histogram.leaves, run.noise_draws
    return sparse_precision_of(leaves, draws, unit_thresholds, noisy_counts)


def undetermined(metric: str, run: Simulated) -> str:
    """The reason shown where a class total the metric divides by is estimated at ≤ 0."""
    return undetermined_note(metric, run.histogram.positives, run.histogram.negatives)


def _defined(
    value: float, exact: float | None, interval: tuple[float, float] | None, note: str
) -> Estimate:
    """An estimate that is never a silent null: where the noisy class totals leave the metric
    undefined (a total ≤ 0, so the ratio is nan), the uninformative 0.5 with the full [0, 1]
    interval and the reason."""
    if np.isfinite(value):
        return Estimate(float(value), exact, interval)
    return Estimate(0.5, exact, None if interval is None else (0.0, 1.0), note)


def auc_discretisation_bias(leaves: np.ndarray, buckets: int | None) -> np.ndarray:
    """Estimated bias of the AUC from counting each pair that shares a cell as ½: (AUC over
    cells twice as wide − AUC)/3, a Richardson step, 0 below RICHARDSON_MIN_CELLS cells (or
    where an AUC is undefined). Leaves (..., 2, L) give one bias per leading index (with
    `buckets`, (2, L) only).

    Where scores are smooth the pairs sharing a cell are proportional to its width w and each
    departs from ½ by O(w), so the bias is c·w²: the coarser AUC carries 4× it, and the
    difference is 3×. Tied pairs count ½ in both AUCs, so ties add nothing. Read from the same
    release (post-processing); its noise is mostly shared by the two AUCs, not all: the rest
    is in the AUC interval's σ (`auc_interval`)."""
    cells = leaves.shape[-1] if buckets is None else buckets
    if cells < RICHARDSON_MIN_CELLS:
        return np.zeros(leaves.shape[:-2])
    if buckets is None:
        coarse_leaves = coarsen(leaves, int(np.log2(cells)) - 1)
        fine = auc_from_buckets(leaves[..., 0, :], leaves[..., 1, :])
        coarse = auc_from_buckets(coarse_leaves[..., 0, :], coarse_leaves[..., 1, :])
    else:
        fine = auc_from_buckets(*auc_buckets(leaves, buckets))
        coarse = auc_from_buckets(*auc_buckets(leaves, buckets // 2))
    bias = (coarse - fine) / 3.0
    return np.where(np.isfinite(bias), bias, 0.0)


def auc_buckets(leaves: np.ndarray, buckets: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(negatives, positives) of the buckets AUC is computed over: the leaves themselves, or B
    equi-depth buckets at the estimated quantiles of the pooled scores."""
    if buckets is None:
        return leaves[0], leaves[1]
    edges = equidepth_edges(leaves[0] + leaves[1], buckets)
    return bucket_counts(leaves[0], edges), bucket_counts(leaves[1], edges)


def _parse_buckets(buckets: int | str | None) -> int | None:
    if buckets is None or buckets in ("auto", "leaves"):
        return None
    return parse_buckets(buckets)


def evaluate_data(
    data: ScoredData,
    *,
    spec: ReleaseSpec | None = None,
    buckets: int | str | None = "auto",
    thresholds: Sequence[float] | None = None,
    quantiles: int = DEFAULT_QUANTILES,
    progress: Callable[[int, int], None] | None = None,
    **release: Unpack[ReleaseKeywords],
) -> Evaluation:
    """Simulate the protocol on reduced data and estimate every metric (shared entry point).

    The release is `spec`, or the one `release` (`fedeval.core.spec.ReleaseKeywords`) makes;
    `progress(done, total)` reports clients encoded on the per-client path.
    """
    run = simulate(data, spec=release_spec(spec, release), progress=progress)
    return evaluate_run(run, buckets=buckets, thresholds=thresholds, quantiles=quantiles)


def evaluate_run(
    run: Simulated,
    *,
    buckets: int | str | None = "auto",
    thresholds: Sequence[float] | None = None,
    quantiles: int = DEFAULT_QUANTILES,
    ece: bool = True,
) -> Evaluation:
    """Every metric, with intervals, from one release (simulated, or loaded from an aggregate);
    exact values when the run knows the truth. `ece=False` leaves the scores' ECE out (None):
    its discretisation range is a linear programme per release, the largest part of a small
    release's evaluation, which a caller that reads none of it (`fedeval.api.compare`'s
    differences, coverage over many releases) need not pay."""
    n_buckets = _parse_buckets(buckets)
    lo, hi = run.score_range
    thr = np.asarray(DEFAULT_THRESHOLDS if thresholds is None else thresholds, dtype=np.float64)
    if thresholds is None:
        thr = lo + (hi - lo) * thr
    if thr.ndim != 1 or not np.all((thr >= lo) & (thr <= hi)):
        raise UsageError(f"thresholds must lie in the score range [{lo:g}, {hi:g}]. Found {thr}.")
    unit_thr = run.to_unit(thr)
    values = threshold_values(run.histogram, unit_thr)
    # The exact pass over a simulation's sorted scores starts first, beside this thread where
    # they may use several threads (`start_curves`): the intervals need nothing from it, so on
    # two cores both run at once (their temporaries, tens of MB, then held beside its few
    # blocks). On one thread the interval parts come first, their temporaries freed before
    # the pass holds its blocks. The examples the release shows departing from smooth, read
    # once for the AUC's, AP's and ECE's intervals.
    started = start_curves(run, quantiles)
    departing = release_departures(run) if run.ci_draws else None
    # The re-noised releases' counts at the thresholds, read by the P/R/A intervals and the
    # sparse precision alike.
    noisy = noisy_threshold_counts(run, unit_thr)
    parts = (
        release_parts(run, unit_thr, n_buckets, None, departing, noisy) if run.ci_draws else None
    )
    # The scores' ECE before the curves wait for the pass (the same draws in the same order:
    # the curves draw nothing new), so that it too runs beside the pass.
    raw = raw_ece(run, departing=departing) if ece else None
    curves = curve_result(run, quantiles, departing=departing, started=started)
    if parts is not None:
        parts = replace(parts, ap=curves.ap_parts)
    auc_ci: np.ndarray | None = None
    cis: dict[str, np.ndarray | None] = dict.fromkeys(THRESHOLD_METRIC_NAMES)
    if parts is not None:
        auc_ci = np.clip(parts.auc.interval(), 0.0, 1.0)
        for m, part in zip(THRESHOLD_METRICS, parts.thresholds, strict=True):
            cis[m.name] = threshold_interval(values[m.name], part)
    sparse, top_precision, predicted = sparse_precision(run, unit_thr, noisy)

    exact_auc_value: float | None = None
    exact: dict[str, list[float | None]] = {m: [None] * len(thr) for m in THRESHOLD_METRIC_NAMES}
    if run.truth is not None:
        s = run.truth
        # The curves' one pass over the sorted scores already summed the exact AUC.
        exact_auc_value = curves.roc_auc.exact
        if exact_auc_value is None:
            exact_auc_value = exact_auc(s)
        tp, fp = exact_threshold_counts(s, thr)
        p_n = float(s.n_positives), float(s.n_negatives)
        exact = {m.name: m.value(tp, fp, *p_n).tolist() for m in THRESHOLD_METRICS}

    def ci(a: np.ndarray | None, i: int) -> tuple[float, float] | None:
        return None if a is None else (float(a[i, 0]), float(a[i, 1]))

    def estimate(m: ThresholdMetric, i: int, t: float) -> Estimate:
        value, interval = values[m.name][i], ci(cis[m.name], i)
        if not m.sparse_limit:
            return _defined(value, exact[m.name][i], interval, undetermined(m.name, run))
        if not sparse[i]:
            return Estimate(float(value), exact[m.name][i], interval)
        note = sparse_note(t, float(predicted[i]))
        return Estimate(
            top_precision, exact[m.name][i], None if interval is None else (0.0, 1.0), note
        )

    rows = tuple(
        ThresholdMetrics(float(t), {m.name: estimate(m, i, float(t)) for m in THRESHOLD_METRICS})
        for i, t in enumerate(thr)
    )
    auc_ci95 = None if auc_ci is None else ci(auc_ci[None], 0)
    hist = run.histogram
    auc_value = (
        estimate_auc(hist, n_buckets) if hist.positives > 0 and hist.negatives > 0 else float("nan")
    )
    return Evaluation(
        run=run,
        auc=_defined(auc_value, exact_auc_value, auc_ci95, undetermined("AUC", run)),
        thresholds=rows,
        buckets=n_buckets,
        curves=curves,
        ece=raw,
        parts=parts,
    )


def threshold_axis(
    score_range: tuple[float, float],
    thresholds: Sequence[float] | None,
    height: int | str = "auto",
) -> ScoreAxis:
    """The axis `evaluate` reads its data on: the declared thresholds, or by default
    1/11 … 10/11 of the range, as cell edges (`fedeval.core.axis.release_axis`, which `encode`
    and the Flower apps share)."""
    return release_axis(score_range, thresholds, height)


def raw_ece(
    run: Simulated, n_bins: int = 15, departing: np.ndarray | None = None
) -> Estimate | None:
    """ECE of the scores themselves (M = 15 equal-width bins) from the release, debiased for the
    noise, with its interval (`fedeval.api.calibrate.release_ece`, `departing` as it takes it);
    None unless the scores are probabilities."""
    if run.score_range != (0.0, 1.0):
        return None
    exact = None if run.truth is None else exact_ece(run.truth, n_bins)
    return release_ece(run, n_bins, exact, departing)


def evaluate(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    spec: ReleaseSpec | None = None,
    buckets: int | str | None = "auto",
    thresholds: Sequence[float] | None = None,
    client_ids: ArrayLike | None = None,
    quantiles: int = 100,
    read: ReadOptions | None = None,
    **keywords: Unpack[ArrayKeywords],
) -> Evaluation:
    """Evaluate a scored classifier under a privacy model, as the federated protocol would.

    Parameters
    ----------
    y_true : labels, shape (n,): 0/1 or bool, or any two values with `pos_label`.
    y_score : scores, shape (n,), in `score_range`; higher means more likely positive.
    model : ``distdp`` (the default, as on the command line), ``localdp`` or ``federated``
        (secure aggregation, no noise).
    epsilon : ε of the whole release (pure ε-DP per example); default 1 (distdp), 5 (localdp).
    height, shape : the release's leaf height h (2^h cells) and levels; 'auto' balances noise
        against discretisation for this n and ε (see `fedeval.core.params`).
    buckets : 'auto' computes AUC over the leaves; an integer B uses B equi-depth buckets.
    thresholds : where to evaluate precision/recall/accuracy (default 1/11 … 10/11 of the range).
    client_ids : optional client of each example (default: one example per client).
    path : 'fast' draws the aggregate directly; 'per-client' materialises every report.
    seed : an int or a Generator; the int used is stored in the result.
    quantiles : Q per class for the ROC and PR curve areas.
    ci_draws : fresh noise draws behind the 95% intervals (0: no intervals).
    unit, max_examples : whom ε protects: 'example', or 'client' with each client's examples
        capped at `max_examples` (chosen at random) and the noise scaled to a whole client.
    relation : the neighbouring relation ('add-remove' or 'replace'; default: the model's).
    spec : all of model … relation, seed, ci_draws and path as one `ReleaseSpec`, instead of
        those keywords (checked once, before any data is read).
    pos_label, score_range, exact : how the arrays are read (`exact` also keeps the raw scores
        in memory for the exact metrics).
    read : `pos_label`, `score_range` and `exact` as one `fedeval.api.inputs.ReadOptions`,
        instead of those keywords.
    """
    spec, read = ReadOptions.settings(spec, read, keywords, file=False)
    axis = threshold_axis(read.score_range, thresholds, spec.height)
    data = read.arrays(y_true, y_score, client_ids, spec, scale=axis)
    return evaluate_data(
        data, spec=spec, buckets=buckets, thresholds=thresholds, quantiles=quantiles
    )


def evaluate_file(
    source: str | os.PathLike[str],
    *,
    spec: ReleaseSpec | None = None,
    read: ReadOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    buckets: int | str | None = "auto",
    thresholds: Sequence[float] | None = None,
    quantiles: int = DEFAULT_QUANTILES,
    **keywords: Unpack[FileKeywords],
) -> Evaluation:
    """`evaluate` on a Parquet/CSV file (or '-' for CSV on stdin), a directory or a glob,
    streamed in record batches.

    How the file is read is `read` (`fedeval.api.inputs.ReadOptions`: columns, pos_label,
    score_range, exact, threads, read_progress) or those fields as keywords, never both; the
    release is `spec` or its keywords (`fedeval.core.spec.ReleaseKeywords`), never both.
    `progress(done, total)` reports clients encoded on the per-client path."""
    spec, read = ReadOptions.settings(spec, read, keywords)
    axis = threshold_axis(read.score_range, thresholds, spec.height)
    data = read.table(source, spec, scale=axis)
    return evaluate_data(
        data,
        spec=spec,
        buckets=buckets,
        thresholds=thresholds,
        quantiles=quantiles,
        progress=progress,
    )
