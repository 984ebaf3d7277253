"""The `fedeval` Typer app and its global options (--version, --quiet, --debug)."""

from __future__ import annotations

from typing import Annotated

import typer

from fedeval.cli.common import err
from fedeval.cli.helptext import format_help
from fedeval.cli.support import FedevalGroup, set_debug

EXIT_CODES = (
    """Exit codes: 0 ok · 1 a quality gate failed · 2 bad input or usage · 70 internal error."""
)

app = typer.Typer(
    name="fedeval",
    help=format_help(
        "Evaluate and calibrate classifiers on labelled data that stays with its owners: ROC "
        "AUC, precision/recall/accuracy at any threshold, ROC and PR curves, and calibration "
        "maps, each with a 95% interval, from one private release under secure aggregation "
        "(federated), distributed DP (distdp) or local DP (localdp). Plan the population a "
        "deployment needs, gate CI on quality, and keep a privacy budget.\n\n"
        "Start with:\n"
        "$ fedeval plan --rows 200000 -m distdp -e 1\n"
        "$ fedeval evaluate scores.parquet -m distdp -e 1\n\n" + EXIT_CODES
    ),
    no_args_is_help=True,
    cls=FedevalGroup,
    add_completion=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from fedeval.core.version import __version__  # importlib.metadata: only when asked

        typer.echo(f"fedeval {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-Q",
            help="No progress or summary lines on stderr (errors and warnings still show).",
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Show the Python traceback of an internal error (exit 70)."),
    ] = False,
) -> None:
    set_debug(ctx, debug)
    err.quiet = quiet
