"""`fedeval plan`: the error to expect for a population, and the population needed."""

from __future__ import annotations

import math
import sys
from typing import Annotated, Any

from rich.console import Console
from rich.table import Table

from fedeval.cli.app import app
from fedeval.cli.common import OutputFormat, err, errors_to_exit, progress_bar
from fedeval.cli.helptext import PLAN, command_help
from fedeval.cli.options import EpsilonOpt, ModelOpt, option
from fedeval.core.config import PrivacyModel
from fedeval.core.errors import UsageError


@app.command(rich_help_panel=PLAN)
@command_help
def plan(
    rows: Annotated[
        int | None,
        option(
            "Population: examples (one per client) \\[default: the rows of --like].",
            "--rows",
            "-n",
            shown=False,
            min=100,
        ),
    ] = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    positives_fraction: Annotated[
        float | None,
        option(
            "Share of positive examples, strictly between 0 and 1 \\[default: that of "
            "--like, else 0.5].",
            shown=False,
        ),
    ] = None,
    auc: Annotated[float, option("ROC AUC of the reference scores (binormal model).")] = 0.85,
    like: Annotated[
        str | None,
        option(
            "Use this scored table's score distribution as the reference instead "
            "(a pilot or validation set; any size): without it the prediction assumes "
            "smooth, spread scores.",
            shown=False,
        ),
    ] = None,
    target_error: Annotated[
        float | None,
        option("Also find the population needed for this expected |error|."),
    ] = None,
    metric: Annotated[
        str, option("Metric for --target-error: pra (precision/recall/accuracy) or auc.")
    ] = "pra",
    heights: Annotated[
        bool, option("Also show the predicted error at every height.", "--heights")
    ] = False,
    height: Annotated[
        str,
        option(
            "auto, auto:auc (or ap, precision, …, comma-separated: the height chosen for "
            "those metrics alone, as evaluate's --height), or h.",
            metavar="auto[:METRIC,…]|H",
        ),
    ] = "auto",
    output_format: Annotated[
        OutputFormat, option("table, or json (one document).", "--format", "-f")
    ] = OutputFormat.table,
    seed: Annotated[int, option("Seed of the reference population.")] = 0,
    detect: Annotated[
        str | None,
        option(
            "Instead: the population at which `compare` detects a difference of δ, e.g. "
            "auc=0.005 or recall@0.5=0.01 (80% power; and ≤ 5% false failures of the gate "
            "--fail-if-worse at that margin).",
            shown=False,
        ),
    ] = None,
) -> None:
    """The error to expect for a population, and the population needed.

    Recommends h, B and Q, and finds the n a target error needs.

    Runs fedeval's own estimators on a reference population of the given size (binormal scores
    with the given AUC, or the score distribution of --like), so the prediction is what
    evaluate, curves and calibrate will do with --height auto. A caveat line (JSON: caveats)
    names the metrics a prediction may miss several-fold: always without --like (ties, a narrow
    range or rare positives break the binormal reference), and with a pilot that fills few cells.

    Examples:
    $ fedeval plan --rows 200000 -m distdp -e 1
    $ fedeval plan --rows 200000 -m distdp --target-error 1e-4
    $ fedeval plan --rows 1000000 -m localdp --like pilot.parquet --heights

    Exit codes: 0 ok · 2 bad input or usage.
    """
    from fedeval.api import plan as planning

    # The reference population and its release: what plan and --detect both predict for.
    reference: dict[str, Any] = {
        "model": model,
        "epsilon": epsilon,
        "positives_fraction": positives_fraction,
        "auc": auc,
        "like": like,
        "seed": seed,
    }
    if detect is not None:
        if rows is not None or target_error is not None or heights or height != "auto":
            raise UsageError(
                "--detect finds the population itself: drop --rows, --target-error, --height and "
                "--heights."
            )
        _detect(detect, reference, output_format)
        return
    with (
        errors_to_exit(),
        progress_bar("predicting errors", heights and err.is_terminal and not err.quiet) as bar,
    ):
        report = planning.plan_report(
            rows,
            **reference,
            heights=heights,
            height=height,
            target_error=target_error,
            metric=metric,
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
        t.add_row("ROC AUC", _err(best.auc), auc_rate)
        for name, error in best.thresholds.items():  # every threshold metric of the registry
            t.add_row(name, _err(error), pra_rate)
        out.print(t)
        if best.undetermined:
            out.print(
                f"[dim]undetermined: {', '.join(best.undetermined)} (the noise leaves no "
                "positive, or no predicted positive, at any threshold)[/dim]",
                soft_wrap=True,
            )
        if best.sparse_thresholds:
            at = ", ".join(f"{t:g}" for t in best.sparse_thresholds)
            out.print(
                f"[dim]precision at {at} is not predicted: few examples score above "
                "(evaluate reports it as sparse, over [0, 1]); left out of its error[/dim]",
                soft_wrap=True,
            )
        for c in best.caveats:  # what the prediction cannot stand for (none on smooth data)
            out.print(f"caveat on {', '.join(c.metrics)}: {c.reason}.", soft_wrap=True)
        if others:
            h = Table(box=None, header_style="bold")
            for col in ("h", "AUC", *best.thresholds):
                h.add_column(col, justify="right")
            for p in others:
                mark = " *" if p.config.height == cfg.height else ""
                h.add_row(
                    f"{p.config.height}{mark}",
                    *(_err(x) for x in (p.auc, *p.thresholds.values())),
                )
            out.print(h)
        if target_error is not None:
            what = "ROC AUC" if metric == "auc" else "precision/recall/accuracy"
            if needed is None:
                out.print(f"no population up to 10⁹ reaches {target_error:g} on {what}.")
            else:
                out.print(f"population needed for {what} error ≤ {target_error:g}: ~{needed:,}")


def _err(x: float) -> str:
    return "undetermined" if math.isnan(x) else f"{x:.1e}"


def _detect(spec: str, reference: dict[str, Any], output_format: OutputFormat) -> None:
    """`plan --detect`: the populations a difference needs (`fedeval.api.compare_plan`)."""
    import json

    from fedeval.api.compare_plan import detect_report

    with errors_to_exit():
        with Console(stderr=True).status("bisecting the population", spinner="dots"):
            doc = detect_report(spec, **reference)
        if output_format is OutputFormat.json:
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
            return
        d, ref = doc["detect"], doc["reference"]
        eps = "" if d["epsilon"] is None else f", ε = {d['epsilon']:g} (split between the two"
        eps += "" if d["epsilon"] is None else " releases)"
        what = (
            f"scores like {ref['like']}" if ref["like"] else f"binormal scores, AUC {ref['auc']:g}"
        )
        out = Console()
        out.print(
            f"[bold]{d['model']}[/bold]{eps} · {ref['positives_fraction']:.1%} positive · {what}",
            soft_wrap=True,
        )

        def n(x: int | None) -> str:
            return "more than 10⁹" if x is None else f"~{x:,}"

        out.print(
            f"{d['metric']} difference of {d['delta']:g}: detected with 80% power from "
            f"{n(d['rows_80_power'])} examples; --fail-if-worse {d['metric']}={d['delta']:g} "
            f"fails an equal candidate at most 5% of the time from "
            f"{n(d['rows_5_percent_false_failures'])}",
            soft_wrap=True,
        )
