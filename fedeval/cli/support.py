"""What every `fedeval` command shares around its body: the one place errors become messages
and exit codes, JSON errors under ``--format json``, ``--debug`` tracebacks, and a reader that
goes away (SIGPIPE).

Exit codes: 0 ok, 1 a quality gate failed, 2 bad input or usage, 70 an internal error (a bug in
fedeval; ``--debug`` shows its traceback). A message is one line on stderr, ``fedeval: error:
…`` (plus one ``hint:`` line where useful), never a box or a traceback, so CI logs stay
greppable; colour only on a terminal and never with ``NO_COLOR``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from fedeval.cli import clicklib
from fedeval.cli.helpload import load_help_renderer
from fedeval.core.errors import FedevalError, GateFailed

EXIT_INTERNAL = 70
"""sysexits' EX_SOFTWARE: fedeval itself failed."""
DEBUG_ENV = "FEDEVAL_DEBUG"
_META_JSON = "fedeval.json_errors"
_META_DEBUG = "fedeval.debug"


def error_console() -> Console:
    """Stderr for errors and warnings (never silenced by --quiet); made on each use, so it writes
    to the stderr of the moment (a test runner swaps it)."""
    return Console(stderr=True, soft_wrap=True, highlight=False)


def wants_json(args: list[str]) -> bool:
    """Whether a command line asks for ``--format json`` (its errors are then JSON too)."""
    for i, a in enumerate(args):
        if a in ("--format", "-f") and i + 1 < len(args) and args[i + 1] == "json":
            return True
        if a in ("--format=json", "-fjson", "-f=json"):
            return True
    return False


_PARAMETER = re.compile(r"`([a-z][a-z0-9_]*)`")
_FLAG_ALIASES = {"method": "--curve-method"}
"""Library parameters whose option has another name (tried after the same-named option)."""


def _long_flags() -> set[str]:
    """The long options of the running command and of the program, e.g. '--score-col'."""
    ctx = click_context()
    if ctx is None:
        return set()
    root_ctx = ctx.find_root()
    root = root_ctx.command
    sub = getattr(root, "commands", {}).get(root_ctx.invoked_subcommand or "")
    if sub is None and ctx.command is not root:
        sub = ctx.command
    commands = [root] if sub is None else [root, sub]
    return {
        opt
        for command in commands
        for param in command.params
        for opt in getattr(param, "opts", ())
        if opt.startswith("--")
    }


def in_cli_words(text: str, flags: set[str] | None = None) -> str:
    """A library message as the command line speaks: a parameter the library names in
    backticks (`score_range`) becomes the option that sets it (--score-range), where there is
    one. The library itself names no command-line flag."""
    flags = _long_flags() if flags is None else flags

    def flag(m: re.Match[str]) -> str:
        for name in ("--" + m.group(1).replace("_", "-"), _FLAG_ALIASES.get(m.group(1))):
            if name in flags:
                return name
        return m.group(0)

    return _PARAMETER.sub(flag, text)


