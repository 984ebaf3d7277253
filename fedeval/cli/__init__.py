"""The `fedeval` command: a thin Typer layer over the library.

Each command parses its options, makes one library call and renders the result. Data goes to
stdout, messages to stderr. Exit codes: 0 ok, 1 a quality gate failed, 2 bad input or usage,
70 an internal error. One module per command group; importing them registers their commands
on `app`, in the order `fedeval --help` lists them.
"""

from __future__ import annotations

from fedeval.cli.completion import answer_first_word
from fedeval.cli.version_answer import answer_version

answer_first_word()  # bash completing the first word: answered before Typer loads (exits)
answer_version()  # `fedeval --version` alone: likewise
# ruff: noqa: E402 (the imports below load Typer: after that answer)

# Each module registers its commands on `app` when imported, in this order (`--help` keeps it).
# isort: off
from fedeval.cli import evaluate  # noqa: F401
from fedeval.cli import compare  # noqa: F401
from fedeval.cli import curves  # noqa: F401
from fedeval.cli import calibrate  # noqa: F401
from fedeval.cli import apply  # noqa: F401
from fedeval.cli import plan  # noqa: F401
from fedeval.cli import check  # noqa: F401
from fedeval.cli import ledger  # noqa: F401
from fedeval.cli import partition  # noqa: F401
from fedeval.cli import encode  # noqa: F401
from fedeval.cli import aggregate  # noqa: F401
from fedeval.cli import flower  # noqa: F401

# isort: on
from fedeval.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """The `fedeval` console script."""
    app()
