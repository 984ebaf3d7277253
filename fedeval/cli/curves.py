"""`fedeval curves`: ROC and PR curves from one private release."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from fedeval.cli.app import app
from fedeval.cli.common import errors_to_exit, estimate_words, plot_file, wrote
from fedeval.cli.evaluate import draw_curves
from fedeval.cli.groups import ONE_SHOT, SOURCE, OneShotOptions, SourceOptions, flat, grouped
from fedeval.cli.helptext import ESTIMATE, RELEASE, command_help
from fedeval.cli.options import (
    EpsilonOpt,
    FileArg,
    ModelOpt,
    QuantilesOpt,
    SeedOpt,
    ShapeOpt,
    option,
)
from fedeval.cli.output_options import format_option, output_option, plot_option
from fedeval.cli.run import ReleaseOptions
from fedeval.core.config import PrivacyModel
from fedeval.core.errors import UsageError
from fedeval.documents.files import document_text

if TYPE_CHECKING:
    from fedeval.tables.output_format import OutputSpec


class CurvesFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def curves_output(output: Path | None, fmt: CurvesFormat) -> OutputSpec | None:
    """What curves writes (None: the table on stdout). -o's name picks the format and the
    compression by the one rule of `fedeval.tables.output_format` (.json, .csv[.gz|.bz2|.zst],
    .parquet); a name that asks for none takes --format (json for --format table). A --format
    other than table that disagrees with the name is refused, not silently overridden."""
    from fedeval.tables.output_format import DataFormat, OutputSpec, output_spec, spec_from_name

    output_spec(output, writes=(DataFormat.JSON, DataFormat.CSV, DataFormat.PARQUET))
    named = spec_from_name(output)
    if named is None:
        if fmt is CurvesFormat.table:
            return None if output is None else OutputSpec(DataFormat.JSON)
        return OutputSpec(DataFormat(fmt.value))
    if fmt is not CurvesFormat.table and fmt.value != named.format.value:
        raise UsageError(
            f"--format {fmt.value} and -o '{output}' disagree: the name asks for "
            f"{named.format.value}. Drop --format, or name the file .{fmt.value}."
        )
    return named


@app.command(rich_help_panel=ESTIMATE)
@command_help
@grouped
def curves(
    file: FileArg = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    quantiles: QuantilesOpt = 100,
    curve_method: Annotated[
        str,
        option(
            "leaves (every leaf edge) or pchip (the papers' Q quantiles).",
            "--curve-method",
            metavar="leaves|pchip",
            panel=RELEASE,
        ),
    ] = "leaves",
    height: Annotated[
        str,
        option(
            "h: 2^h cells; auto: ⌈log₂ Q⌉ + 2 (the papers' choice); auto:auc (or ap, "
            "comma-separated): chosen by a DP probe for those metrics.",
            metavar="auto[:METRIC,…]|H",
            panel=RELEASE,
        ),
    ] = "auto",
    shape: ShapeOpt = "auto",
    seed: SeedOpt = None,
    output_format: Annotated[
        CurvesFormat,
        format_option(
            "table (areas, a dozen points), json or csv (every point).", "table|json|csv"
        ),
    ] = CurvesFormat.table,
    output: Annotated[
        Path | None,
        output_option("Write the points here: .json, .csv[.gz], .parquet (- for stdout)."),
    ] = None,
    plot: Annotated[str | None, plot_option("the ROC and PR curves")] = None,
    source: SourceOptions = SOURCE,
    one_shot: OneShotOptions = ONE_SHOT,
) -> None:
    """ROC and PR curves from one private release.

    Shows the area under each estimated curve beside the exact one, and the area between the
    estimated and the exact curve. --curve-method pchip rebuilds each class's scores from Q
    quantiles instead (the papers' estimator).

    Examples:
    $ fedeval curves scores.parquet -m distdp --plot curves.png
    $ fedeval curves scores.parquet -o roc_pr.csv.gz
    $ fedeval curves --from aggregate.fedeval -f json

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.api.curves import curve_result, roc_pr_curves_file
    from fedeval.tables.output_format import DataFormat, encoded_text
    from fedeval.views.render import Context, Format, render

    with errors_to_exit():
        release = ReleaseOptions.of(flat(locals()))
        plot_path = plot_file(plot, "curves.png")
        release.check()
        spec = curves_output(output, output_format)  # before any work
        c = release.estimate(
            lambda run: curve_result(run, quantiles, curve_method),
            lambda file, **options: roc_pr_curves_file(
                file, quantiles=quantiles, method=curve_method, **options
            ),
        )
        name = release.source
        cdoc = render(c, Format.JSON, Context(name))
        text = data = None  # --format table on a terminal
        if spec is not None and spec.format is DataFormat.JSON:
            text = document_text(cdoc, sign_key=release.signer)
        elif spec is not None and spec.format is DataFormat.CSV:
            text = render(c, Format.CSV)
        if text is not None:
            data = encoded_text(text, None if spec is None else spec.compression)
        elif spec is not None:  # Parquet, to a file
            data = render(c, Format.PARQUET)
        to_stdout = release.commit(
            c.run,
            doc=cdoc,
            text=data,
            output=output,
            plot=None if plot_path is None else (plot_path, lambda p: draw_curves(c, p)),
        )
        if spec is None:
            render(c, Format.TABLE, Context(name))
        elif text is not None and (to_stdout or output is None):
            sys.stdout.write(text)
        areas = cdoc["curves"]
        wrote(
            output,
            f"curves written · ROC AUC {estimate_words(areas.get('roc_auc'))} · AP "
            f"{estimate_words(areas.get('average_precision'))}",
        )