def print_error(
    message: str, *, hint: str | None = None, doc: dict[str, Any] | None = None
) -> None:
    """One line `fedeval: error: …` (and a hint line) on stderr; `doc` also as JSON on stdout."""
    flags = _long_flags()
    message = in_cli_words(message, flags)
    hint = None if hint is None else in_cli_words(hint, flags)
    if doc is not None:
        doc = dict(doc)
        for key in ("message", "hint"):
            if isinstance(doc.get(key), str):
                doc[key] = in_cli_words(doc[key], flags)
    out = error_console()
    out.print(Text.assemble(("fedeval: error:", "bold red"), " ", " ".join(message.split())))
    if hint:
        out.print(Text.assemble(("hint:", "dim"), " ", hint))
    if doc is not None:
        try:
            sys.stdout.write(json.dumps({"error": doc}, allow_nan=False) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            pass


def _internal(e: BaseException) -> str:
    where = ""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
    text = " ".join(str(e).split())
    if len(text) > 300:
        text = text[:300] + "…"
    return (
        f"internal error{where}: {type(e).__name__}: {text}"
        if text
        else (f"internal error{where}: {type(e).__name__}")
    )


def _silence_stdout() -> None:
    """The reader of stdout went away (`| head`): send what is left to /dev/null, so the
    interpreter's final flush raises no BrokenPipeError either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file descriptor (a test runner): nothing will flush to a pipe


def _is_broken_pipe(e: BaseException) -> bool:
    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE)


class FedevalGroup(TyperGroup):
    """The `fedeval` command group: every exception of every command ends here."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        argv = sys.argv[1:] if args is None else list(args)
        if not argv or any(a in ("-h", "--help") for a in argv):
            load_help_renderer()  # before Typer imports it with parts help does not draw
        try:
            if any("\x00" in str(a) for a in argv):  # only an in-process caller can pass one
                raise clicklib.exceptions.UsageError(
                    "an argument holds a NUL byte: no file name or value can."
                )
            code = super().main(
                argv,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except clicklib.NoArgsIsHelpError as e:  # the help is already printed
            code = e.exit_code
        except clicklib.ClickException as e:  # options the parser refused
            code = self._report_click(e, wants_json(argv))
        except typer.Abort:
            error_console().print("fedeval: aborted")
            code = 130
        except KeyboardInterrupt:
            code = 130
        except SystemExit as e:  # rich, on a broken pipe while printing help
            if e.__context__ is None or not _is_broken_pipe(e.__context__):
                raise
            code = 0
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    @staticmethod
    def _report_click(e: clicklib.ClickException, as_json: bool) -> int:
        hint = None
        ctx = getattr(e, "ctx", None)
        if ctx is not None:
            hint = f"see '{ctx.command_path} --help'."
        message = e.format_message()
        print_error(message, hint=hint, doc=_doc(message, "UsageError", hint) if as_json else None)
        code: int = e.exit_code
        return code

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[_META_JSON] = wants_json(list(args))
        return super().parse_args(ctx, _globals_first(list(args)))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except SystemExit as e:
            # rich answers a broken pipe with SystemExit(1) after pointing stdout at /dev/null
            if e.__context__ is not None and _is_broken_pipe(e.__context__):
                raise typer.Exit(0) from None
            raise
        except clicklib.ClickException as e:
            raise typer.Exit(self._report_click(e, ctx.meta.get(_META_JSON, False))) from None
        except FedevalError as e:
            # A failed gate's verdicts are in the command's own document (its `gates` field):
            # an error document after it would put two JSON values on stdout.
            as_json = ctx.meta.get(_META_JSON) and not isinstance(e, GateFailed)
            print_error(e.message, hint=e.hint, doc=e.to_dict() if as_json else None)
            raise typer.Exit(e.exit_code) from None
        except Exception as e:
            if _is_broken_pipe(e):
                _silence_stdout()
                raise typer.Exit(0) from None
            if ctx.meta.get(_META_DEBUG) or os.environ.get(DEBUG_ENV):
                raise
            message = _internal(e)
            hint = "this is a bug in fedeval; run again with --debug for the traceback."
            doc = _doc(message, "InternalError", hint) if ctx.meta.get(_META_JSON) else None
            print_error(message, hint=hint, doc=doc)
            raise typer.Exit(EXIT_INTERNAL) from None


GLOBAL_FLAGS = ("-Q", "--quiet", "--debug")
"""Options of the whole program that are as natural after the command as before it
(`fedeval evaluate FILE -Q` is `fedeval -Q evaluate FILE`); none takes a value."""


def _globals_first(args: list[str]) -> list[str]:
    """`args` with every GLOBAL_FLAGS flag moved before the command (none after `--`)."""
    end = args.index("--") if "--" in args else len(args)
    head, tail = args[:end], args[end:]
    flags = [a for a in head if a in GLOBAL_FLAGS]
    return flags + [a for a in head if a not in GLOBAL_FLAGS] + tail


def set_debug(ctx: typer.Context, value: bool) -> None:
    ctx.meta[_META_DEBUG] = bool(value)


def _doc(message: str, kind: str, hint: str | None) -> dict[str, Any]:
    """The JSON error document of an error that is not a `FedevalError` (nothing located)."""
    return {
        "message": message,
        "type": kind,
        "file": None,
        "column": None,
        "row": None,
        "hint": hint,
    }


def click_context() -> Any:
    return clicklib.current_context()


def option_given(name: str) -> bool:
    """Whether the running command's parameter `name` was given on the command line (or in the
    environment), not left at its default: an option that does not apply is refused even when
    its value equals the default."""
    source = clicklib.core.ParameterSource
    ctx = click_context()
    if ctx is None:
        return False
    return ctx.get_parameter_source(name) in (
        source.COMMANDLINE,
        source.ENVIRONMENT,
    )
