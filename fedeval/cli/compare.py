"""`fedeval compare`: candidate against baseline on the same population, with an interval on
the difference and non-inferiority gates for CI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from fedeval.cli.app import app
from fedeval.cli.budget import charge_ledger, check_ledger_options, with_gate_thresholds
from fedeval.cli.common import (
    emit,
    err,
    errors_to_exit,
    parse_score_range,
    plot_file,
    public_key,
    show,
)
from fedeval.cli.groups import UNITS, UnitOptions, flat, grouped
from fedeval.cli.helptext import ESTIMATE, command_help
from fedeval.cli.options import (
    BudgetOpt,
    CiDrawsOpt,
    ClientColOpt,
    EpsilonOpt,
    ExactOpt,
    HeightOpt,
    LabelColOpt,
    LedgerOpt,
    ModelOpt,
    PosLabelOpt,
    ScoreRangeOpt,
    SeedOpt,
    ShapeOpt,
    ThreadsOpt,
    VerifyKeyOpt,
    option,
)
from fedeval.cli.output_options import document_format, stdout_output_option
from fedeval.cli.run import printed_text
from fedeval.core.config import PrivacyModel, Unit
from fedeval.core.errors import UsageError

FromReleasesOpt = Annotated[
    list[Path] | None,
    option(
        "A saved release (--save-release): give two, the baseline's then the candidate's, made "
        "on the same population. Nothing new is released.",
        "--from",
        metavar="RELEASE",
        shown=False,
    ),
]
BaselineColOpt = Annotated[
    str | None, option("Column of the baseline's scores (the model in production).")
]
CandidateColOpt = Annotated[str | None, option("Column of the candidate's scores (the new model).")]


@app.command(rich_help_panel=ESTIMATE)
@command_help
@grouped
def compare(
    file: Annotated[
        str | None,
        typer.Argument(help="Table with both models' scores on the same rows.", show_default=False),
    ] = None,
    from_: FromReleasesOpt = None,
    baseline_col: BaselineColOpt = None,
    candidate_col: CandidateColOpt = None,
    model: ModelOpt = PrivacyModel.DISTDP,
    epsilon: EpsilonOpt = None,
    split: Annotated[
        float, option("The baseline's share of ε (the candidate's gets the rest).")
    ] = 0.5,
    height: HeightOpt = "auto",
    shape: ShapeOpt = "auto",
    thresholds: Annotated[
        str | None,
        option(
            "Comma-separated thresholds for precision/recall/accuracy, declared as cell "
            "edges of both releases \\[default: 1/11 … 10/11 of the score range, plus every "
            "threshold a gate names].",
            shown=False,
        ),
    ] = None,
    interval: Annotated[
        str,
        option(
            "'population': the difference on these examples (noise and discretisation of "
            "both releases); 'generalisation': also the sampling of the examples (DeLong-style, "
            "conservative: the pairing is not released)."
        ),
    ] = "population",
    fail_if_worse: Annotated[
        list[str] | None,
        option(
            "Exit 1 unless the candidate is non-inferior: METRIC=MARGIN, e.g. "
            "auc=0.005,recall@0.5=0.01; the lower 95% bound of candidate − baseline must be at "
            "least −MARGIN.",
            "--fail-if-worse",
            shown=False,
        ),
    ] = None,
    gate_on: Annotated[
        str, option("Judge --fail-if-worse on the 95% 'bound' or the 'estimate'.")
    ] = "bound",
    seed: SeedOpt = None,
    output_format: Annotated[str, document_format("Comparison")] = "table",
    output: Annotated[Path | None, stdout_output_option("document")] = None,
    plot: Annotated[
        str | None,
        option(
            "Draw both models' ROC and PR curves with their 95% noise bands: a .png or .svg "
            "file, or a directory ending in / (compare.png in it).",
            shown=False,
        ),
    ] = None,
    label_col: LabelColOpt = "label",
    client_col: ClientColOpt = None,
    score_range: ScoreRangeOpt = "0,1",
    pos_label: PosLabelOpt = None,
    exact: ExactOpt = True,
    ci_draws: CiDrawsOpt = 200,
    ledger: LedgerOpt = None,
    budget: BudgetOpt = None,
    units: UnitOptions = UNITS,
    threads: ThreadsOpt = None,
    verify_key: VerifyKeyOpt = None,
) -> None:
    """Compare a candidate model with a baseline on the same private population.

    Two releases, one per model's scores, with independent noise and ε split between them
    (--split), stated in the guarantee and charged to a ledger as one entry. Every metric is
    reported for both models and as candidate − baseline with a 95% interval.

    Examples:
    $ fedeval compare s.parquet --baseline-col score --candidate-col new
    $ fedeval compare s.parquet --baseline-col a --candidate-col b -f json
    $ fedeval compare s.parquet ... --fail-if-worse auc=0.005,recall@0.5=0.01
    $ fedeval compare --from base.fedeval --from cand.fedeval

    Exit codes: 0 ok · 1 a gate failed (the candidate may be worse by more than its margin) ·
    2 bad input or usage, or a release refused by the ledger (nothing is written).
    """
    from fedeval.api.compare import (
        compare_file,
        compare_releases,
        judge_differences,
        parse_margins,
    )
    from fedeval.api.compare_intervals import IntervalKind
    from fedeval.api.gates import GateOn
    from fedeval.core.spec import check_ci_draws
    from fedeval.documents.files import document_text
    from fedeval.tables.outputs import Outputs
    from fedeval.views.render import Context, Format, render

    with errors_to_exit():
        check_ledger_options(ledger, budget)
        check_ci_draws(ci_draws)
        try:
            kind = IntervalKind(interval)
        except ValueError:
            raise UsageError(
                f"--interval takes population or generalisation. Found {interval!r}."
            ) from None
        try:
            on = GateOn(gate_on)
        except ValueError:
            raise UsageError(f"--gate-on takes bound or estimate. Found {gate_on!r}.") from None
        gates = parse_margins(fail_if_worse)
        plot_path = plot_file(plot, "compare.png")
        sources = _check_sources(flat(locals()))
        lo_hi = parse_score_range(score_range)
        wanted = with_gate_thresholds(thresholds, gates, lo_hi)
        if sources is not None:
            if score_range != "0,1":
                raise UsageError("--score-range cannot be used with --from: the release fixes it.")
            c = compare_releases(
                sources[0],
                sources[1],
                thresholds=wanted,
                interval=kind,
                ci_draws=ci_draws,
                seed=seed,
                verify_key=public_key(verify_key),
            )
            name = f"{sources[0]} vs {sources[1]}"
        else:
            assert file is not None and baseline_col is not None and candidate_col is not None
            from fedeval.tables.read import source_name

            c = compare_file(
                file,
                baseline_col=baseline_col,
                candidate_col=candidate_col,
                label_col=label_col,
                client_col=client_col,
                model=model,
                epsilon=epsilon,
                split=split,
                seed=seed,
                interval=kind,
                height=height,
                shape=shape,
                thresholds=wanted,
                pos_label=pos_label,
                score_range=lo_hi,
                exact=exact,
                ci_draws=ci_draws,
                **units.keywords(),
                threads=threads,
            )
            name = source_name(file)
        doc = render(c, Format.JSON, Context(name))
        text = document_text(doc)
        judgements = judge_differences(gates, c, on)  # before anything is written or charged
        with Outputs() as out:
            to_stdout = emit(text, output, out)
            if plot_path is not None:
                from fedeval.views.compare_plots import plot_comparison

                plot_comparison(c, out.staged_path(plot_path))
            charge_ledger(ledger, budget, doc)
            out.commit()
        as_json = printed_text(c, output_format, text, name)
        table = lambda: render(c, Format.TABLE, Context(name))  # noqa: E731
        show(text, to_stdout, output, as_json, table)
        _apply(judgements)


def _check_sources(params: dict[str, Any]) -> tuple[Path, Path] | None:
    """Exactly one of FILE (with both score columns) and two --from releases; the options a
    saved release fixes are refused with --from. The two releases, or None for FILE."""
    sources = params["from_"] or []
    if (params["file"] is None) == (not sources):
        raise UsageError(
            "give FILE with --baseline-col and --candidate-col (simulate both releases on one "
            "table), or --from BASELINE --from CANDIDATE (two saved releases), exactly one of them."
        )
    if not sources:
        missing = [
            f"--{n.replace('_', '-')}" for n in ("baseline_col", "candidate_col") if not params[n]
        ]
        if missing:
            raise UsageError(
                f"compare FILE needs {' and '.join(missing)}: the columns of the two models' "
                "scores."
            )
        if params["verify_key"] is not None:
            raise UsageError("--verify-key checks the releases --from reads; add --from.")
        return None
    if len(sources) != 2:
        raise UsageError(
            f"--from takes two saved releases, the baseline's then the candidate's. Found "
            f"{len(sources)}."
        )
    defaults = {"split": 0.5, "height": "auto", "shape": "auto", "unit": Unit.EXAMPLE}
    defaults |= {"model": PrivacyModel.DISTDP}
    names = ("baseline_col", "candidate_col", "epsilon", "relation", "max_examples", *defaults)
    given = [f"--{n.replace('_', '-')}" for n in names if params[n] != defaults.get(n)]
    if given:
        raise UsageError(
            f"{', '.join(given)} cannot be used with --from: the saved releases fix them."
        )
    return sources[0], sources[1]


def _apply(judgements: list[Any]) -> None:
    """Each margin's verdict in words on stderr; exit 1 if any failed."""
    if not judgements:
        return
    from fedeval.api.gates import enforce

    for j in judgements:
        err.print(Text(j.sentence(), style="green" if j.passed else "bold red"), soft_wrap=True)
    enforce([j.verdict for j in judgements])
