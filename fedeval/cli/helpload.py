"""Loading Typer's help renderer without the parts a help page does not use.

`typer.rich_utils`, which renders every `--help`, imports `rich.markdown` (markdown-it, Pygments
through `rich.syntax`) and `rich.traceback` (`rich.pretty`, attrs) at its top, for help written
in Markdown and for pretty tracebacks: fedeval's help is Rich markup and its errors are its own
lines, so neither is drawn, yet loading them was about a quarter of `fedeval --help`'s time.
`load_help_renderer` imports `typer.rich_utils` with stand-ins for those two names: each loads
the real class the first time it is called or read (so a Markdown help or a pretty traceback
still renders as before), and the stand-in modules are taken out of `sys.modules` at once, so
any later `import rich.markdown` gets the real module. Only the names `typer.rich_utils`
imports from them are stood in for; if that import fails for any reason, it is done again the
ordinary way.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}
"""Module → the one name `typer.rich_utils` imports from it."""


class _Deferred(type):
    """The class of a stand-in: calling it or reading an attribute loads the real class."""

    _module: str
    _name: str

    def real(cls) -> Any:
        return getattr(importlib.import_module(cls._module), cls._name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls.real()(*args, **kwargs)

    def __getattr__(cls, attr: str) -> Any:  # classmethods (Traceback.from_exception)
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(cls.real(), attr)

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls.real())


def _stand_in(module: str, name: str) -> types.ModuleType:
    stand_in = types.ModuleType(module)
    setattr(stand_in, name, _Deferred(name, (), {"_module": module, "_name": name}))
    return stand_in


def load_help_renderer() -> None:
    """Import `typer.rich_utils` (once) without loading `rich.markdown` or `rich.traceback`."""
    if "typer.rich_utils" in sys.modules:
        return
    placed = {
        module: _stand_in(module, name)
        for module, name in DEFERRED.items()
        if module not in sys.modules
    }
    sys.modules.update(placed)
    try:
        importlib.import_module("typer.rich_utils")
    except Exception:
        sys.modules.pop("typer.rich_utils", None)
    finally:
        for module, stand_in in placed.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]
    if "typer.rich_utils" not in sys.modules:  # the guarded fallback: the ordinary import
        try:
            importlib.import_module("typer.rich_utils")
        except ImportError:  # Typer without Rich: it renders plain help and never asks
            pass
