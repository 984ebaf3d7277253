"""Shell completion of the command's first word, answered before Typer loads.

Bash asks the `fedeval` command itself what may follow (`_FEDEVAL_COMPLETE=complete_bash`,
the words in `COMP_WORDS`, the cursor's word in `COMP_CWORD`). Loading Typer, which validates
its parameters through pydantic, costs most of the answer's time; the first word, a command
name, is answered here from `COMMANDS` instead, exactly as Typer would print it (each match on
its own line). Anything else (an option, a later word, another shell, quoting) goes to Typer.
A test checks that `COMMANDS` is the registered command list, in order.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

COMMANDS = (
    "evaluate",
    "compare",
    "curves",
    "calibrate",
    "apply",
    "plan",
    "check",
    "ledger",
    "partition",
    "encode",
    "aggregate",
    "keygen",
    "flower",
)
"""The visible top-level commands, in the order `fedeval --help` lists them."""

COMPLETE_VAR = "_FEDEVAL_COMPLETE"


def first_word_completion(environ: Mapping[str, str] = os.environ) -> str | None:
    """What Typer would print for bash completion of the first word, or None where this cannot
    say (not bash, not the first word, an option, quoted or escaped words)."""
    if environ.get(COMPLETE_VAR) != "complete_bash" or environ.get("COMP_CWORD") != "1":
        return None
    words = environ.get("COMP_WORDS", "")
    if any(c in words for c in "\"'\\$`"):  # shell quoting: Typer's own parser reads it
        return None
    parts = words.split()
    if words[-1:].isspace() or len(parts) == 1:
        parts.append("")
    if len(parts) != 2:
        return None
    incomplete = parts[1]
    if incomplete.startswith("-"):
        return None
    return "\n".join(c for c in COMMANDS if c.startswith(incomplete))


def answer_first_word() -> None:
    """When this process is the `fedeval` script asked to complete its first word by bash,
    print the answer and exit 0 (before Typer loads); otherwise return."""
    if os.path.basename(sys.argv[0]) not in ("fedeval", "fedeval.exe"):
        return
    answer = first_word_completion()
    if answer is None:
        return
    sys.stdout.write(answer + "\n")
    sys.stdout.flush()
    raise SystemExit(0)
