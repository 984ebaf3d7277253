"""`--help` renders without loading Markdown or traceback support (issue 28: they were about a
quarter of its time), and exactly as before: every command's help page is byte for byte the
page rendered with `typer.rich_utils` imported the ordinary way, and the stood-in names still
give the real classes when used."""

from __future__ import annotations

import json
import os
import subprocess
import sys

DEFERRED_MODULES = ("rich.markdown", "rich.traceback", "markdown_it", "pygments", "attr")

# Every command's help page in one interpreter; with ORDINARY, typer.rich_utils imported first
# the ordinary way (so load_help_renderer has nothing to do).
PAGES = """
import json, sys
if {ordinary!r}:
    import typer.rich_utils
import typer
from typer.testing import CliRunner
from fedeval.cli import app
group = typer.main.get_command(app)
paths = []
def walk(command, path):
    paths.append(path)
    for name, sub in getattr(command, "commands", {{}}).items():
        walk(sub, [*path, name])
walk(group, [])
runner = CliRunner()
pages = {{}}
for path in paths:
    result = runner.invoke(app, [*path, "--help"], env={{"COLUMNS": "120"}})
    pages[" ".join(path)] = [result.exit_code, result.output]
print(json.dumps(pages))
"""


def run(code: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_help_does_not_load_markdown_or_tracebacks() -> None:
    code = """
import runpy, sys, json
sys.argv = ["fedeval", "--help"]
try:
    runpy.run_module("fedeval", run_name="__main__")
except SystemExit as e:
    assert e.code in (0, None), e.code
print(json.dumps(sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[1:])))))
"""
    out = run(code.replace("sys.argv[1:]", repr(DEFERRED_MODULES)))
    assert "Usage" in out
    assert json.loads(out.strip().splitlines()[-1]) == []


def test_every_help_page_is_as_with_the_ordinary_import() -> None:
    fast = json.loads(run(PAGES.format(ordinary=False)).strip().splitlines()[-1])
    ordinary = json.loads(run(PAGES.format(ordinary=True)).strip().splitlines()[-1])
    assert len(fast) >= 15 and "evaluate" in fast and "flower simulate" in fast
    assert fast == ordinary
    assert all(code == 0 and "Usage" in page for code, page in fast.values())


def test_stand_ins_give_the_real_classes() -> None:
    code = """
import sys
from fedeval.cli.helpload import load_help_renderer
load_help_renderer()
assert "rich.markdown" not in sys.modules and "rich.traceback" not in sys.modules
import typer.rich_utils as ru
from rich.text import Text
md = ru._make_rich_text(text="*x*", style="", markup_mode="markdown")
import rich.markdown, rich.traceback
assert isinstance(md, rich.markdown.Markdown), type(md)
assert isinstance(md, ru.Markdown) and not isinstance(Text("x"), ru.Markdown)
assert rich.markdown.Markdown is not ru.Markdown and hasattr(rich.markdown, "__file__")
try:
    1 / 0
except ZeroDivisionError as e:
    tb = ru.Traceback.from_exception(type(e), e, e.__traceback__)
assert isinstance(tb, rich.traceback.Traceback), type(tb)
print("ok")
"""
    assert run(code).strip().endswith("ok")
