"""The output options of the one-shot commands (evaluate, curves, calibrate), made by one
factory each: every command gives its own help text, the rest is the same.

    output: Annotated[Path | None, output_option("Write the JSON report here (.json; …).")] = None
"""

from __future__ import annotations

from typing import Annotated, Any

from fedeval.cli.common import OutputFormat
from fedeval.cli.helptext import OUTPUT
from fedeval.cli.options import option


def format_option(help: str, choices: str) -> Any:
    """--format/-f of a one-shot command (`Annotated[Format, format_option(…)]`)."""
    return option(help, "--format", "-f", metavar=choices, panel=OUTPUT)


def output_option(help: str) -> Any:
    """-o/--output PATH of a one-shot command (`Annotated[Path | None, output_option(…)]`)."""
    return option(help, "--output", "-o", metavar="PATH", panel=OUTPUT, shown=False)


def plot_option(what: str) -> Any:
    """--plot of a one-shot command: draws `what` (`Annotated[str | None, plot_option(…)]`)."""
    return option(f"Draw {what} (.png, .svg, or DIR/).", metavar="PATH", panel=OUTPUT, shown=False)


DocumentFormatOpt = Annotated[
    OutputFormat,
    option("table for people, json for programs (one document).", "--format", "-f"),
]
"""--format/-f of the commands that print one JSON document or a table (compare, flower)."""


def stdout_output_option(what: str) -> Any:
    """-o/--output of a command whose JSON `what` goes to stdout unless a file is named."""
    return option(
        f"Write the JSON {what} to this file instead of stdout (- for stdout).",
        *("--output", "-o"),
        shown=False,
    )
