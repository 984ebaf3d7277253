"""`fedeval flower`: the protocol on Flower (simulated, or a project). Needs the extra."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from fedeval.cli.app import app
from fedeval.cli.common import (
    emit,
    err,
    errors_to_exit,
    plural,
    private_key,
    show,
)
from fedeval.cli.groups import (
    TABLE,
    UNITS,
    OptionGroup,
    TableOptions,
    UnitOptions,
    grouped,
    run_settings,
)
from fedeval.cli.helptext import DEPLOY, command_help, format_help
from fedeval.cli.options import (
    CiDrawsOpt,
    EpsilonOpt,
    HeightOpt,
    LevelSplitOpt,
    MinCohortOpt,
    ModelOpt,
    PosLabelOpt,
    QuantilesOpt,
    SaveReleaseOpt,
    ScoreRangeOpt,
    SeedOpt,
    ShapeOpt,
    SignKeyOpt,
    argument,
    option,
)
from fedeval.cli.output_options import document_format, stdout_output_option
from fedeval.cli.run import printed_text
from fedeval.core.config import DEFAULT_LEVEL_SPLIT, PrivacyModel
from fedeval.core.errors import UsageError

flower_app = typer.Typer(
    name="flower",
    help=format_help(
        "Run the protocol between real clients on Flower: simulate it with Flower's engine, or "
        "write a Flower app project for SuperLink and SuperNodes. Needs the flower extra (pip "
        "install 'fedeval\\[flower]').\n\nExamples:\n$ fedeval flower simulate s.parquet "
        "--clients 50\n$ fedeval flower new eval-app --model distdp --epsilon 1"
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(flower_app, name="flower", rich_help_panel=DEPLOY)

ThresholdsOpt = Annotated[
    str | None,
    option(
        "Comma-separated thresholds for precision/recall/accuracy, declared before the "
        "run: they become cell edges of the release (exact sums of cells) \\[default: 1/11 … "
        "10/11 of the score range, as for evaluate and encode].",
        shown=False,
    ),
]
NeighboursOpt = Annotated[
    int | None,
    option(
        "K, masking neighbours per side in secure aggregation \\[default: ⌈log2 n⌉].",
        shown=False,
        min=1,
    ),
]
RetriesOpt = Annotated[
    int,
    option(
        "Re-runs of a round that lost clients it cannot recover (distdp: their noise "
        "shares; a survivor left without neighbours), each over the survivors with fresh masks.",
        min=0,
    ),
]


@dataclass(frozen=True)
class RunOptions(OptionGroup):
    """The settings of a run on Flower that simulate and new share (`RunSettings`)."""

    model: ModelOpt = PrivacyModel.DISTDP
    epsilon: EpsilonOpt = None
    height: HeightOpt = "auto"
    shape: ShapeOpt = "auto"
    level_split: LevelSplitOpt = DEFAULT_LEVEL_SPLIT
    units: UnitOptions = UNITS
    thresholds: ThresholdsOpt = None
    min_cohort: MinCohortOpt = 10
    neighbours: NeighboursOpt = None
    retries: RetriesOpt = 2


RUN = RunOptions()


@flower_app.command()
@command_help
@grouped
def simulate(
    file: Annotated[
        str,
        argument(
            "Scored, labelled table (Parquet or CSV, or - for CSV on stdin). Each client "
            "(a client column's id, or one of --clients parts) becomes one simulated "
            "SuperNode holding its own rows.",
            "FILE",
        ),
    ],
    clients: Annotated[
        int | None,
        option(
            "K, the simulated clients when FILE has no client column: its rows are split "
            "into K contiguous parts.",
            "--clients",
            "-k",
            shown=False,
            min=1,
        ),
    ] = None,
    run_options: RunOptions = RUN,
    dropout: Annotated[
        float,
        option(
            "Make this fraction of the clients vanish at the report step, after their "
            "keys were relayed, to see the server recover.",
            min=0.0,
            max=0.99,
        ),
    ] = 0.0,
    engine: Annotated[
        str,
        option(
            "ray: Flower's simulation engine. in-process: the same ClientApp and "
            "messages called in this process, no engine (fast; for trying settings)."
        ),
    ] = "ray",
    seed: SeedOpt = None,
    save_release: SaveReleaseOpt = None,
    sign_key: SignKeyOpt = None,
    output_format: Annotated[str, document_format("Evaluation")] = "table",
    output: Annotated[Path | None, stdout_output_option("report")] = None,
    ci_draws: CiDrawsOpt = 200,
    quantiles: QuantilesOpt = 100,
    table: TableOptions = TABLE,
) -> None:
    """Run the protocol on Flower's simulation engine, one SuperNode per client, and print
    what fedeval evaluate --from prints for the release it made.

    Each simulated client reads only its own rows and answers the server's messages with the
    encoder of fedeval encode: masks from X25519 key agreement with its neighbours (public
    keys relayed by the server), noise shares (distdp) or local-DP reports (localdp). The
    server sums the replies into the release fedeval aggregate writes (--save-release).

    Examples:
    $ fedeval flower simulate s.parquet --clients 50 --save-release r.fedeval
    $ fedeval evaluate --from r.fedeval

    Exit codes: 0 ok · 2 bad input or usage, or too few clients to finish (nothing is written).
    """
    with errors_to_exit():
        from fedeval.flower import require_flower

        require_flower()
        import numpy as np

        from fedeval.api.evaluate import evaluate_run
        from fedeval.core.spec import check_ci_draws
        from fedeval.documents.files import document_text
        from fedeval.flower.simulation import simulate_file
        from fedeval.protocol.simulate import Simulated
        from fedeval.tables.outputs import Outputs, is_stdout
        from fedeval.tables.read import source_name
        from fedeval.views.render import Context, Format, render

        check_ci_draws(ci_draws)
        if sign_key is not None and save_release is None:
            raise UsageError(
                "--sign-key signs the release --save-release writes; add --save-release."
            )
        if is_stdout(save_release):
            raise UsageError("--save-release takes a file name (stdout carries the report).")
        key = private_key(sign_key)
        settings = run_settings(locals())
        outcome = simulate_file(
            file,
            settings,
            columns=table.columns(),
            clients=clients,
            dropout=dropout,
            engine=engine,
            rng=None if seed is None else np.random.default_rng(seed),
        )
        run = Simulated.from_release(outcome.release, outcome.axis, seed=seed, ci_draws=ci_draws)
        ev = evaluate_run(run, thresholds=settings.thresholds, quantiles=quantiles)
        name = str(save_release) if save_release is not None else source_name(file)
        report = render(ev, Format.JSON, Context(name))
        doc = document_text(report)
        with Outputs() as out:
            to_stdout = emit(doc, output, out)
            if save_release is not None:
                from fedeval.documents.release_file import save_release as write_release

                write_release(
                    out.staged_path(save_release), outcome.release, outcome.axis, sign_key=key
                )
            out.commit()
    t = outcome.traffic
    recovered = f", {outcome.recovered:,} recovered" if outcome.recovered else ""
    rounds = f" in {plural(outcome.rounds, 'report round')}" if outcome.rounds > 1 else ""
    err.print(
        f"flower ({engine}): {outcome.reported:,} of {plural(outcome.clients, 'client')} "
        f"reported{recovered}{rounds}; {t.per_message('report'):,.0f} bytes per report",
        highlight=False,
    )
    as_json = printed_text(ev, output_format, doc, name)
    show(doc, to_stdout, output, as_json, lambda: render(ev, Format.TABLE, Context(name)))


@flower_app.command()
@command_help
@grouped
def new(
    directory: Annotated[
        Path,
        argument("New (or empty) directory for the Flower app project.", "DIR"),
    ],
    run_options: RunOptions = RUN,
    score_range: ScoreRangeOpt = "0,1",
    pos_label: PosLabelOpt = None,
) -> None:
    """Write a ready Flower app project for a deployment across machines: pyproject.toml
    ([tool.flwr.app] with fedeval's ClientApp and ServerApp, the settings as run config) and
    a README with the exact flower-superlink, flower-supernode and flwr run commands.

    Examples:
    $ fedeval flower new eval-app --model distdp --epsilon 1
    $ cat eval-app/README.md

    Exit codes: 0 ok · 2 bad usage, or DIR exists and is not empty (nothing is written).
    """
    with errors_to_exit():
        from fedeval.flower import require_flower

        require_flower()
        from fedeval.flower.project import write_project

        settings = run_settings(locals())
        target = write_project(directory, settings)
    err.print(
        f"Flower app written to '{target}': see {target / 'README.md'} for the commands.",
        highlight=False,
    )
