"""How the entry points of evaluate, curves and calibrate read their input under a release's
settings: arrays (`scored_from_arrays`) or a file (`read_scored`) into `ScoredData`, keeping
what the run needs (`ReleaseSpec.reading`: raw scores for the exact values, examples for the
per-client path, the leaf resolution). `scale` maps the scores onto the cells: a score range
(linear), or the axis evaluate shapes around its thresholds."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy.typing as npt

from fedeval.core.axis import ScoreAxis
from fedeval.core.spec import ReleaseSpec
from fedeval.protocol.simulate import check_both_classes
from fedeval.tables.read import Columns, source_name
from fedeval.tables.scored import ScoredData, read_scored, scored_from_arrays

Scale = tuple[float, float] | ScoreAxis
"""A score range (lo, hi), mapped linearly onto the cells, or a `ScoreAxis`."""


def _scale(scale: Scale) -> dict[str, Any]:
    """`scale` as the readers' keywords: `axis`, or `score_range`."""
    return {"axis": scale} if isinstance(scale, ScoreAxis) else {"score_range": scale}


def data_from_arrays(
    y_true: npt.ArrayLike,
    y_score: npt.ArrayLike,
    client_ids: npt.ArrayLike | None,
    pos_label: object,
    scale: Scale,
    spec: ReleaseSpec,
    exact: bool,
    resolution: int | None = None,
) -> ScoredData:
    """In-memory labels and scores (and clients) as the run under `spec` reads them; the
    leaves at `resolution` (default: the spec's)."""
    reading = spec.reading(exact=exact, resolution=resolution)
    return scored_from_arrays(
        y_true, y_score, client_ids=client_ids, pos_label=pos_label, **_scale(scale), **reading
    )


def data_from_file(
    source: str | os.PathLike[str],
    columns: Columns,
    pos_label: object,
    scale: Scale,
    spec: ReleaseSpec,
    exact: bool,
    threads: int | None,
    read_progress: Callable[[int | None], None] | None,
    resolution: int | None = None,
) -> ScoredData:
    """A Parquet/CSV file (or '-'), a directory or a glob as the run under `spec` reads it, by
    `threads` threads; `read_progress(rows)` after each batch."""
    reading = spec.reading(exact=exact, resolution=resolution)
    data = read_scored(
        source,
        columns,
        pos_label=pos_label,
        **_scale(scale),
        **reading,
        threads=threads,
        progress=read_progress,
    )
    # Here the refusal can name the file and the label column (the run's own check cannot).
    check_both_classes(data, spec.model, f"'{source_name(source)}', column '{columns.label}': ")
    return data
