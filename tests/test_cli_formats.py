"""--format offers what `fedeval.views.render` prints for each command's result: the choices
are read from `RENDERERS` (`printed_formats`), so a renderer added there is a format the
command accepts, and the metavar `--help` shows lists exactly those choices."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from fedeval.cli import app
from fedeval.cli.output_options import format_choices
from fedeval.views.render import RENDERERS, Format

COMMANDS = {
    ("evaluate",): "Evaluation",
    ("curves",): "CurveResult",
    ("calibrate",): "CalibrationResult",
    ("compare",): "Comparison",
    ("flower", "simulate"): "Evaluation",
}


def format_param(path: tuple[str, ...]):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return next(p for p in command.params if p.name == "output_format")


@pytest.mark.parametrize(("path", "result_type"), COMMANDS.items())
def test_help_lists_the_formats_the_renderers_print(path, result_type):
    shown = format_param(path).metavar.strip("[]").split("|")
    assert shown == format_choices(result_type)
    assert "figure" not in shown and "parquet" not in shown  # --plot and -o's name choose those


@pytest.mark.parametrize(
    ("command", "result_type"),
    [("evaluate", "Evaluation"), ("calibrate", "CalibrationResult")],
)
def test_a_renderer_added_to_the_table_is_a_format_the_command_prints(
    cli, scores, monkeypatch, command, result_type
):
    # Before, --format was a fixed enum per command: `-f csv` was refused (exit 2) for evaluate
    # and calibrate however many renderers their results had.
    monkeypatch.setitem(RENDERERS, (result_type, Format.CSV), lambda r, c: f"{type(r).__name__}\n")
    result = cli(command, scores, "-m", "federated", "--ci-draws", "0", "-f", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{result_type}\n"


def test_a_format_without_a_renderer_is_refused_before_any_work(cli, scores):
    result = cli("evaluate", scores, "-f", "csv")
    assert result.exit_code == 2
    assert "'csv' is not one of 'table', 'json'." in result.stderr


def test_format_values_complete_without_loading_the_library():
    code = (
        "import runpy, sys\n"
        "sys.argv = ['fedeval']\n"
        "try:\n    runpy.run_module('fedeval', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'pyarrow', 'scipy'}))\n"
    )
    env = {**os.environ, "_FEDEVAL_COMPLETE": "complete_bash", "COMP_CWORD": "3"}
    env["COMP_WORDS"] = "fedeval curves -f "
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.stdout.split("\n") == [*format_choices("CurveResult"), "[]", ""], out.stderr
