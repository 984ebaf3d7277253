"""`fedeval evaluate`: metrics from one private release."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fedeval.cli.budget import (
    apply_gates,
    gate_options,
    gates_section,
    judge_gates,
    with_gate_thresholds,
)
from fedeval.cli.common import (
    check_buckets,
    errors_to_exit,
    estimate_words,
    json_output,
)
from fedeval.cli.groups import ONE_SHOT, SOURCE, OneShotOptions, SourceOptions, flat
from fedeval.cli.helptext import RELEASE
from fedeval.cli.options import (
    EpsilonOpt,
    FailOverOpt,
    FailUnderOpt,
    FileArg,
    GateOnOpt,
    HeightOpt,
    ModelOpt,
    QuantilesOpt,
    SeedOpt,
    ShapeOpt,
    option,
)
from fedeval.cli.output_options import format_option, output_option, plot_option
from fedeval.cli.run import ReleaseOptions, estimate_command, printed_text
from fedeval.core.config import PrivacyModel
from fedeval.documents.files import document_text


@estimate_command
def evaluate(
    file: FileArg = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    buckets: Annotated[
        str,
        option(
            "AUC from the leaves (auto), or from B equi-depth buckets.",
            metavar="auto|B",
            panel=RELEASE,
        ),
    ] = "auto",
    thresholds: Annotated[
        str | None,
        option(
            "Precision/recall/accuracy at these (cell edges of the release) "
            "\\[default: 1/11 … 10/11].",
            metavar="T,T,…",
            panel=RELEASE,
            shown=False,
        ),
    ] = None,
    quantiles: QuantilesOpt = 100,
    seed: SeedOpt = None,
    output_format: Annotated[
        str, format_option("table for people, json for programs.", "Evaluation", "table|json")
    ] = "table",
    output: Annotated[
        Path | None, output_option("Write the JSON report here (.json; - for stdout).")
    ] = None,
    plot: Annotated[str | None, plot_option("the ROC and PR curves")] = None,
    source: SourceOptions = SOURCE,
    fail_under: FailUnderOpt = None,
    fail_over: FailOverOpt = None,
    gate_on: GateOnOpt = "bound",
    one_shot: OneShotOptions = ONE_SHOT,
) -> None:
    """AUC, AP, precision/recall/accuracy from one private release.

    Simulates the protocol on FILE (one example per client unless it has a client column) and
    shows each estimate with its 95% interval beside the exact value. Every report states its
    privacy claim.

    Examples:
    $ fedeval evaluate scores.parquet -m distdp -e 1
    $ fedeval evaluate scores.parquet -f json -o report.json
    $ fedeval evaluate scores.parquet --fail-under auc=0.85,recall@0.5=0.7
    $ fedeval evaluate --from aggregate.fedeval

    Exit codes: 0 ok · 1 a quality gate failed · 2 bad input or usage, or a release the ledger
    refused (nothing is written).
    """
    from fedeval.api.evaluate import evaluate_file, evaluate_run
    from fedeval.views.render import Context, Format, render

    with errors_to_exit():
        release = ReleaseOptions.of(flat(locals()))
        check_buckets(buckets)
        json_output(output)
        plot_path = release.plot_path("curves.png")
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
        report = render(ev, Format.JSON, Context(name))
        verdicts = judge_gates(gates, on, ev)
        if gates:  # the verdicts join the one document (stdout holds one JSON value)
            report["gates"] = gates_section(verdicts, on)
        doc = document_text(report, sign_key=release.signer)
        to_stdout = release.commit(ev, doc=report, text=doc, plot=plot_path)
        as_text = printed_text(ev, output_format, doc, name)
        release.show(doc, to_stdout, as_text, lambda: render(ev, Format.TABLE, Context(name)))
        metrics = report["metrics"]
        release.wrote(
            f"report written · AUC {estimate_words(metrics.get('auc'))}"
            + (f" · ECE {estimate_words(metrics['ece'])}" if metrics.get("ece") else ""),
        )
        apply_gates(verdicts, on)
