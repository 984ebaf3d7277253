"""The `fedeval` command: a thin Typer layer over the library.

Each command parses its options, makes one library call and renders the result. Data goes to
stdout, messages to stderr. Exit codes: 0 ok, 1 a quality gate failed, 2 bad input or usage.
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from fedeval import __version__
from fedeval.config import PrivacyModel
from fedeval.errors import FedevalError, UsageError

EXIT_CODES = """Exit codes: 0 ok · 1 a quality gate failed · 2 bad input or usage."""

app = typer.Typer(
    name="fedeval",
    help=(
        "Evaluate classifiers on labelled data that stays with its owners: precision, recall, "
        "accuracy and ROC AUC from one private release, under secure aggregation (federated), "
        "distributed DP (distdp) or local DP (localdp).\n\n" + EXIT_CODES
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
# soft_wrap: one message stays one line in logs; markup is never read from message text.
err = Console(stderr=True, soft_wrap=True)


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


@contextlib.contextmanager
def _errors_to_exit() -> Iterator[None]:
    """The one place library errors become messages and exit codes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except FedevalError as e:
            err.print(Text.assemble(("Error:", "bold red"), " ", str(e)), highlight=False)
            raise typer.Exit(e.exit_code) from None
        finally:
            for w in caught:
                err.print(
                    Text.assemble(("Warning:", "yellow"), " ", str(w.message)), highlight=False
                )


@contextlib.contextmanager
def _progress_bar(label: str, enabled: bool) -> Iterator:
    """A progress callback drawing a bar on stderr (only on a terminal), or None."""
    if not enabled:
        yield None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _floats(text: str, option: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(
            f"{option} takes numbers separated by commas, e.g. 0.3,0.5. Found {text!r}."
        ) from None


def _score_range(text: str) -> tuple[float, float]:
    vals = _floats(text, "--score-range")
    if len(vals) != 2 or not vals[0] < vals[1] or not all(map(math.isfinite, vals)):
        raise UsageError(
            f"--score-range takes finite lo,hi with lo < hi, e.g. -5,5. Found {text!r}."
        )
    return vals[0], vals[1]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fedeval {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    pass


FileArg = Annotated[
    str,
    typer.Argument(
        help="Scored, labelled table: Parquet or CSV, or - for CSV on stdin.",
        metavar="FILE",
        show_default=False,
    ),
]


@app.command()
def evaluate(
    file: FileArg,
    model: Annotated[
        PrivacyModel,
        typer.Option(
            "--model",
            "-m",
            help="federated: secure aggregation, exact sums, no DP. distdp: clients add Pólya "
            "shares that sum to discrete Laplace (central ε-DP). localdp: each example sends an "
            "OUE report (ε-local DP).",
            case_sensitive=False,
        ),
    ] = PrivacyModel.DISTDP,
    epsilon: Annotated[
        float | None,
        typer.Option(
            "--epsilon",
            "-e",
            help="Privacy budget ε of the whole release \\[default: 1 for distdp, 5 for localdp; "
            "not used by federated].",
            show_default=False,
        ),
    ] = None,
    height: Annotated[
        str,
        typer.Option(
            help="Leaf height h: the release has 2^h cells over the score range. 'auto' balances "
            "noise against resolution for this n and ε.",
        ),
    ] = "auto",
    shape: Annotated[
        str,
        typer.Option(
            help="'flat' releases the leaves only (sensitivity 1); 'hierarchy' releases levels "
            "1..h (the papers' dyadic tree, sensitivity h, consistent range queries).",
        ),
    ] = "auto",
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
            "≥ t) \\[default: 1/11 … 10/11 of the score range].",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="Seed for the simulated noise; the one used is always reported."),
    ] = None,
    output_format: Annotated[
        OutputFormat,
        typer.Option("--format", "-f", help="table for people, json for programs (one document)."),
    ] = OutputFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Also write the JSON report to this file (atomically)."
        ),
    ] = None,
    score_col: Annotated[str, typer.Option(help="Column holding the scores.")] = "score",
    label_col: Annotated[str, typer.Option(help="Column holding the labels.")] = "label",
    client_col: Annotated[
        str | None,
        typer.Option(
            help="Column holding client ids \\[default: 'client' if present, else one example "
            "per client].",
            show_default=False,
        ),
    ] = None,
    score_range: Annotated[
        str, typer.Option(help="lo,hi: the range scores lie in; mapped onto [0, 1].")
    ] = "0,1",
    pos_label: Annotated[
        str | None,
        typer.Option(help="Label value of the positive class \\[default: labels are 0/1 or bool]."),
    ] = None,
    per_client: Annotated[
        bool,
        typer.Option(
            "--per-client",
            help="Materialise every client's report (the deployed encoder) instead of drawing "
            "the aggregate directly; same distribution, much slower.",
        ),
    ] = False,
    exact: Annotated[
        bool,
        typer.Option(
            "--exact/--no-exact",
            help="Also compute the exact metrics from the input (a simulation knows the truth).",
        ),
    ] = True,
) -> None:
    """Estimate ROC AUC and precision/recall/accuracy at thresholds from one private release.

    Simulates the protocol on FILE (one example per client unless a client column is given) and
    prints each estimate beside its exact value.

    Example: [bold]fedeval evaluate scores.parquet --model distdp --epsilon 1 --format json[/bold]

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.evaluate import evaluate_file
    from fedeval.io import Columns, atomic_output, source_name
    from fedeval.report import render_table, to_json

    with _errors_to_exit(), _progress_bar("encoding client reports", per_client) as progress:
        ev = evaluate_file(
            file,
            columns=Columns(score_col, label_col, client_col),
            pos_label=pos_label,
            score_range=_score_range(score_range),
            exact=exact,
            path="per-client" if per_client else "fast",
            model=model,
            epsilon=epsilon,
            height=height,
            shape=shape,
            buckets=buckets,
            thresholds=None if thresholds is None else _floats(thresholds, "--thresholds"),
            seed=seed,
            progress=progress,
        )
        name = source_name(file)
        doc = to_json(ev, source=name)
        if output is not None:
            with atomic_output(output) as f:
                f.write(doc)
        if output_format is OutputFormat.json:
            sys.stdout.write(doc)
        else:
            render_table(ev, Console(), source=name)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
