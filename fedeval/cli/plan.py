"""`fedeval plan`: the error to expect for a population, and the population needed."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fedeval.cli.app import app
from fedeval.cli.common import OutputFormat, err, errors_to_exit, progress_bar
from fedeval.cli.helptext import PLAN, command_help
from fedeval.cli.options import EpsilonOpt, ModelOpt
from fedeval.core.config import PrivacyModel


@app.command(rich_help_panel=PLAN)
@command_help
def plan(
    rows: Annotated[
        int | None,
        typer.Option(
            "--rows",
            "-n",
            min=100,
            help="Population: examples (one per client) \\[default: the rows of --like].",
            show_default=False,
        ),
    ] = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    positives_fraction: Annotated[
        float | None,
        typer.Option(
            help="Share of positive examples, strictly between 0 and 1 \\[default: that of "
            "--like, else 0.5].",
            show_default=False,
        ),
    ] = None,
    auc: Annotated[
        float, typer.Option(help="ROC AUC of the reference scores (binormal model).")
    ] = 0.85,
    like: Annotated[
        str | None,
        typer.Option(
            help="Use this scored table's score distribution as the reference instead "
            "(a pilot or validation set; any size).",
            show_default=False,
        ),
    ] = None,
    target_error: Annotated[
        float | None,
        typer.Option(help="Also find the population needed for this expected |error|."),
    ] = None,
    metric: Annotated[
        str, typer.Option(help="Metric for --target-error: pra (precision/recall/accuracy) or auc.")
    ] = "pra",
    heights: Annotated[
        bool, typer.Option("--heights", help="Also show the predicted error at every height.")
    ] = False,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="table, or json (one document).")
    ] = OutputFormat.table,
    seed: Annotated[int, typer.Option(help="Seed of the reference population.")] = 0,
) -> None:
    """The error to expect for a population, and the population needed.

    Recommends h, B and Q, and finds the n a target error needs.

    Runs fedeval's own estimators on a reference population of the given size (binormal scores
    with the given AUC, or the score distribution of --like), so the prediction is what
    evaluate, curves and calibrate will do with --height auto. Measured errors fall within about
    2.5× of the binormal prediction and 1.9× with --like: pass a pilot file when you have one.

    Examples:
    $ fedeval plan --rows 200000 -m distdp -e 1
    $ fedeval plan --rows 200000 -m distdp --target-error 1e-4
    $ fedeval plan --rows 1000000 -m localdp --like pilot.parquet --heights

    Exit codes: 0 ok · 2 bad input or usage.
    """
    from fedeval.api import plan as planning

    with (
        errors_to_exit(),
        progress_bar("predicting errors", heights and err.is_terminal and not err.quiet) as bar,
    ):
        report = planning.plan_report(
            rows,
            model=model,
            epsilon=epsilon,
            positives_fraction=positives_fraction,
            auc=auc,
            like=like,
            heights=heights,
            target_error=target_error,
            metric=metric,
            seed=seed,
            progress=bar,
        )
        if output_format is OutputFormat.json:
            sys.stdout.write(report.to_json())
            return
        best, others, rec = report.best, report.by_height, report.recommended
        cfg, rows, positives_fraction = best.config, report.rows, report.positives_fraction
        needed = report.rows_needed
        out = Console()
        eps = "" if cfg.epsilon is None else f", ε = {cfg.epsilon:g}"
        ref = f"scores like {like}" if like else f"binormal reference scores, AUC {auc:g}"
        out.print(
            f"[bold]{cfg.model.value}[/bold]{eps} · {rows:,} examples "
            f"({positives_fraction:.1%} positive) · {ref}",
            soft_wrap=True,
        )
        out.print(
            f"recommended: {cfg.shape.value} release, h = {cfg.height} ({cfg.n_leaves:,} leaves); "
            f"curves Q = {rec['quantiles']}; calibration B = {rec['calibration_buckets']}",
            soft_wrap=True,
        )
        if cfg.probed:
            out.print(f"[dim]height auto: {planning.probe_words(cfg)}[/dim]", soft_wrap=True)
        t = Table(box=None, header_style="bold")
        t.add_column("expected |error|")
        t.add_column("", justify="right")
        t.add_column("scaling (Table 1)", style="dim")
        pra_rate, auc_rate = planning.TABLE1[cfg.model]
        t.add_row("ROC AUC", f"{best.auc:.1e}", auc_rate)
        t.add_row("precision", f"{best.precision:.1e}", pra_rate)
        t.add_row("recall", f"{best.recall:.1e}", pra_rate)
        t.add_row("accuracy", f"{best.accuracy:.1e}", pra_rate)
        out.print(t)
        if others:
            h = Table(box=None, header_style="bold")
            for col in ("h", "AUC", "precision", "recall", "accuracy"):
                h.add_column(col, justify="right")
            for p in others:
                mark = " *" if p.config.height == cfg.height else ""
                h.add_row(
                    f"{p.config.height}{mark}",
                    *(f"{x:.1e}" for x in (p.auc, p.precision, p.recall, p.accuracy)),
                )
            out.print(h)
        if target_error is not None:
            what = "ROC AUC" if metric == "auc" else "precision/recall/accuracy"
            if needed is None:
                out.print(f"no population up to 10⁹ reaches {target_error:g} on {what}.")
            else:
                out.print(f"population needed for {what} error ≤ {target_error:g}: ~{needed:,}")
