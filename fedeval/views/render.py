"""Every way a result is shown, in one table keyed by (result type, format): the versioned
JSON document, the rich table, CSV and Parquet of the points, the figure. Results are plain
frozen data that know nothing of this; the command line calls `render`.

>>> sorted(f.value for f in formats("CurveResult"))
['csv', 'figure', 'json', 'parquet', 'table']

A new output format is one renderer and its lines in `RENDERERS` (ARCHITECTURE.md, "Where to
add things"). The multiclass result sits above this layer (its types live in
`fedeval.multiclass`), so `fedeval.multiclass.views` adds its two lines with `register` when
the package is imported, which it is wherever such a result exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, overload

from rich.console import Console

from fedeval.views.compare import compare_dict, render_compare_table
from fedeval.views.compare_plots import comparison_figure
from fedeval.views.dicts import curves_csv, curves_dict, curves_parquet, evaluation_dict, map_dict
from fedeval.views.plots import curves_figure, reliability_figure
from fedeval.views.terminal import render_calibration_table, render_curves_table, render_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Format(StrEnum):
    """What a renderer makes: JSON, a dict (the document ``--format json`` writes); TABLE, rich
    tables printed on the context's console; CSV, text; PARQUET, a file's bytes; FIGURE, the
    matplotlib figure ``--plot`` saves (matplotlib, the optional extra, is imported then)."""

    JSON = "json"
    TABLE = "table"
    CSV = "csv"
    PARQUET = "parquet"
    FIGURE = "figure"


@dataclass(frozen=True)
class Context:
    """What a renderer may need beside the result: the input's name (stated in a simulation's
    documents), the console a table is printed on, the score column a map names."""

    source: str | None = None
    console: Console = field(default_factory=Console)
    score_col: str = "score"


Rendered: TypeAlias = "dict[str, Any] | str | bytes | Figure | None"
Renderer = Callable[[Any, Context], Rendered]

RENDERERS: dict[tuple[str, Format], Renderer] = {
    ("Evaluation", Format.JSON): lambda r, c: evaluation_dict(r, source=c.source),
    ("Evaluation", Format.TABLE): lambda r, c: render_table(r, c.console, source=c.source),
    ("Evaluation", Format.FIGURE): lambda r, c: curves_figure(r.curves),
    ("CurveResult", Format.JSON): lambda r, c: curves_dict(r, source=c.source),
    ("CurveResult", Format.TABLE): lambda r, c: render_curves_table(r, c.console, source=c.source),
    ("CurveResult", Format.CSV): lambda r, c: curves_csv(r),
    ("CurveResult", Format.PARQUET): lambda r, c: curves_parquet(r),
    ("CurveResult", Format.FIGURE): lambda r, c: curves_figure(r),
    ("CalibrationResult", Format.JSON): lambda r, c: map_dict(
        r, source=c.source, score_col=c.score_col
    ),
    ("CalibrationResult", Format.TABLE): lambda r, c: render_calibration_table(
        r, c.console, source=c.source
    ),
    ("CalibrationResult", Format.FIGURE): lambda r, c: reliability_figure(r),
    ("Comparison", Format.JSON): lambda r, c: compare_dict(r, source=c.source),
    ("Comparison", Format.TABLE): lambda r, c: render_compare_table(r, c.console, source=c.source),
    ("Comparison", Format.FIGURE): lambda r, c: comparison_figure(r),
}
"""(the result's class name, format) → renderer. Keyed by name: the result classes live in
the layer above (`fedeval.api`), which imports these views."""


def register(result_type: str, fmt: Format, renderer: Renderer) -> None:
    """Add a renderer for a result type defined above this layer (`fedeval.multiclass`)."""
    RENDERERS[(result_type, fmt)] = renderer


def formats(result_type: str) -> list[Format]:
    """The formats a result type can be rendered in."""
    return [f for f in Format if (result_type, f) in RENDERERS]


FILE_ONLY = frozenset({Format.PARQUET, Format.FIGURE})
"""Formats a command writes only to a file: Parquet where -o's name asks for it, the figure
where --plot does. Every other format is one a command's --format prints."""


def printed_formats(result_type: str) -> list[Format]:
    """The formats `--format` offers for a result type: the table first, then every other
    renderer of `RENDERERS` that is not `FILE_ONLY`, in `Format`'s order."""
    shown = [f for f in formats(result_type) if f not in FILE_ONLY]
    return sorted(shown, key=lambda f: f is not Format.TABLE)


@overload
def render(
    result: object, fmt: Literal[Format.JSON], context: Context | None = None
) -> dict[str, Any]: ...
@overload
def render(result: object, fmt: Literal[Format.TABLE], context: Context | None = None) -> None: ...
@overload
def render(result: object, fmt: Literal[Format.CSV], context: Context | None = None) -> str: ...
@overload
def render(
    result: object, fmt: Literal[Format.PARQUET], context: Context | None = None
) -> bytes: ...
@overload
def render(
    result: object, fmt: Literal[Format.FIGURE], context: Context | None = None
) -> Figure: ...
@overload
def render(result: object, fmt: Format | str, context: Context | None = None) -> Rendered: ...
def render(result: object, fmt: Format | str, context: Context | None = None) -> Rendered:
    """`result` shown in `fmt`: the renderer `RENDERERS` holds for its type and the format.

    A result type or format without a renderer is a `TypeError` (a programming error: the
    command line offers only the formats a command's result has)."""
    kind = type(result).__name__
    renderer = RENDERERS.get((kind, Format(fmt)))
    if renderer is None:
        shown = ", ".join(f.value for f in formats(kind)) or "none"
        raise TypeError(f"no {Format(fmt).value} renderer for a {kind} (it has: {shown})")
    return renderer(result, context or Context())
