"""ROC and PR curves from one private release: the API over `fedeval.estimate.roc_pr`.

>>> import numpy as np, fedeval
>>> rng = np.random.default_rng(0)
>>> y = rng.integers(0, 2, 20_000); s = np.clip(0.3 * y + 0.7 * rng.random(20_000), 0, 1)
>>> c = fedeval.roc_pr_curves(y, s, model="federated", quantiles=128)
>>> c.roc_area_error < 1e-2
True
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Unpack

import numpy as np
from numpy.typing import ArrayLike

from fedeval.api.inputs import ArrayKeywords, FileKeywords, ReadOptions
from fedeval.core.axis import ScoreAxis
from fedeval.core.config import PrivacyModel, check_quantiles
from fedeval.core.errors import UsageError
from fedeval.core.params import data_resolution
from fedeval.core.results import Estimate, undetermined_note
from fedeval.core.spec import ReleaseKeywords, ReleaseSpec, release_spec
from fedeval.documents.files import document_text
from fedeval.estimate.average_precision import AP_DRAWS, APParts, leaf_ap_interval_parts
from fedeval.estimate.diagnostics import (
    ExactDiagnostics,
    exact_diagnostics,
    exact_diagnostics_started,
)
from fedeval.estimate.richardson import richardson_shares
from fedeval.estimate.roc_pr import (
    CURVE_METHODS,
    DEFAULT_CURVE_METHOD,
    Curves,
    curve_height,
    estimate_curves,
    leaf_ap_rows,
    leaf_roc_auc_rows,
    leaf_tails,
    within_leaf_bounds,
)
from fedeval.estimate.smoothness import (
    RICHARDSON_MIN_CELLS,
    beside_cliffs,
    departures,
    with_end_leaves,
)
from fedeval.estimate.uncertainty import REFIT_DRAWS, Z95, noise_sd
from fedeval.privacy.registry import model_of
from fedeval.protocol.simulate import Simulated, simulate
from fedeval.tables.scored import ScoredData
from fedeval.views.dicts import curves_dict

DRAW_GRID = 513
"""Uniform thresholds added to the knots when a curve is rebuilt for each noise draw."""

DEFAULT_QUANTILES = 100
"""Q ≈ 100: the papers' setting, where the noiseless area error is below 1e-3 (ROC)."""


@dataclass(frozen=True)
class CurveResult:
    """Estimated ROC and PR curves, their areas, and (in simulation) the exact curves.

    `points` are the curves at the 2(Q + 1) estimated quantiles; `dense` is what the areas are
    integrated on: every leaf edge ('leaves' method) or the knots plus a uniform grid ('pchip').
    `exact` is thinned to a few thousand points for display (its `roc_auc`/`average_precision`
    and the area errors are over every distinct score; `exact_curves` gives every point).
    Thresholds are in the scores' own units.
    """

    run: Simulated = field(repr=False)
    quantiles: int
    method: str
    points: Curves = field(repr=False)
    dense: Curves = field(repr=False)
    exact: Curves | None = field(repr=False)
    roc_auc: Estimate
    average_precision: Estimate
    roc_area_error: float | None
    pr_area_error: float | None
    ap_parts: APParts | None = field(default=None, repr=False, compare=False)
    """The parts of the 'leaves' AP interval (`leaf_ap_interval_parts`), kept for a difference
    of two releases; None under 'pchip' or without intervals."""

    def to_dict(self, *, source: str | None = None) -> dict[str, Any]:
        """The `fedeval.curves/2` document ``fedeval curves --format json`` writes."""

        return curves_dict(self, source=source)

    def to_json(self, *, source: str | None = None) -> str:
        """`to_dict` as the sealed JSON text the command line writes."""

        return document_text(self.to_dict(source=source))


def _in_units(c: Curves, axis: ScoreAxis) -> Curves:
    finite = np.isfinite(c.thresholds)
    t = np.where(finite, axis.from_unit(np.where(finite, c.thresholds, 0.0)), c.thresholds)
    return Curves(t, c.tpr, c.fpr, c.precision, c.ap)


def _check_quantiles(q: int) -> int:
    return check_quantiles(q)


def _check_method(method: str) -> str:
    if method not in CURVE_METHODS:
        raise UsageError(f"`method` must be one of {', '.join(CURVE_METHODS)}. Found {method!r}.")
    return str(method)


