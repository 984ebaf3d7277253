"""Typed errors. The library raises them; the CLI maps them to exit codes in one place.

Exit codes: 0 ok, 1 a quality gate failed, 2 bad input or usage, 70 an internal error (a bug:
anything that is not a `FedevalError`).

Every error can say where the problem is: `file`, `column` and `row` (1-based, not counting a CSV
header). Raisers may pass them as keywords; otherwise they are read from the message, whose
convention across fedeval is ``'FILE', column 'COL', row N: what is wrong``, so the CLI can print
them as fields (``--format json``) without every message being rewritten.
"""

from __future__ import annotations

import re
from typing import Any

_WHERE = re.compile(
    r"^(?:cannot read (?:\w+ )?)?'(?P<file>[^']+)'(?:, column '(?P<column>[^']*)')?"
    r"(?:, row (?P<row>\d+))?"
)
_LINE = re.compile(r"^ledger '(?P<file>[^']+)', line (?P<row>\d+)")


class FedevalError(ValueError):
    """Base class of every error fedeval raises on purpose.

    `file`, `column`, `row` locate the problem where one thing is to blame (None otherwise);
    `hint` is one line saying what to try next.
    """

    exit_code = 2

    def __init__(
        self,
        message: str = "",
        *,
        file: str | None = None,
        column: str | None = None,
        row: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        found = _WHERE.match(message) or _LINE.match(message)
        parsed = found.groupdict() if found else {}
        self.file = file if file is not None else parsed.get("file")
        self.column = column if column is not None else parsed.get("column")
        raw_row = row if row is not None else parsed.get("row")
        self.row = None if raw_row is None else int(raw_row)
        self.hint = hint

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def to_dict(self) -> dict[str, Any]:
        """The error as the CLI's ``{"error": {...}}`` document holds it."""
        return {
            "message": self.message,
            "type": type(self).__name__,
            "file": self.file,
            "column": self.column,
            "row": self.row,
            "hint": self.hint,
        }


class InputError(FedevalError):
    """The input table is unreadable or does not hold what was asked for.

    The message names the file, the column and (where one row is to blame) the row.
    """


class UsageError(FedevalError):
    """Options that are invalid or conflict with each other."""


class ReleaseError(FedevalError):
    """A release cannot be merged or decoded (mixed parameters, incomplete population)."""


class GateFailed(FedevalError):
    """A quality gate (floor or ceiling on a metric) was broken."""

    exit_code = 1
