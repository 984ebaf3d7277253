"""`fedeval evaluate`: metrics from one private release."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from fedeval.cli.app import app
from fedeval.cli.common import (
    OutputFormat,
    check_buckets,
    emit,
    errors_to_exit,
    parse_score_range,
    plot_file,
    progress_bar,
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
from fedeval.cli.run import (
    apply_gates,
    charge_if_new,
    check_ledger_options,
    gate_options,
    keys_apply,
    loaded_run,
    source_or_aggregate,
    stage_release,
    table_options,
    with_gate_thresholds,
)
from fedeval.config import PrivacyModel, Unit
from fedeval.documents import document_text
from fedeval.outputs import Outputs


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
    from fedeval.evaluate import evaluate_file
    from fedeval.io import source_name
    from fedeval.report import render_table, to_dict

    with errors_to_exit(), progress_bar("encoding client reports", per_client) as progress:
        check_buckets(buckets)
        plot_path = plot_file(plot, "curves.png")
        gates, on = gate_options(fail_under, fail_over, gate_on)
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
        if from_ is not None:
            from fedeval.evaluate import evaluate_run

            run = loaded_run(from_, seed, ci_draws, verify_key)
            ev = evaluate_run(
                run,
                buckets=buckets,
                thresholds=with_gate_thresholds(thresholds, gates, run.score_range),
                quantiles=quantiles,
            )
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
            ev = evaluate_file(
                file,
                model=model,
                epsilon=epsilon,
                height=height,
                shape=shape,
                buckets=buckets,
                thresholds=with_gate_thresholds(thresholds, gates, parse_score_range(score_range)),
                quantiles=quantiles,
                seed=seed,
                ci_draws=ci_draws,
                **opts,
            )
            name = source_name(file)
        report = to_dict(ev, source=name)
        covered = (
            f"evaluate: AUC, ECE, ROC/PR curves (Q = {ev.curves.quantiles}), P/R/A at "
            f"{len(ev.thresholds)} thresholds"
        )
        doc = document_text(report)
        with Outputs() as out:
            to_stdout = emit(doc, output, out)
            stage_release(out, save_release, ev.run, sign_key)
            if plot_path is not None:
                from fedeval.plot import plot_curves

                plot_curves(ev.curves, out.staged_path(plot_path))
            charge_if_new(ledger, budget, report, "evaluate", covered, name, ev.run)
            out.commit()
        if to_stdout or (output is None and output_format is OutputFormat.json):
            sys.stdout.write(doc)
        elif output is None:
            render_table(ev, Console(), source=name)
        apply_gates(gates, on, report)