@dataclass(frozen=True, eq=False)
class StartedCurves:
    """The estimated curves of a release (`estimate_curves`), and the exact pass over its
    scores where it runs in a thread of its own (`start_curves`)."""

    n_quantiles: int
    method: str
    dense: Curves
    points: Curves
    exact: Future[ExactDiagnostics] | None


def start_curves(
    run: Simulated, n_quantiles: int = DEFAULT_QUANTILES, method: str = DEFAULT_CURVE_METHOD
) -> StartedCurves:
    """The curves' estimate from the release, with the exact pass over the scores (a
    simulation's truth) started beside the calling thread where the scores may use several
    threads (`exact_diagnostics_started`): the release's intervals, made on the calling thread
    meanwhile, need nothing from it, so on two cores the two run at once instead of one after
    the other. The same values bit for bit as `curve_result` alone."""
    n_quantiles = _check_quantiles(n_quantiles)
    method = _check_method(method)
    # Exact counts: AP as its mean over random orders inside the leaves (the integral rule's
    # continuous mix is 9-25 of that order's sd off where leaves hold a few examples).
    ap_rule = "shuffled" if _exact_counts(run) else "integral"
    dense, points = estimate_curves(
        run.histogram.leaves, n_quantiles, method=method, ap_rule=ap_rule
    )
    exact = None if run.truth is None else exact_diagnostics_started(run.truth, dense)
    return StartedCurves(n_quantiles, method, dense, points, exact)


def curve_result(
    run: Simulated,
    n_quantiles: int = DEFAULT_QUANTILES,
    method: str = DEFAULT_CURVE_METHOD,
    *,
    departing: np.ndarray | None = None,
    started: StartedCurves | None = None,
) -> CurveResult:
    """Curves and areas from a simulated release: from every leaf edge ('leaves') or the
    papers' Q-quantile PCHIP estimator ('pchip', Xu & Cormode, section 3). `departing`: the
    run's `release_departures`, where already computed; `started`: `start_curves` of the run
    (its quantiles and method then stand for these), where already called."""
    if started is None:
        started = start_curves(run, n_quantiles, method)
    n_quantiles, method = started.n_quantiles, started.method
    dense, points = started.dense, started.points
    roc_ci = ap_ci = ap_parts = None
    if run.ci_draws:
        roc_ci, ap_ci, ap_parts = _area_intervals(run, dense, n_quantiles, method, departing)
    exact = None
    roc_err = pr_err = None
    if started.exact is not None:
        exact, roc_err, pr_err = started.exact.result()
    elif run.truth is not None:
        # One blocked pass over the distinct scores: AUC, AP and both areas on every point,
        # the curves thinned for display; thresholds already in the scores' units.
        exact, roc_err, pr_err = exact_diagnostics(run.truth, dense)
    roc_auc = Estimate(dense.roc_auc, None if exact is None else exact.roc_auc, roc_ci)
    ap = Estimate(
        dense.average_precision, None if exact is None else exact.average_precision, ap_ci
    )
    hist = run.histogram
    if not (hist.positives > 0 and hist.negatives > 0):
        # A class total estimated at ≤ 0: the areas divide by it. Never a silent number: the
        # uninformative 0.5, the whole [0, 1] and the reason.
        full = None if not run.ci_draws else (0.0, 1.0)
        roc_auc = Estimate(
            0.5, roc_auc.exact, full, undetermined_note("ROC AUC", hist.positives, hist.negatives)
        )
        ap = Estimate(0.5, ap.exact, full, undetermined_note("AP", hist.positives, hist.negatives))
    return CurveResult(
        run=run,
        quantiles=n_quantiles,
        method=method,
        points=_in_units(points, run.axis),
        dense=_in_units(dense, run.axis),
        exact=exact,
        roc_auc=roc_auc,
        average_precision=ap,
        roc_area_error=roc_err,
        pr_area_error=pr_err,
        ap_parts=ap_parts,
    )


