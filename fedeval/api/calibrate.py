"""Federated calibration from one private release, and applying a saved map to new scores.

>>> import numpy as np, fedeval
>>> rng = np.random.default_rng(0)
>>> y = rng.integers(0, 2, 20_000); s = np.clip(0.3 * y + 0.7 * rng.random(20_000), 0, 1)
>>> cal = fedeval.calibrate(y, s, model="distdp", seed=0)
>>> cal.ece_calibrated.estimate < cal.ece_raw.estimate
True
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Unpack

import numpy as np
from numpy.typing import ArrayLike

from fedeval.api.inputs import ArrayKeywords, FileKeywords, ReadOptions
from fedeval.core.config import PrivacyModel, parse_buckets
from fedeval.core.errors import UsageError
from fedeval.core.hierarchy import equidepth_edges
from fedeval.core.results import Estimate
from fedeval.core.spec import ReleaseKeywords, ReleaseSpec, release_spec
from fedeval.documents.files import document_text
from fedeval.documents.map_file import MapFile, load_map
from fedeval.estimate.calibration import (
    CalibrationMap,
    MapCheck,
    bbq,
    bbq_maps,
    check_noisy_map,
    checks_kept,
    ece_from_histogram,
    ece_rows,
    exact_ece,
    histogram_binning,
    histogram_binning_maps,
    identity_map,
)
from fedeval.estimate.calibration_rows import equidepth_edges_rows
from fedeval.estimate.ece import ece_estimate
from fedeval.estimate.ece_range import discretisation_range, smooth_offsets
from fedeval.estimate.smoothness import (
    RICHARDSON_MIN_CELLS,
    beside_cliffs,
    departures,
    with_end_leaves,
)
from fedeval.estimate.uncertainty import REFIT_DRAWS, interval, noise_sd
from fedeval.privacy.decode import noise_draws
from fedeval.privacy.registry import model_of
from fedeval.protocol.simulate import (
    MAX_DRAW_VALUES,
    Simulated,
    simulate,
)
from fedeval.tables.read import read_with_scores, source_name
from fedeval.tables.scored import ScoredData
from fedeval.tables.write import write_batches, writes_parquet
from fedeval.views.dicts import map_dict

DEFAULT_ECE_BINS = 15


class Method(StrEnum):
    BINNING = "binning"
    BBQ = "bbq"


@dataclass(frozen=True)
class CalibrationResult:
    """A calibration map fitted on one private release, with ECE before and after.

    `map` works on unit scores; `unit_map` is the same map for scores in their own units.
    `ece_calibrated` is in-sample: measured on the data the map was fitted to (in simulation its
    exact value is optimistic; measure a held-out file for an honest figure).
    """

    run: Simulated = field(repr=False)
    method: Method
    map: CalibrationMap = field(repr=False)
    n_bins: int
    ece_raw: Estimate | None
    ece_calibrated: Estimate
    check: MapCheck | None = None
    """Under noise (scores that are probabilities): the release's own check of the map against
    the scores themselves (`estimate.calibration.check_noisy_map`); None otherwise."""

    def apply(self, y_score: np.ndarray) -> np.ndarray:
        """Calibrated probabilities for scores in their own units."""
        return self.map(self.run.to_unit(y_score))

    def to_dict(self, *, source: str | None = None, score_col: str = "score") -> dict[str, Any]:
        """The `fedeval.calibration-map/2` report ``fedeval calibrate --format json`` writes,
        exact values included in simulation; `shareable(to_dict())` is the map file to hand on."""

        return map_dict(self, source=source, score_col=score_col)

    def to_json(self, *, source: str | None = None, score_col: str = "score") -> str:
        """`to_dict` as the sealed JSON text the command line writes."""

        return document_text(self.to_dict(source=source, score_col=score_col))


def auto_buckets(model: PrivacyModel, n: float, epsilon: float | None, n_leaves: int) -> int:
    """B for histogram binning (Cormode & Markov, section 5): B ≈ n^{1/3} balances sampling
    error against bucket width without noise and under distdp (sampling noise dominates);
    B ≈ ε^{1/2} n^{1/4} under OUE. Never more than half the leaves."""
    b = model_of(model).binning_buckets(n, epsilon)
    return int(min(max(round(b), 2), max(2, n_leaves // 2)))


def calibrate_data(
    data: ScoredData,
    *,
    spec: ReleaseSpec | None = None,
    method: Method | str = Method.BINNING,
    buckets: int | str = "auto",
    n_bins: int = DEFAULT_ECE_BINS,
    progress: Callable[[int, int], None] | None = None,
    **release: Unpack[ReleaseKeywords],
) -> CalibrationResult:
    """Simulate the protocol, fit the map from the release, estimate ECE before and after."""
    run = simulate(data, spec=release_spec(spec, release), progress=progress)
    return calibrate_run(run, method=method, buckets=buckets, n_bins=n_bins)


def calibrate_run(
    run: Simulated,
    *,
    method: Method | str = Method.BINNING,
    buckets: int | str = "auto",
    n_bins: int = DEFAULT_ECE_BINS,
) -> CalibrationResult:
    """Fit the map from one release (simulated, or loaded from an aggregate) and estimate ECE
    before and after; exact values when the run knows the truth."""
    try:
        method = Method(method)
    except ValueError as e:
        raise UsageError(f"unknown method {method!r}; choose binning or bbq.") from e
    if not isinstance(n_bins, int) or n_bins < 1:
        raise UsageError(f"`n_bins` must be a positive integer. Found {n_bins!r}.")
    leaves = run.histogram.leaves
    if method is Method.BINNING:
        if buckets == "auto":
            b = auto_buckets(
                run.config.model, run.size_for_tuning, run.config.epsilon, leaves.shape[-1]
            )
        else:
            b = parse_buckets(buckets)

        def fit(x: np.ndarray) -> CalibrationMap:
            return histogram_binning(x, b)

        def fit_rows(xs: np.ndarray) -> list[CalibrationMap]:  # every draw's refit at once
            return histogram_binning_maps(xs, b)
    else:
        if buckets != "auto":
            raise UsageError("`buckets` does not apply to bbq, which averages many binnings.")

        def fit(x: np.ndarray) -> CalibrationMap:
            return bbq(x)

        def fit_rows(xs: np.ndarray) -> list[CalibrationMap]:
            return bbq_maps(xs)

    # ECE of the raw scores is only meaningful if they are probabilities.
    is_probability = run.score_range == (0.0, 1.0)
    check = None
    draws = debiasing_draws(run) if is_probability else None
    if draws is not None:
        # Under noise a map is kept only where the release shows it beats the scores
        # themselves (never worse in expectation); else the map is the scores.
        plain_rows = fit_rows
        mids = run.axis.leaf_midpoints(leaves.shape[-1])
        check_edges = None
        if method is Method.BBQ:
            b = auto_buckets(
                run.config.model, run.size_for_tuning, run.config.epsilon, leaves.shape[-1]
            )
            check_edges = equidepth_edges(leaves[0] + leaves[1], b)

        draw_sums = np.cumsum(draws, axis=-1)  # one pass over the draws for every refit's check

        def fit_rows(xs: np.ndarray) -> list[CalibrationMap]:
            # The maps fitted and checked on all draws at once, each on its draw's own buckets.
            maps = plain_rows(xs)
            if check_edges is None:
                edges = np.stack([m.edges for m in maps])
                values: np.ndarray | None = np.stack([m.values for m in maps])
            else:
                edges = equidepth_edges_rows(xs[:, 0] + xs[:, 1], len(check_edges) - 1)
                values = None
            kept = checks_kept(xs, draws, mids, edges, values, draw_sums)
            return [
                m if k else identity_map(x, mids, m.method)
                for m, x, k in zip(maps, xs, kept, strict=True)
            ]

        cmap, check = check_noisy_map(fit(leaves), leaves, draws, mids, check_edges)
    else:
        cmap = fit(leaves)

    exact_raw = exact_cal = None
    if run.truth is not None:
        exact_raw = exact_ece(run.truth, n_bins) if is_probability else None
        exact_cal = exact_ece(run.truth, n_bins, transform=lambda x: cmap(run.to_unit(x)))
    cal_value = ece_from_histogram(leaves, n_bins, cmap)
    return CalibrationResult(
        run=run,
        method=method,
        map=cmap,
        n_bins=n_bins,
        ece_raw=release_ece(run, n_bins, exact_raw) if is_probability else None,
        ece_calibrated=Estimate(
            cal_value, exact_cal, _calibrated_interval(run, cal_value, n_bins, fit_rows)
        ),
        check=check,
    )


DEBIAS_DRAWS = 50
"""Noise draws taken for the bins' noise variances when a run asks for no interval
(`ci_draws = 0`): the ECE is debiased and a noisy map checked all the same (each variance then
known to about ±20 %)."""


def debiasing_draws(run: Simulated) -> np.ndarray | None:
    """The run's noise draws, or DEBIAS_DRAWS fresh ones (as many as `MAX_DRAW_VALUES` allows)
    where it keeps none (`ci_draws = 0`); None without noise."""
    if run.noise_draws is not None:
        return run.noise_draws
    if run.ci_rng is None:
        return None
    n = max(2, min(DEBIAS_DRAWS, MAX_DRAW_VALUES // run.histogram.leaves.size))
    return noise_draws(run.histogram, n, run.ci_rng)


def release_ece(
    run: Simulated,
    n_bins: int = DEFAULT_ECE_BINS,
    exact: float | None = None,
    departing: np.ndarray | None = None,
) -> Estimate:
    """The ECE of a run's scores (probabilities) from its release, debiased for the noise, with
    its 95 % interval (`fedeval.estimate.ece.ece_estimate`: the worst case where noise swamps
    the counts, the reason where the noisy total is ≤ 0), widened by where the examples may sit
    inside their leaves (`fedeval.estimate.ece_range.discretisation_range` with `smooth`: the leaves
    the release shows smooth read as a smooth density reads them, the gaps too
    (`split_gaps`), give or take the slope's offset and the data's sampling; the examples the
    release shows departing from smooth, and the range's two end leaves, anywhere in their
    leaf); `exact` filled in. `departing`: the run's
    `fedeval.api.curves.release_departures` where already computed, read only where these
    draws are the run's own (`debiasing_draws`: fresh ones where it keeps none)."""
    leaves = run.histogram.leaves
    n_leaves = leaves.shape[-1]
    draws = debiasing_draws(run)
    edges = run.axis.leaf_edges(n_leaves)
    if departing is None or draws is not run.noise_draws:
        departing = departures(leaves, draws, edges, RICHARDSON_MIN_CELLS)
    # The end leaves at their worst, as the AP reads them: nothing beyond them checks their
    # density (a mass on the range's bound, a density diverging there).
    smooth = smooth_offsets(leaves, edges)
    placed = with_end_leaves(beside_cliffs(departing, leaves, draws))
    disc = discretisation_range(leaves, edges, placed, n_bins, smooth=smooth)
    est = ece_estimate(
        leaves,
        draws,
        run.axis.leaf_midpoints(n_leaves),
        n_bins=n_bins,
        discretisation=disc,
        interval=run.ci_draws > 0,
        edges=edges,
    )
    return Estimate(est.estimate, exact, est.ci95, est.note)


