"""`fedeval curves`: ROC and PR curves from one private release."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from fedeval.cli.app import app
from fedeval.cli.common import emit, errors_to_exit, plot_file, progress_bar
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
from fedeval.cli.run import (
    charge_if_new,
    check_ledger_options,
    keys_apply,
    loaded_run,
    source_or_aggregate,
    stage_release,
    table_options,
)
from fedeval.config import PrivacyModel, Unit
from fedeval.documents import document_text
from fedeval.outputs import Outputs


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
    from fedeval.curves import roc_pr_curves_file
    from fedeval.io import source_name
    from fedeval.report import curves_csv, curves_dict, render_curves_table

    with errors_to_exit(), progress_bar("encoding client reports", per_client) as progress:
        plot_path = plot_file(plot, "curves.png")
        check_ledger_options(ledger, budget)
        keys_apply(save_release, sign_key, from_, verify_key)
        source_or_aggregate(
            file,
            from_,
            epsilon=epsilon,
            height=height,
            shape=shape,
            per_client=per_client,
            unit=unit,
            max_examples=max_examples,
            relation=relation,
        )
        fmt = output_format
        if fmt is CurvesFormat.table and output is not None:  # a file, or - : data, not a table
            fmt = CurvesFormat.csv if output.suffix.lower() == ".csv" else CurvesFormat.json
        if from_ is not None:
            from fedeval.curves import curve_result

            c = curve_result(loaded_run(from_, seed, ci_draws, verify_key), quantiles, curve_method)
            name = str(from_)
        else:
            opts = table_options(
                score_col,
                label_col,
                client_col,
                score_range,
                pos_label,
                exact,
                per_client,
                progress,
                unit=unit,
                max_examples=max_examples,
                relation=relation,
                threads=threads,
            )
            c = roc_pr_curves_file(
                file,
                quantiles=quantiles,
                method=curve_method,
                model=model,
                epsilon=epsilon,
                height=height,
                shape=shape,
                seed=seed,
                ci_draws=ci_draws,
                **opts,
            )
            name = source_name(file)
        cdoc = curves_dict(c, source=name)
        covered = f"curves: ROC and PR, Q = {c.quantiles}"
        text = None  # --format table on a terminal
        if fmt is CurvesFormat.json:
            text = document_text(cdoc)
        elif fmt is CurvesFormat.csv:
            text = curves_csv(c)
        with Outputs() as out:
            to_stdout = emit(text, output, out)
            stage_release(out, save_release, c.run, sign_key)
            if plot_path is not None:
                from fedeval.plot import plot_curves

                plot_curves(c, out.staged_path(plot_path))
            charge_if_new(ledger, budget, cdoc, "curves", covered, name, c.run)
            out.commit()
        if text is None:
            render_curves_table(c, Console(), source=name)
        elif to_stdout or output is None:
            sys.stdout.write(text)