def _leaf_ap_interval(
    run: Simulated,
    estimate: float,
    hull: tuple[float, float],
    tails: tuple[np.ndarray, np.ndarray] | None = None,
    departing: np.ndarray | None = None,
) -> tuple[tuple[float, float], APParts]:
    """95% interval of the 'leaves' AP, and its parts, from the run's release and noise draws
    (`fedeval.estimate.average_precision.leaf_ap_interval_parts`); `tails` of the re-noised
    leaves if known.
    On exact counts the estimate is the random-order mean (`curve_result`), passed on as such.
    The examples the release shows departing from smooth (`departures`, as the AUC's
    interval reads them), and the range's end leaves whole (`with_end_leaves`), get their
    orders' and ties' range. `departing`: the run's `release_departures`, where already
    computed."""
    mean = estimate if _exact_counts(run) else None
    leaves = run.histogram.leaves
    ends = _departing(run) if departing is None else with_end_leaves(departing)
    edges = run.axis.leaf_edges(leaves.shape[-1])
    shares = richardson_shares(edges)
    return leaf_ap_interval_parts(
        leaves, estimate, hull, run.noise_draws, tails, mean, ends, shares, edges
    )


def _departing(run: Simulated) -> np.ndarray:
    """The examples of each leaf the run's release shows departing from smooth, and the
    range's end leaves whole (`with_end_leaves`): what the AP's interval reads."""
    return with_end_leaves(release_departures(run))


def release_departures(run: Simulated) -> np.ndarray:
    """The examples of each leaf (2, L) the run's release shows departing from smooth, read on
    its own noise draws (`fedeval.estimate.smoothness.departures`): what the AUC's, the AP's
    (with the range's end leaves whole, `with_end_leaves`) and the ECE's intervals read, so
    one evaluation computes it once and passes it to each (read-only). Under noise, the leaves
    beside a parent its noise cannot tell from empty depart whole (`beside_cliffs`): 762
    scores on a 0.001 grid in [0.656, 0.667], the auto height's leaf [0.618, 0.664) holding
    656 of them in its top 1.3%, held the AUC in 0.26 of 100 distdp releases (AP 0.32) read
    smooth, 0.89 (0.89) now; localdp 0.59 → 0.95 (`benchmarks/shapes.py --master 7`, S8)."""
    leaves = run.histogram.leaves
    edges = run.axis.leaf_edges(leaves.shape[-1])
    departing = departures(leaves, run.noise_draws, edges, RICHARDSON_MIN_CELLS)
    if run.noise_draws is not None:
        departing = beside_cliffs(departing, leaves, run.noise_draws)
    departing.flags.writeable = False
    return departing


def _exact_counts(run: Simulated) -> bool:
    """Whether the release's counts are exact (no noise): the AP is then the random-order mean
    over the leaves ('shuffled'), not the integral rule."""
    return not model_of(run.config.model).TRAITS.adds_noise


def _area_intervals(
    run: Simulated,
    dense: Curves,
    n_quantiles: int,
    method: str,
    departing: np.ndarray | None = None,
) -> tuple[tuple[float, float], tuple[float, float], APParts | None]:
    """95% intervals of the curve areas. ROC AUC (and AP under 'pchip'): conservative rather
    than calibrated, the hull of the estimate and the areas every order of examples inside the
    leaves allows (`within_leaf_bounds`), widened by z times the noise spread over the run's
    draws (each curve rebuilt by the same method, PCHIP on a coarser grid). AP under 'leaves':
    `fedeval.estimate.average_precision.leaf_ap_interval_parts`, bias-aware over the values the
    release cannot tell apart; under DP it covers 94.6–98% on smooth, unequal and rare-positive
    scores, 95.8% on point masses under localdp and 100% under distdp, where the leaves cannot
    tell ties from a narrow peak (`benchmarks/hard.py`, 1000 releases). Without noise its
    spread is that of the order of the examples inside the leaves, kept inside their worst
    case."""
    leaves = run.histogram.leaves
    auc_lo, auc_hi, ap_lo, ap_hi = within_leaf_bounds(leaves)
    roc_sd = ap_sd = 0.0
    tails = None
    if run.noise_draws is not None and method == "leaves":
        # The re-noised leaves' tails, fitted once for the AP interval's draws and the ROC
        # AUC's (the first REFIT_DRAWS of them): the same areas as rebuilding each curve.
        fp, tp = leaf_tails(leaves + run.noise_draws[: max(AP_DRAWS, REFIT_DRAWS)])
        fp_r, tp_r = fp[:REFIT_DRAWS], tp[:REFIT_DRAWS]
        areas = np.stack(
            [leaf_roc_auc_rows(fp_r, tp_r), leaf_ap_rows(fp_r, tp_r, "integral")], axis=1
        )
        roc_sd, ap_sd = noise_sd(areas)
        tails = fp[:AP_DRAWS], tp[:AP_DRAWS]
    elif run.noise_draws is not None:
        areas = np.array(
            [
                (c.roc_auc, c.average_precision)
                for c in (
                    estimate_curves(leaves + d, n_quantiles, grid=DRAW_GRID, method=method)[0]
                    for d in run.noise_draws[:REFIT_DRAWS]
                )
            ]
        )
        roc_sd, ap_sd = noise_sd(areas)

    def hull(est: float, lo: float, hi: float, sd: float) -> tuple[float, float]:
        return (
            float(np.clip(min(est, lo) - Z95 * sd, 0.0, 1.0)),
            float(np.clip(max(est, hi) + Z95 * sd, 0.0, 1.0)),
        )

    roc = hull(dense.roc_auc, auc_lo, auc_hi, roc_sd)
    if method != "leaves":
        return roc, hull(dense.average_precision, ap_lo, ap_hi, ap_sd), None
    ap_interval, parts = _leaf_ap_interval(
        run, dense.average_precision, (ap_lo, ap_hi), tails, departing
    )
    return roc, ap_interval, parts


