"""The package and the command load the numeric libraries only when a computation needs them.

`import fedeval`, `fedeval --version`, `--help` and shell completion run in a fresh interpreter
and must leave numpy, pandas, pyarrow and scipy out of `sys.modules` (issue 28: their import is
most of a short command's time). Speed itself is measured in benchmarks/startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib")

# Runs the code, then prints which heavy top-level packages were imported (stdout's last line).
PROBE = """
import sys, json, runpy
{body}
print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))))
"""

CLI_BODY = """
sys.argv = ["fedeval", *{argv!r}]
try:
    runpy.run_module("fedeval", run_name="__main__")
except SystemExit as e:
    assert e.code in (0, None), e.code
"""


def heavy_modules(body: str, env: dict[str, str] | None = None) -> list[str]:
    code = PROBE.format(body=body, heavy=HEAVY)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_import_fedeval_is_light() -> None:
    assert heavy_modules("import fedeval; fedeval.__all__; fedeval.UsageError") == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["evaluate", "--help"]])
def test_cli_without_computation_is_light(argv: list[str]) -> None:
    assert heavy_modules(CLI_BODY.format(argv=argv)) == []


def test_shell_completion_is_light() -> None:
    env = {"_FEDEVAL_COMPLETE": "complete_bash", "COMP_WORDS": "fedeval ev", "COMP_CWORD": "1"}
    assert heavy_modules(CLI_BODY.format(argv=[]), env=env) == []


def test_public_names_still_resolve() -> None:
    """Every name of `__all__` loads on first use and is the object its module defines."""
    import fedeval
    from fedeval.api.evaluate import evaluate

    for name in fedeval.__all__:
        assert getattr(fedeval, name) is not None
    assert fedeval.evaluate is evaluate
    assert set(fedeval.__all__) <= set(dir(fedeval))
    with pytest.raises(AttributeError):
        _ = fedeval.no_such_name  # type: ignore[attr-defined]
