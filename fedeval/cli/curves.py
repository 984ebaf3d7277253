"""`fedeval curves`: ROC and PR curves from one private release."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from fedeval.cli.common import errors_to_exit, estimate_words
from fedeval.cli.groups import ONE_SHOT, SOURCE, OneShotOptions, SourceOptions, flat
from fedeval.cli.helptext import RELEASE
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
from fedeval.cli.run import ReleaseOptions, estimate_command, printed_text
from fedeval.core.config import PrivacyModel
from fedeval.core.errors import UsageError
from fedeval.documents.files import document_text

if TYPE_CHECKING:
    from fedeval.tables.output_format import OutputSpec


def curves_output(output: Path | None, fmt: str) -> OutputSpec | None:
    """What curves writes (None: the table on stdout). -o's name picks the format and the
    compression by the one rule of `fedeval.tables.output_format` (.json, .csv[.gz|.bz2|.zst],
    .parquet); a name that asks for none takes --format (json for --format table). A --format
    other than table that disagrees with the name is refused, not silently overridden."""
    from fedeval.tables.output_format import DataFormat, OutputSpec, output_spec, spec_from_name

    output_spec(output, writes=(DataFormat.JSON, DataFormat.CSV, DataFormat.PARQUET))
    named = spec_from_name(output)
    if named is None:
        if fmt in {f.value for f in DataFormat}:
            return OutputSpec(DataFormat(fmt))
        if output is None:
            return None  # the table, or another printed format, on stdout
        if fmt != "table":
            raise UsageError(f"--format {fmt} prints to stdout: drop -o.")
        return OutputSpec(DataFormat.JSON)
    if fmt != "table" and fmt != named.format.value:
        raise UsageError(
            f"--format {fmt} and -o '{output}' disagree: the name asks for "
            f"{named.format.value}. Drop --format, or name the file .{fmt}."
        )
    return named


@estimate_command
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
        str,
        format_option(
            "table (areas, a dozen points), json or csv (every point).",
            "CurveResult",
            "table|json|csv",
        ),
    ] = "table",
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
        plot_path = release.plot_path("curves.png")
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
        to_stdout = release.commit(c, doc=cdoc, text=data, plot=plot_path)
        shown = printed_text(c, output_format, "", name)  # the table: None
        if spec is None and shown is None:
            render(c, Format.TABLE, Context(name))
        elif spec is None and shown is not None:
            sys.stdout.write(shown)
        elif text is not None and (to_stdout or output is None):
            sys.stdout.write(text)
        areas = cdoc["curves"]
        release.wrote(
            f"curves written · ROC AUC {estimate_words(areas.get('roc_auc'))} · AP "
            f"{estimate_words(areas.get('average_precision'))}",
        )