def curves_data(
    data: ScoredData,
    *,
    spec: ReleaseSpec | None = None,
    quantiles: int = DEFAULT_QUANTILES,
    method: str = DEFAULT_CURVE_METHOD,
    progress: Callable[[int, int], None] | None = None,
    **release: Unpack[ReleaseKeywords],
) -> CurveResult:
    """Simulate the protocol and estimate the curves; 'auto' height is ⌈log₂ Q⌉ + 2 ('auto:auc',
    'auto:ap', …: the DP probe's choice for those metrics, `fedeval.privacy.probe`)."""
    spec = release_spec(spec, release)
    quantiles = _check_quantiles(quantiles)
    method = _check_method(method)
    if spec.height == "auto" and not spec.height_for:
        spec = replace(spec, height=curve_height(quantiles))
    run = simulate(data, spec=spec, progress=progress)
    return curve_result(run, quantiles, method)


def roc_pr_curves(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    spec: ReleaseSpec | None = None,
    quantiles: int = DEFAULT_QUANTILES,
    method: str = DEFAULT_CURVE_METHOD,
    client_ids: ArrayLike | None = None,
    read: ReadOptions | None = None,
    **keywords: Unpack[ArrayKeywords],
) -> CurveResult:
    """ROC and PR curves of a scored classifier from one private release.

    Parameters are those of `fedeval.evaluate`, plus `quantiles` (Q per class) and `method`:
    'leaves' (the default: curves through every released leaf edge) or 'pchip' (the papers'
    Q-quantile PCHIP estimator). The default height is ⌈log₂ Q⌉ + 2 with branching 2
    (Xu & Cormode).
    """
    spec, read = ReadOptions.settings(spec, read, keywords, file=False)
    data = read.arrays(y_true, y_score, client_ids, spec, _resolution(quantiles, spec))
    return curves_data(data, spec=spec, quantiles=quantiles, method=method)


def roc_pr_curves_file(
    source: str | os.PathLike[str],
    *,
    spec: ReleaseSpec | None = None,
    read: ReadOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    quantiles: int = DEFAULT_QUANTILES,
    method: str = DEFAULT_CURVE_METHOD,
    **keywords: Unpack[FileKeywords],
) -> CurveResult:
    """`roc_pr_curves` on a Parquet/CSV file (or '-' for CSV on stdin), a directory or a glob,
    read and released as `fedeval.evaluate_file` says."""
    spec, read = ReadOptions.settings(spec, read, keywords)
    data = read.table(source, spec, _resolution(quantiles, spec))
    return curves_data(data, spec=spec, quantiles=quantiles, method=method, progress=progress)


def _resolution(quantiles: int, spec: ReleaseSpec) -> int:
    """The leaf height to read data at: the curves' auto height, the finest a probe may choose
    ('auto:METRIC'), or the one given."""
    if spec.height == "auto":
        if spec.height_for:
            return spec.resolution()
        return curve_height(_check_quantiles(quantiles))
    return data_resolution(PrivacyModel.FEDERATED, spec.height)
