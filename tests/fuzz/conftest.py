"""Fuzz budget and the valid inputs every case starts from.

`make test` runs the "ci" profile: few examples per test, derandomized (the same cases on every
run). FEDEVAL_FUZZ=full selects "full": 24 times more cases, over 5000 CLI runs in all, drawn afresh
each time. Neither stores an example database.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from . import harness

_COMMON = {
    "database": None,
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
}
settings.register_profile("ci", max_examples=25, derandomize=True, **_COMMON)
settings.register_profile("full", max_examples=600, derandomize=False, **_COMMON)
settings.load_profile("full" if os.environ.get("FEDEVAL_FUZZ") == "full" else "ci")


def examples(weight: float) -> settings:
    """This test's share of the profile's budget: `weight` tenths of its max_examples."""
    return settings(max_examples=max(1, round(weight * settings.default.max_examples / 10)))


def _invoke_ok(*args: str, input: str | None = None) -> None:
    result = harness.runner.invoke(harness.app, ["-Q", *args], input=input)
    assert result.exit_code == 0, (args, result.stderr, result.exception)


@pytest.fixture(scope="session")
def seeds(tmp_path_factory) -> Path:
    """Valid files of every kind, made once by the CLI itself: tables, maps, a report, a
    saved release, a ledger with one charge, a directory of client reports, a key pair."""
    root = tmp_path_factory.mktemp("fuzz-seeds")
    rng = np.random.default_rng(0)
    n = 80
    y = np.arange(n) % 2
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1)
    rows = "".join(f"{a:.4f},{b},{i % 20}\n" for i, (a, b) in enumerate(zip(s, y, strict=True)))
    (root / "good.csv").write_text("score,label,client\n" + rows)
    c, m = 3, 120
    labels = rng.integers(0, c, m)
    probs = rng.dirichlet(np.ones(c), m)
    head = "label," + ",".join(f"prob_{j}" for j in range(c)) + "\n"
    body = "".join(
        f"{lab}," + ",".join(f"{v:.6f}" for v in row / row.sum()) + "\n"
        for lab, row in zip(labels, probs, strict=True)
    )
    (root / "mc.csv").write_text(head + body)
    old = os.getcwd()
    os.chdir(root)
    try:
        fast = ["--ci-draws", "0"]
        _invoke_ok(
            "evaluate",
            "good.csv",
            *fast,
            "-o",
            "report.json",
            "--save-release",
            "release.json",
            "--ledger",
            "ledger.jsonl",
            "--budget",
            "10",
        )
        _invoke_ok("evaluate", "good.csv", "--ci-draws", "20", "--seed", "1", "-o", "ci.json")
        _invoke_ok("calibrate", "good.csv", *fast, "--seed", "1", "-o", "map.json")
        _invoke_ok(
            "calibrate",
            "mc.csv",
            "--multiclass",
            "--seed",
            "1",
            "--clients",
            "10",
            "-o",
            "mmap.json",
        )
        _invoke_ok("keygen", "-o", "k")
        _invoke_ok(
            "encode",
            "good.csv",
            "-m",
            "distdp",
            "--height",
            "5",
            "--min-cohort",
            "10",
            "--sign-key",
            "k.key",
            "-o",
            "reports",
        )
        for lock in root.glob("*.lock"):
            lock.unlink()
    finally:
        os.chdir(old)
    return root


@pytest.fixture(scope="session")
def base(tmp_path_factory) -> Path:
    """Where each case gets its own directory."""
    return tmp_path_factory.mktemp("fuzz-cases")


def pytest_terminal_summary(terminalreporter) -> None:
    if harness.RUNS:
        total = sum(harness.RUNS.values())
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(harness.RUNS.items()))
        terminalreporter.write_line(f"fuzz: {total} CLI runs ({parts})")
