"""`fedeval evaluate`: metrics from one private release."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from fedeval.cli.app import app
from fedeval.cli.budget import apply_gates, gate_options, judge_gates, with_gate_thresholds
from fedeval.cli.common import (
    OutputFormat,
    check_buckets,
    errors_to_exit,
    plot_file,
    show,
)
from fedeval.cli.options import (
    BudgetOpt,
    CiDrawsOpt,
    ClientColOpt,
    EpsilonOpt,
    ExactOpt,
    FailOverOpt,
    FailUnderOpt,
    FileArg,
    FromOpt,
    GateOnOpt,
    HeightOpt,
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

if TYPE_CHECKING:
    from fedeval.api.curves import CurveResult


@app.command()
def evaluate(
    file: FileArg = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    buckets: Annotated[
        str,
        typer.Option(
            help="AUC buckets: 'auto' uses the leaves; B uses B equi-depth buckets at the "
            "estimated quantiles (the papers' estimator).",
        ),
    ] = "auto",
    thresholds: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated thresholds for precision/recall/accuracy (positive means score "
            "≥ t). Declared here, they become cell edges of the release: exact sums of cells, no "
            "interpolation (asked later from a saved release, a threshold inside a cell gets the "
            "worst case of where its examples sit) \\[default: 1/11 … 10/11 of the score range].",
            show_default=False,
        ),
    ] = None,
    quantiles: QuantilesOpt = 100,
    seed: SeedOpt = None,
    output_format: Annotated[
        OutputFormat,
        typer.Option("--format", "-f", help="table for people, json for programs (one document)."),
    ] = OutputFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the JSON report to this file instead of stdout (- for stdout).",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option(
            help="Draw the ROC and PR curves: a .png or .svg file, or a directory ending in / "
            "(curves.png in it).",
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
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    gate_on: GateOnOpt = "bound",
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
    """Estimate ROC AUC, curve areas and precision/recall/accuracy from one private release.

    Simulates the protocol on FILE (one example per client unless a client column is given) and
    prints each estimate beside its exact value.

    Example: [bold]fedeval evaluate scores.parquet --model distdp --epsilon 1 --format json[/bold]

    CI gate: [bold]fedeval evaluate s.parquet --fail-under auc=0.85 --fail-over ece=0.03[/bold]

    Exit codes: 0 ok · 1 a quality gate failed · 2 bad input or usage, or a release refused by
    the ledger (nothing is written).
    """
    from fedeval.api.evaluate import evaluate_file, evaluate_run
    from fedeval.views.dicts import evaluation_dict
    from fedeval.views.terminal import render_table

    with errors_to_exit():
        release = ReleaseOptions.of(locals())
        check_buckets(buckets)
        plot_path = plot_file(plot, "curves.png")
        gates, on = gate_options(fail_under, fail_over, gate_on)
        release.check()
        ev = release.estimate(
            lambda run: evaluate_run(
                run,
                buckets=buckets,
                thresholds=with_gate_thresholds(thresholds, gates, run.score_range),
                quantiles=quantiles,
            ),
            lambda file, **options: evaluate_file(
                file,
                buckets=buckets,
                thresholds=with_gate_thresholds(thresholds, gates, release.unit_range),
                quantiles=quantiles,
                **options,
            ),
        )
        name = release.source
        report = evaluation_dict(ev, source=name)
        doc = document_text(report, sign_key=release.signer)
        verdicts = judge_gates(gates, on, report)
        to_stdout = release.commit(
            ev.run,
            doc=report,
            text=doc,
            output=output,
            plot=None if plot_path is None else (plot_path, lambda p: draw_curves(ev.curves, p)),
        )
        as_json = doc if output_format is OutputFormat.json else None
        show(doc, to_stdout, output, as_json, lambda: render_table(ev, Console(), source=name))
        apply_gates(verdicts, on)


def draw_curves(curves: CurveResult, path: Path) -> None:
    """The ROC and PR curves drawn to `path` (matplotlib is imported only for a plot)."""
    from fedeval.views.plots import plot_curves

    plot_curves(curves, path)
