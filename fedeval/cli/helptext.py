"""Long help that reads at 80 columns, as `gh` or `rg` help does: a summary, a few short
paragraphs, examples one to a line, and options in named groups (panels) with one-line help.

A command's docstring is its help. Rich wraps each line of a paragraph at the terminal's width,
but keeps the line breaks written in the source: a paragraph wrapped at 100 columns in the code
would break at odd places on the screen. `command_help` therefore joins the lines of each prose
paragraph into one (rich wraps it where the terminal ends), and keeps every example line
(``$ fedeval …``) on its own line, escaped for rich markup and shown in bold; an example is kept
short enough (`EXAMPLE_WIDTH`) that no terminal of 80 columns breaks it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

from rich.markup import escape

F = TypeVar("F", bound=Callable[..., object])

EXAMPLE_PREFIX = "$ "
EXAMPLE_WIDTH = 76
"""Longest example line, indent included: rich pads the help by one column each side."""

# Command groups of `fedeval --help`.
ESTIMATE = "Estimate"
PLAN = "Plan and account"
DEPLOY = "Deploy (staged protocol)"

# Option groups, in the order help shows them (typer lists panels in order of first use, so
# each command names its arguments' and options' panels through the shared option types).
INPUT = "Input"
PRIVACY = "Privacy"
RELEASE = "Release and estimates"
OUTPUT = "Output"
GATES = "Quality gates"
PROVENANCE = "Saved releases and signatures"
MULTICLASS = "Multiclass (--multiclass)"


def format_help(doc: str) -> str:
    """`doc` as rich help: prose paragraphs on one line each, example lines kept whole.

    >>> print(format_help("Do it.\\n\\nA long\\nparagraph.\\n\\nExamples:\\n$ fedeval x --y"))
    Do it.
    <BLANKLINE>
    A long paragraph.
    <BLANKLINE>
    Examples:
      [bold]$ fedeval x --y[/bold]
    """
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    out = []
    for para in paragraphs:
        lines: list[str] = []
        prose: list[str] = []
        for raw in para.splitlines():
            line = raw.strip()
            if line.startswith(EXAMPLE_PREFIX):
                if prose:
                    lines.append(" ".join(prose))
                    prose = []
                example = f"  {line}"
                if len(example) > EXAMPLE_WIDTH:
                    raise ValueError(f"example longer than {EXAMPLE_WIDTH} columns: {line!r}")
                lines.append(f"  [bold]{escape(line)}[/bold]")
            elif line.endswith(":") and not prose and not lines:
                lines.append(line)  # a heading ("Examples:") on its own line
            else:
                prose.append(line)
        if prose:
            lines.append(" ".join(prose))
        out.append("\n".join(lines))
    return "\n\n".join(out)


def command_help(func: F) -> F:
    """Decorator (under ``@app.command()``): the function's docstring made into rich help by
    `format_help`. Typer reads the docstring when the command is built, after decoration."""
    if func.__doc__:
        func.__doc__ = format_help(func.__doc__)
    return func
