"""The click that typer runs on, reached through typer's public names.

typer ≥ 0.22 vendors click as a private submodule; earlier releases depend on click itself. Which
one
a typer uses is read off a public class (`typer.BadParameter` is click's), so fedeval follows the
installed typer instead of importing either private path by name.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import typer

_ROOT = typer.BadParameter.__module__.rpartition(".")[0]  # click, or typer's vendored copy


def _part(name: str) -> ModuleType:
    return importlib.import_module(f"{_ROOT}.{name}")


exceptions = _part("exceptions")
core = _part("core")


class _NeverRaised(Exception):
    exit_code = 0


# Typed as Any: which click (and so which class) is only known at run time.
ClickException: Any = exceptions.ClickException
NoArgsIsHelpError: Any = getattr(exceptions, "NoArgsIsHelpError", _NeverRaised)
"""click >= 8.2: raised when a group runs with no arguments and has printed its help; absent
(never raised) in older click, where the help is printed and the context exits instead."""


def current_context() -> Any:
    """The running click context, or None outside a command."""
    return _part("globals").get_current_context(silent=True)
