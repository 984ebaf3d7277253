"""The package and the command load the numeric libraries only when a computation needs them.

`import fedeval`, `fedeval --version`, `--help` and shell completion run in a fresh interpreter
and must leave numpy, pandas, pyarrow, scipy and cryptography out of `sys.modules` (issue 28:
their import is most of a short command's time); `evaluate` on a Parquet file loads numpy,
pyarrow and scipy only. Speed itself is measured in benchmarks/startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib", "cryptography")

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


def heavy_modules(body: str, env: dict[str, str] | None = None, expect: str = "") -> list[str]:
    code = PROBE.format(body=body, heavy=HEAVY)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_import_fedeval_is_light() -> None:
    assert heavy_modules("import fedeval; fedeval.__all__; fedeval.UsageError") == []


@pytest.mark.parametrize(
    ("argv", "expect"),
    [(["--version"], "fedeval "), (["--help"], "evaluate"), (["evaluate", "--help"], "--model")],
)
def test_cli_without_computation_is_light(argv: list[str], expect: str) -> None:
    assert heavy_modules(CLI_BODY.format(argv=argv), expect=expect) == []


def test_shell_completion_is_light() -> None:
    env = {"_FEDEVAL_COMPLETE": "complete_bash", "COMP_WORDS": "fedeval ev", "COMP_CWORD": "1"}
    assert heavy_modules(CLI_BODY.format(argv=[]), env=env, expect="evaluate\n") == []


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


def test_evaluate_reads_parquet_without_pandas(tmp_path) -> None:
    """pyarrow's `to_numpy` imports pandas on first use; reading scores and labels must not."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    label = (rng.random(500) < 0.4).astype(np.int8)
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"score": rng.random(500), "label": label}), path)
    argv = ["evaluate", str(path), "--model", "distdp", "--format", "json", "--seed", "1"]
    assert heavy_modules(CLI_BODY.format(argv=argv), expect='"auc"') == [
        "numpy",
        "pyarrow",
        "scipy",
    ]


@pytest.mark.parametrize(
    "values",
    [
        ("float32", [0.25, 1.0, 0.0, 0.5, 0.75]),
        ("float64", [0.1, 0.2, 1.0, 0.0, 0.3]),
        ("float16", [0.5, 0.25, 1.0, 0.0, 0.125]),
        ("int8", [0, 1, 1, 0, 1]),
        ("int64", [1, 0, 0, 1, -3]),
        ("uint16", [0, 1, 7, 0, 1]),
        ("bool", [True, False, True, True, False]),
    ],
)
def test_as_numpy_matches_pyarrow(values: tuple[str, list]) -> None:
    """The same values and dtype as `to_numpy(zero_copy_only=False)`, sliced arrays included
    (a non-zero offset, booleans starting mid-byte), and arrays with nulls take pyarrow's path."""
    import numpy as np
    import pyarrow as pa

    from fedeval.tables.validate import as_numpy

    type_name, items = values
    arr = pa.array(items * 5, type=pa.type_for_alias(type_name))
    for piece in (arr, arr.slice(3), arr.slice(7, 11), arr.slice(25)):
        got, want = as_numpy(piece), piece.to_numpy(zero_copy_only=False)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    with_null = pa.array([items[0], None, items[1]], type=arr.type)
    got = as_numpy(with_null)
    want = with_null.to_numpy(zero_copy_only=False)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


COMPLETION_WORDS = [
    ("fedeval", "1"),
    ("fedeval ", "1"),
    *((f"fedeval {c}", "1") for c in "abcdefghijklmnopqrstuvwxyz"),
    ("fedeval ev", "1"),
    ("fedeval evaluate", "1"),
    ("fedeval evaluatex", "1"),
    ("fedeval cal", "1"),
    ("fedeval -", "1"),
    ("fedeval --q", "1"),
    ("fedeval ev ", "1"),
    ("fedeval evaluate --mo", "2"),
    ("fedeval 'ev", "1"),
]


@pytest.mark.parametrize(("words", "cword"), COMPLETION_WORDS)
def test_first_word_completion_is_typers(words: str, cword: str) -> None:
    """The answer given before Typer loads is Typer's own, byte for byte, wherever it answers
    (and it leaves options, later words and quoting to Typer)."""
    from typer.testing import CliRunner

    from fedeval.cli import app
    from fedeval.cli.completion import first_word_completion

    env = {"_FEDEVAL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": cword}
    fast = first_word_completion(env)
    typer_answer = CliRunner().invoke(app, [], env=env, prog_name="fedeval")
    assert typer_answer.exit_code == 0
    if fast is not None:
        assert fast + "\n" == typer_answer.output
    else:
        assert words.split()[-1:][0].startswith(("-", "'")) or cword != "1" or words[-1] == " "


def test_completion_commands_are_the_registered_ones() -> None:
    import typer

    from fedeval.cli import app, clicklib
    from fedeval.cli.completion import COMMANDS

    group = typer.main.get_command(app)
    ctx = clicklib.core.Context(group)
    names = [n for n in group.list_commands(ctx) if not group.get_command(ctx, n).hidden]
    assert list(COMMANDS) == names


def test_first_word_completion_skips_typer() -> None:
    """The console script answers the first word without loading Typer (nor pydantic)."""
    env = {"_FEDEVAL_COMPLETE": "complete_bash", "COMP_WORDS": "fedeval ca", "COMP_CWORD": "1"}
    body = CLI_BODY.format(argv=[]) + "\nassert 'typer' not in sys.modules"
    code = PROBE.format(body=body, heavy=("typer", "pydantic"))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("calibrate\n")
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize(
    ("argv", "fast"),
    [(["--version"], True), (["-V"], True), (["--version", "-Q"], False), (["-Q", "-V"], False)],
)
def test_version_is_answered_before_typer_as_typer_answers(argv: list[str], fast: bool) -> None:
    """`fedeval --version` (or -V) alone is answered without loading Typer, with Typer's own
    bytes and exit code; with anything beside it, Typer answers."""
    from typer.testing import CliRunner

    from fedeval.cli import app

    typer_answer = CliRunner().invoke(app, argv, prog_name="fedeval")
    body = CLI_BODY.format(argv=argv)
    code = PROBE.format(body=body, heavy=("typer", "pydantic", "rich"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    *printed, loaded = proc.stdout.splitlines(keepends=True)
    assert typer_answer.exit_code == 0
    assert "".join(printed) == typer_answer.output
    assert (json.loads(loaded) == []) is fast
