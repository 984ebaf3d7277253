"""Helpers every command shares: the stderr console, warnings as one line, progress bars, and
parsing of option values (numbers, score range, plot and output targets)."""

from __future__ import annotations

import contextlib
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fedeval.cli.support import error_console
from fedeval.core.errors import UsageError
from fedeval.tables.outputs import Outputs, is_stdout, plot_target

if TYPE_CHECKING:  # rich.progress loads when a bar is drawn, not for --help or completion
    from rich.progress import Progress, TaskID

err = Console(stderr=True, soft_wrap=True)


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


@contextlib.contextmanager
def errors_to_exit() -> Iterator[None]:
    """Library warnings become one `warning:` line each on stderr; errors pass on to the command
    group (`fedeval.cli.support.FedevalGroup`), the one place they become messages and exit
    codes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            shown = set()
            for w in caught:
                if issubclass(w.category, RuntimeWarning):  # numpy's arithmetic, not for people
                    continue
                text = " ".join(str(w.message).split())
                if text not in shown:
                    shown.add(text)
                    error_console().print(Text.assemble(("fedeval: warning:", "yellow"), " ", text))


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing a bar on stderr (only on a terminal, and not under --quiet),
    or None: off a terminal even a transient bar leaves a newline on stderr."""
    if not (enabled and err.is_terminal and not err.quiet):
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

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


def plural(n: int, noun: str) -> str:
    """'1 part', '2 parts', '1,000 parts'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def floats(text: str, option: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(
            f"{option} takes numbers separated by commas, e.g. 0.3,0.5. Found {text!r}."
        ) from None


def check_buckets(text: str) -> None:
    """--buckets, before any work: 'auto', or an integer in the library's bounds (it names what
    it expects of anything else)."""
    from fedeval.core.config import check_buckets as in_bounds

    try:
        b = int(text)
    except ValueError:
        return
    in_bounds(b)


def parse_score_range(text: str) -> tuple[float, float]:
    vals = floats(text, "--score-range")
    if (
        len(vals) != 2
        or not vals[0] < vals[1]
        or not all(map(math.isfinite, vals))
        or not math.isfinite(vals[1] - vals[0])
    ):
        raise UsageError(
            f"--score-range takes finite lo,hi with lo < hi, e.g. -5,5. Found {text!r}."
        )
    return vals[0], vals[1]


def plot_file(plot: str | None, default_name: str) -> Path | None:
    """Where --plot draws (a file, or `default_name` in a directory given with a final '/'),
    its extension checked before any work."""
    if plot is None:
        return None
    path = plot_target(plot, default_name)
    check_plot_suffix(path)
    return path


def emit(text: str | bytes | None, output: Path | None, out: Outputs) -> bool:
    """The -o convention of every command: -o PATH stages `text` (or the file's bytes) for PATH
    (stdout stays empty); -o - means stdout. Returns whether the data goes to stdout once the
    run commits."""
    if output is None or is_stdout(output):
        return is_stdout(output)
    if isinstance(text, bytes):
        out.stage_bytes(output, text)
    elif text is not None:
        out.stage_text(output, text)
    return False


def show(
    text: str, to_stdout: bool, output: Path | None, as_json: str | None, render: Callable[[], None]
) -> None:
    """After the run committed: `text` on stdout for -o -, nothing more for -o FILE, else the
    JSON document `as_json` (--format json) or the table `render` draws."""
    if to_stdout:
        sys.stdout.write(text)
    elif output is None:
        if as_json is not None:
            sys.stdout.write(as_json)
        else:
            render()


def json_output(output: Path | None) -> None:
    """Before any work: -o of a command that writes one JSON document (a report, a map) names
    no other format (`fedeval.tables.output_format`: .parquet, .csv.gz, .xlsx are refused)."""
    from fedeval.tables.output_format import DataFormat, output_spec

    output_spec(output, writes=(DataFormat.JSON,))


def wrote(output: Path | None, summary: str) -> None:
    """-o FILE: one line on stderr naming the file and what it holds, as every command says
    what it did with its data (stdout stays empty; -Q silences it). Nothing for -o - or without
    -o: the data itself is on stdout then. `summary` is made from the document as written, so
    the line says nothing the file does not."""
    if output is None or is_stdout(output):
        return
    err.print(Text(f"{output}: {summary}"), soft_wrap=True)


def estimate_words(est: dict[str, Any] | None, digits: int = 4) -> str:
    """'0.8658 [0.8657, 0.8660]' from a document's {estimate, ci95} ('—' when undefined)."""
    if not est or est.get("estimate") is None:
        return "—"
    text = f"{est['estimate']:.{digits}f}"
    ci = est.get("ci95")
    if ci and ci[0] is not None and ci[1] is not None:
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return text


class ReadBar:
    """`read_progress` for the library: a bar of rows read on stderr, shown only once a read
    has taken READ_BAR_AFTER seconds (a short read draws nothing), gone when the read ends.
    With `total` (the rows a Parquet footer states) it shows how far the read is and the time
    left; without (CSV, stdin) the rows read and the time taken."""

    def __init__(self, total: int | None = None) -> None:
        self.start = time.monotonic()
        self.total = total
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, rows: int | None) -> None:
        if rows is None:  # the read is over
            if self.bar is not None:
                self.bar.stop()
                self.bar = None
            return
        if self.bar is None:
            if time.monotonic() - self.start < READ_BAR_AFTER:
                return
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            columns = (
                (TextColumn("{task.completed:,} rows"), TimeElapsedColumn())
                if self.total is None
                else (
                    TextColumn("{task.completed:,} of {task.total:,.0f} rows"),
                    TimeRemainingColumn(),
                )
            )
            self.bar = Progress(
                TextColumn("reading"), BarColumn(), *columns, console=err, transient=True
            )
            self.bar.start()
            self.task = self.bar.add_task("reading", total=self.total)
        if self.task is not None:
            self.bar.update(self.task, completed=rows)


READ_BAR_AFTER = 2.0
"""Seconds a read runs before its progress bar appears."""


def read_bar(source: str | None) -> ReadBar | None:
    """The progress bar for reading `source`, or None off a terminal or under -Q. Its total is
    the row count the Parquet footers state (a file, directory or glob; None for CSV or stdin).
    The count is exact: it is drawn on the data holder's own terminal only, never written to
    stdout or into a document (under DP the number of rows may not reach the analyst)."""
    if not err.is_terminal or err.quiet:
        return None
    total = None
    if source is not None and source != "-":
        from fedeval.tables.sources import parquet_rows

        total = parquet_rows(source)
    return ReadBar(total)


def check_plot_suffix(path: Path) -> None:
    """Before any work: the plot's format comes from its extension."""
    if path.suffix.lower() not in {".png", ".svg"}:
        raise UsageError(f"--plot '{path}': use a .png or .svg file name.")


def private_key(path: Path | None) -> Any:
    """The Ed25519 signing key at `path` (None: no signature)."""
    if path is None:
        return None
    from fedeval.documents.seals import load_private_key

    return load_private_key(path)


def public_key(path: Path | None) -> Any:
    """The Ed25519 verify key at `path` (None: the digest alone is checked)."""
    if path is None:
        return None
    from fedeval.documents.seals import load_public_key

    return load_public_key(path)


def summary_table() -> Table:
    """The two-column summary a command prints on stderr after its one-line result: names in
    bold, values beside them, no borders (encode, partition)."""
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    return t
