"""Fixtures every test module may use (the `slow` marker is declared in pyproject.toml).

- `workdir`: a fresh temporary directory, made the working directory (CLI paths are relative).
- `cli`: runs the `fedeval` command in-process through Typer's runner, stdout and stderr apart
  (`cli("evaluate", "s.parquet", "-f", "json")`; `input=` for stdin).
- `scores`: a scored, labelled Parquet file in `workdir` (4,000 rows, fixed seed, AUC ≈ 0.84).

`make test` runs everything; `make test-fast` deselects the tests marked `slow` (each takes
seconds to minutes: statistical checks with many trials, the README's examples end to end).

Two things here serve only the suite's time:
- Typer's test runner turns the `app` into its Click command on every `invoke` (a walk over
  every command's signature and type hints: about 0.1 CPU-s a call, 80% of a small command's
  run in the privacy audit, which makes over a thousand calls). The command is made once per
  process here instead, as the console script makes it once per run; Click builds a fresh
  context (options, environment, defaults) for every call, so no call sees another's state.
- The tests marked `slow` are run first, so that over the xdist workers (which `make test`
  hands one test at a time) the long ones start early and the short ones fill in the end,
  rather than one long test running alone at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer.testing
from typer.testing import CliRunner, Result

from fedeval.cli import app

if callable(getattr(typer.testing, "_get_command", None)):  # else Typer's own, per call
    typer.testing._get_command = cache(typer.testing._get_command)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `slow` first (each group in its collected order)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh temporary directory, made the working directory for the test."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def cli_runner() -> CliRunner:
    """One runner for the session (it holds no state between invocations)."""
    return CliRunner()


@pytest.fixture
def cli(cli_runner: CliRunner) -> Callable[..., Result]:
    """`cli(*args, input=None, env=None)`: the `fedeval` command's result (exit_code, stdout,
    stderr kept apart)."""

    def invoke(*args: object, input: str | bytes | None = None, env: dict | None = None) -> Result:
        return cli_runner.invoke(app, [str(a) for a in args], input=input, env=env)

    return invoke


def scored_frame(n: int = 4000, seed: int = 7) -> pd.DataFrame:
    """n rows: labels half and half, scores ~ N(0.35 + 0.3·y, 0.18) clipped to [0, 1]."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.18), 0, 1)
    return pd.DataFrame({"score": s, "label": y})


@pytest.fixture
def scores(workdir: Path) -> str:
    """`s.parquet` in the working directory: `scored_frame()` (a module may define its own)."""
    scored_frame().to_parquet("s.parquet")
    return "s.parquet"
