"""The output options of the one-shot commands (evaluate, curves, calibrate), made by one
factory each: every command gives its own help text, the rest is the same.

    output: Annotated[Path | None, output_option("Write the JSON report here (.json; …).")] = None

--format offers what `fedeval.views.render` can print for the command's result
(`printed_formats`): a renderer added there is a format every command showing that result
accepts. The renderers are read only for a value --help does not show, so `--help` and
completion load no library; the metavar --help shows is checked against them by the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from fedeval.cli.helptext import OUTPUT
from fedeval.cli.options import option


def format_choices(result_type: str) -> list[str]:
    """The values --format takes for a command whose result is a `result_type`."""
    from fedeval.views.render import printed_formats  # lazily: --help loads no library

    return [f.value for f in printed_formats(result_type)]


def _format_parser(result_type: str, shown: list[str]) -> Callable[[str], str]:
    """A value `shown` in --help passes as it is (the default is parsed even for completion,
    which must load no library); any other is checked against the renderers."""

    def parse(value: str) -> str:
        if value in shown:
            return value
        choices = format_choices(result_type)
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, choices))}.")
        return value

    return parse


def format_option(help: str, result_type: str, choices: str, *, panel: str | None = OUTPUT) -> Any:
    """--format/-f of a command showing a `result_type` (`Annotated[str, format_option(…)]`):
    one of `format_choices(result_type)`, shown in `--help` as `choices`."""
    shown = choices.strip("[]").split("|")  # equal to the parsed choices (tests/test_cli_formats)

    def complete(incomplete: str) -> list[str]:  # from the metavar: completion loads no library
        return [c for c in shown if c.startswith(incomplete)]

    return option(
        help,
        "--format",
        "-f",
        metavar=choices,
        panel=panel,
        parser=_format_parser(result_type, shown),
        autocompletion=complete,
    )


def output_option(help: str) -> Any:
    """-o/--output PATH of a one-shot command (`Annotated[Path | None, output_option(…)]`)."""
    return option(help, "--output", "-o", metavar="PATH", panel=OUTPUT, shown=False)


def plot_option(what: str) -> Any:
    """--plot of a one-shot command: draws `what` (`Annotated[str | None, plot_option(…)]`)."""
    return option(f"Draw {what} (.png, .svg, or DIR/).", metavar="PATH", panel=OUTPUT, shown=False)


def document_format(result_type: str) -> Any:
    """--format/-f of the commands that print one JSON document or a table (compare, flower)."""
    return format_option(
        "table for people, json for programs (one document).",
        result_type,
        "[table|json]",
        panel=None,
    )


def stdout_output_option(what: str) -> Any:
    """-o/--output of a command whose JSON `what` goes to stdout unless a file is named."""
    return option(
        f"Write the JSON {what} to this file instead of stdout (- for stdout).",
        *("--output", "-o"),
        shown=False,
    )
