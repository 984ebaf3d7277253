"""`fedeval --version` answered before Typer loads.

The version is an eager option of the Typer app (`fedeval.cli.app`), so answering it through
Typer loads Typer and every command module first: most of the answer's time. When the
`fedeval` script is run with `--version` or `-V` as its only argument, the same line is printed
here (`fedeval <version>`, then exit 0); anything else, options beside it included, goes to
Typer as before. A test checks the two answers are the same bytes.
"""

from __future__ import annotations

import os
import sys

VERSION_FLAGS = ("--version", "-V")


def answer_version() -> None:
    """When this process is the `fedeval` script asked only for its version, print it and
    exit 0 (before Typer loads); otherwise return."""
    if os.path.basename(sys.argv[0]) not in ("fedeval", "fedeval.exe"):
        return
    if len(sys.argv) != 2 or sys.argv[1] not in VERSION_FLAGS:
        return
    from fedeval.core.version import __version__

    try:
        sys.stdout.write(f"fedeval {__version__}\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left: nothing more to say, and no noise at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(0)
