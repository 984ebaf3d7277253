"""How the entry points of evaluate, curves and calibrate read their input under a release's
settings: arrays (`scored_from_arrays`) or a file (`read_scored`) into `ScoredData`, keeping
what the run needs (`ReleaseSpec.reading`: raw scores for the exact values, examples for the
per-client path, the leaf resolution). `scale` maps the scores onto the cells: a score range
(linear), or the axis evaluate shapes around its thresholds.

How the input is read is one frozen record, `ReadOptions`, as a release is one `ReleaseSpec`:
an entry point takes it as `read`, or its fields as keywords (`ReadKeywords`; on arrays the
three that apply to arrays, `ArrayKeywords`), never both.

>>> spec, read = ReadOptions.settings(None, None, {"pos_label": "yes", "seed": 1})
>>> spec.seed, read.pos_label, read.exact
(1, 'yes', True)
>>> ReadOptions.settings(None, ReadOptions(threads=1), {"threads": 2})
Traceback (most recent call last):
...
fedeval.core.errors.UsageError: give `read` or the reading keywords, not both. Found `read` \
and `threads`: set them on the options (dataclasses.replace).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import numpy.typing as npt

from fedeval.core.axis import ScoreAxis
from fedeval.core.errors import UsageError
from fedeval.core.spec import ReleaseKeywords, ReleaseSpec, release_spec
from fedeval.protocol.simulate import check_both_classes
from fedeval.tables.read import DEFAULT_COLUMNS, Columns, source_name
from fedeval.tables.scored import ScoredData, read_scored, scored_from_arrays

Scale = tuple[float, float] | ScoreAxis
"""A score range (lo, hi), mapped linearly onto the cells, or a `ScoreAxis`."""


def _scale(scale: Scale) -> dict[str, Any]:
    """`scale` as the readers' keywords: `axis`, or `score_range`."""
    return {"axis": scale} if isinstance(scale, ScoreAxis) else {"score_range": scale}


class ReadKeywords(TypedDict, total=False):
    """The fields of `ReadOptions`, as the `*_file` entry points accept them as keywords."""

    columns: Columns
    pos_label: object
    score_range: tuple[float, float]
    exact: bool
    threads: int | None
    read_progress: Callable[[int | None], None] | None


class FileKeywords(ReleaseKeywords, ReadKeywords, total=False):
    """The keywords of a `*_file` entry point: a release's (`ReleaseKeywords`, which `spec`
    replaces) and a read's (`ReadKeywords`, which `read` replaces)."""


class ArrayKeywords(ReleaseKeywords, total=False):
    """The keywords of an entry point on arrays: a release's and the `ReadOptions` fields that
    apply to arrays (`read` replaces them)."""

    pos_label: object
    score_range: tuple[float, float]
    exact: bool


READ_KEYWORDS = frozenset(ReadKeywords.__optional_keys__)
"""The names of `ReadKeywords`, which `read` replaces."""
FILE_ONLY = ("columns", "threads", "read_progress")
"""The fields of `ReadOptions` that only a file's reading uses."""


@dataclass(frozen=True)
class ReadOptions:
    """How an entry point reads its table (`table`) or arrays (`arrays`): made once, passed
    down unchanged.

    Attributes
    ----------
    columns : the score, label and (optional) client columns (`fedeval.tables.read.Columns`).
    pos_label : the label value of the positive class (None: 1/True).
    score_range : the range (lo, hi) the scores lie in.
    exact : also compute the exact metrics (keeps the raw scores in memory).
    threads : reading threads (None: every core; the same result for any number).
    read_progress : called with the rows read after each batch (None: silent).
    """

    columns: Columns = DEFAULT_COLUMNS
    pos_label: object = None
    score_range: tuple[float, float] = (0.0, 1.0)
    exact: bool = True
    threads: int | None = None
    read_progress: Callable[[int | None], None] | None = None

    @classmethod
    def settings(
        cls,
        spec: ReleaseSpec | None,
        read: ReadOptions | None,
        keywords: FileKeywords | ArrayKeywords,
        *,
        file: bool = True,
    ) -> tuple[ReleaseSpec, ReadOptions]:
        """An entry point's release (`spec`, or its release keywords: `release_spec`) and
        reading (`read`, or its reading keywords): each given one way, never both, so that no
        keyword is silently ignored; a keyword of neither kind is a TypeError
        (`ReleaseSpec.of`). On arrays (`file` False) the file-only fields are refused."""
        names = READ_KEYWORDS if file else READ_KEYWORDS.difference(FILE_ONLY)
        given = {k: v for k, v in keywords.items() if k in names}
        release = {k: v for k, v in keywords.items() if k not in names}
        if read is None:
            read = cls(**cast(dict[str, Any], given))
        elif given:
            found = ", ".join(f"`{k}`" for k in given)
            raise UsageError(
                f"give `read` or the reading keywords, not both. Found `read` and {found}: "
                "set them on the options (dataclasses.replace)."
            )
        if not file and any(getattr(read, k) != getattr(_DEFAULT, k) for k in FILE_ONLY):
            raise UsageError("`columns`, `threads` and `read_progress` read files, not arrays.")
        return release_spec(spec, cast(ReleaseKeywords, release)), read

    def arrays(
        self,
        y_true: npt.ArrayLike,
        y_score: npt.ArrayLike,
        client_ids: npt.ArrayLike | None,
        spec: ReleaseSpec,
        resolution: int | None = None,
        scale: Scale | None = None,
    ) -> ScoredData:
        """In-memory labels and scores (and clients) as the run under `spec` reads them, the
        scores mapped by `scale` (default: `score_range`); the leaves at `resolution`
        (default: the spec's)."""
        return scored_from_arrays(
            y_true,
            y_score,
            client_ids=client_ids,
            pos_label=self.pos_label,
            **_scale(self.score_range if scale is None else scale),
            **spec.reading(exact=self.exact, resolution=resolution),
        )

    def table(
        self,
        source: str | os.PathLike[str],
        spec: ReleaseSpec,
        resolution: int | None = None,
        scale: Scale | None = None,
    ) -> ScoredData:
        """A Parquet/CSV file (or '-'), a directory or a glob as the run under `spec` reads
        it, by `threads` threads, the scores mapped by `scale` (default: `score_range`)."""
        data = read_scored(
            source,
            self.columns,
            pos_label=self.pos_label,
            **_scale(self.score_range if scale is None else scale),
            **spec.reading(exact=self.exact, resolution=resolution),
            threads=self.threads,
            progress=self.read_progress,
        )
        # Here the refusal can name the file and the label column (the run's own check cannot).
        where = f"'{source_name(source)}', column '{self.columns.label}': "
        check_both_classes(data, spec.model, where)
        return data


_DEFAULT = ReadOptions()