def _calibrated_interval(
    run: Simulated,
    calibrated: float,
    n_bins: int,
    fit_rows: Callable[[np.ndarray], list[CalibrationMap]],
) -> tuple[float, float] | None:
    """95% interval of the calibrated ECE: the noise spread over the run's draws (the map
    refitted on each by `fit_rows`, all draws at once), widened by half a leaf width, which
    bounds what placing each leaf's examples at its midpoint can change."""
    if run.ci_draws == 0:
        return None
    leaves = run.histogram.leaves
    sd_cal: float = 0.0
    if run.noise_draws is not None:
        resampled = leaves + run.noise_draws[:REFIT_DRAWS]
        # The map is refitted on each draw: one ECE per draw, under its own map.
        n_leaves = leaves.shape[-1]
        mid = (np.arange(n_leaves) + 0.5) / n_leaves
        scores = np.stack([m(mid) for m in fit_rows(resampled)])
        eces = ece_rows(resampled, n_bins, scores=scores)
        sd_cal = float(noise_sd(eces))
    half_leaf = 0.5 * float(np.max(np.diff(run.axis.leaf_edges(leaves.shape[-1]))))
    lo, hi = interval(calibrated, sd_cal, 0.0, half_leaf)
    return (float(lo), float(hi))


def calibrate(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    spec: ReleaseSpec | None = None,
    method: Method | str = Method.BINNING,
    buckets: int | str = "auto",
    n_bins: int = DEFAULT_ECE_BINS,
    client_ids: ArrayLike | None = None,
    read: ReadOptions | None = None,
    **keywords: Unpack[ArrayKeywords],
) -> CalibrationResult:
    """Fit a calibration map (histogram binning or BBQ) from one private release.

    Parameters are those of `fedeval.evaluate`, plus `method` ('binning' or 'bbq'), `buckets`
    (B for binning; 'auto' follows section 5's balancing) and `n_bins` (M of the ECE).
    """
    spec, read = ReadOptions.settings(spec, read, keywords, file=False)
    data = read.arrays(y_true, y_score, client_ids, spec)
    return calibrate_data(data, spec=spec, method=method, buckets=buckets, n_bins=n_bins)


