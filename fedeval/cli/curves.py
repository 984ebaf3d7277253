"""`fedeval curves`: ROC and PR curves from one private release."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from fedeval.cli.app import app
from fedeval.cli.common import errors_to_exit, plot_file
from fedeval.cli.evaluate import draw_curves
from fedeval.cli.options import (
    BudgetOpt,
    CiDrawsOpt,
    ClientColOpt,
    EpsilonOpt,
    ExactOpt,
    FileArg,
    FromOpt,
    LabelColOpt,
    LedgerOpt,
    MaxExamplesOpt,
    ModelOpt,
    PerClientOpt,
    PosLabelOpt,
    QuantilesOpt,
    RelationOpt,
    SaveReleaseOpt,
    ScoreColOpt,
    ScoreRangeOpt,
    SeedOpt,
    ShapeOpt,
    SignKeyOpt,
    ThreadsOpt,
    UnitOpt,
    VerifyKeyOpt,
)
from fedeval.cli.run import ReleaseOptions
from fedeval.core.config import PrivacyModel, Unit
from fedeval.documents.files import document_text


class CurvesFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


@app.command()
def curves(
    file: FileArg = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    quantiles: QuantilesOpt = 100,
    curve_method: Annotated[
        str,
        typer.Option(
            "--curve-method",
            help="leaves (every released leaf edge; more accurate, the default) or pchip "
            "(the papers' Q-quantile PCHIP estimator).",
        ),
    ] = "leaves",
    height: Annotated[
        str,
        typer.Option(
            help="Leaf height h; 'auto' is ⌈log₂ Q⌉ + 2 (the papers' choice, branching 2)."
        ),
    ] = "auto",
    shape: ShapeOpt = "auto",
    seed: SeedOpt = None,
    output_format: Annotated[
        CurvesFormat,
        typer.Option(
            "--format",
            "-f",
            help="table (areas and a dozen points), json (areas and every point), csv (points).",
        ),
    ] = CurvesFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the json/csv output to this file instead of stdout (- for stdout; with "
            "--format table, csv for a .csv name, else json).",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option(
            help="Draw ROC and PR curves, estimated over exact: a .png or .svg file, or a "
            "directory ending in / (curves.png in it).",
            show_default=False,
        ),
    ] = None,
    score_col: ScoreColOpt = "score",
    label_col: LabelColOpt = "label",
    client_col: ClientColOpt = None,
    score_range: ScoreRangeOpt = "0,1",
    pos_label: PosLabelOpt = None,
    per_client: PerClientOpt = False,
    exact: ExactOpt = True,
    ci_draws: CiDrawsOpt = 200,
    ledger: LedgerOpt = None,
    budget: BudgetOpt = None,
    from_: FromOpt = None,
    save_release: SaveReleaseOpt = None,
    sign_key: SignKeyOpt = None,
    verify_key: VerifyKeyOpt = None,
    unit: UnitOpt = Unit.EXAMPLE,
    max_examples: MaxExamplesOpt = None,
    relation: RelationOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """ROC and PR curves from one private release, through every leaf edge (or Q quantiles per
    class, PCHIP-interpolated: --curve-method pchip).

    Prints the area under each estimated curve beside the exact one, and the area between the
    estimated and the exact curve.

    Example: [bold]fedeval curves scores.parquet --model distdp -q 128 --plot curves.png[/bold]

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.api.curves import curve_result, roc_pr_curves_file
    from fedeval.views.dicts import curves_csv, curves_dict
    from fedeval.views.terminal import render_curves_table

    with errors_to_exit():
        release = ReleaseOptions.of(locals())
        plot_path = plot_file(plot, "curves.png")
        release.check()
        fmt = output_format
        if fmt is CurvesFormat.table and output is not None:  # a file, or - : data, not a table
            fmt = CurvesFormat.csv if output.suffix.lower() == ".csv" else CurvesFormat.json
        c = release.estimate(
            lambda run: curve_result(run, quantiles, curve_method),
            lambda file, **options: roc_pr_curves_file(
                file, quantiles=quantiles, method=curve_method, **options
            ),
        )
        name = release.source
        cdoc = curves_dict(c, source=name)
        text = None  # --format table on a terminal
        if fmt is CurvesFormat.json:
            text = document_text(cdoc, sign_key=release.signer)
        elif fmt is CurvesFormat.csv:
            text = curves_csv(c)
        to_stdout = release.commit(
            c.run,
            doc=cdoc,
            text=text,
            output=output,
            plot=None if plot_path is None else (plot_path, lambda p: draw_curves(c, p)),
        )
        if text is None:
            render_curves_table(c, Console(), source=name)
        elif to_stdout or output is None:
            sys.stdout.write(text)
