"""Typed errors. The library raises them; the CLI maps them to exit codes in one place.

Exit codes: 0 ok, 1 a quality gate failed, 2 bad input or usage.
"""

from __future__ import annotations


class FedevalError(ValueError):
    """Base class of every error fedeval raises on purpose."""

    exit_code = 2


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