def calibrate_file(
    source: str | os.PathLike[str],
    *,
    spec: ReleaseSpec | None = None,
    read: ReadOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    method: Method | str = Method.BINNING,
    buckets: int | str = "auto",
    n_bins: int = DEFAULT_ECE_BINS,
    **keywords: Unpack[FileKeywords],
) -> CalibrationResult:
    """`calibrate` on a Parquet/CSV file (or '-' for CSV on stdin), a directory or a glob,
    read and released as `fedeval.evaluate_file` says."""
    spec, read = ReadOptions.settings(spec, read, keywords)
    data = read.table(source, spec)
    return calibrate_data(
        data, spec=spec, method=method, buckets=buckets, n_bins=n_bins, progress=progress
    )


def apply_map_file(
    map_path: str | os.PathLike[str] | MapFile,
    source: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    score_col: str = "score",
    output_col: str = "calibrated",
) -> int:
    """Add a column of calibrated probabilities to every row of `source`; returns the row count.

    Streams batches. `output` ending in .parquet/.pq writes Parquet, any other name CSV (both
    atomically, so a failure leaves no file); None or '-' writes CSV to stdout.
    """
    import pyarrow as pa

    cmap = map_path if isinstance(map_path, MapFile) else load_map(map_path)
    parquet = writes_parquet(output)
    # CSV out keeps every cell's text; Parquet out needs the columns typed.
    _, batches = read_with_scores(
        source, score_col, score_range=cmap.score_range, keep_text=not parquet
    )

    def calibrated() -> Iterator[pa.RecordBatch]:
        for i, (rb, scores) in enumerate(batches):
            if i == 0 and output_col in rb.schema.names:
                raise UsageError(
                    f"'{source_name(source)}' already has a column '{output_col}'; "
                    "choose another name with `output_col`."
                )
            yield rb.append_column(output_col, pa.array(cmap(scores), pa.float64()))

    return write_batches(calibrated(), output)
