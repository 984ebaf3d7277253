"""The privacy budget ledger: composition by dp_accounting, refusals, and concurrent runs."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.errors import InputError, UsageError
from fedeval.ledger import SCHEMA, BudgetExceeded, charge, read_ledger, total_epsilon

runner = CliRunner()


def entry(model="distdp", epsilon=1.0, sensitivity=8):
    return {
        "schema": SCHEMA,
        "time": "2026-01-01T00:00:00+00:00",
        "command": "evaluate",
        "source": "x",
        "model": model,
        "unit": "example",
        "neighbouring": "add or remove one example",
        "epsilon": epsilon,
        "delta": 0.0 if epsilon is not None else None,
        "mechanism": {"name": "m", "sensitivity": sensitivity},
        "covered": "test",
        "seed": 1,
        "fedeval_version": "0",
    }


def test_pure_dp_composes_by_adding_up():
    # Basic composition is exact for pure ε-DP at δ = 0; the accountant must agree with the sum.
    entries = [entry(epsilon=0.5), entry(epsilon=1.0, sensitivity=1), entry("localdp", 2.0)]
    assert total_epsilon(entries) == pytest.approx(3.5, rel=1e-9)
    assert total_epsilon([]) == 0.0


def test_charge_and_refuse(tmp_path):
    path = tmp_path / "l.jsonl"
    assert charge(path, entry(epsilon=1.0), budget=2.0) == pytest.approx(1.0)
    assert charge(path, entry(epsilon=1.0), budget=2.0) == pytest.approx(2.0)
    with pytest.raises(BudgetExceeded, match="from ε = 2 to 3, over its budget of 2"):
        charge(path, entry(epsilon=1.0), budget=2.0)
    assert len(read_ledger(path)) == 2  # the refused release was not recorded
    with pytest.raises(UsageError, match="adds no noise"):
        charge(path, entry("federated", None), budget=10.0)
    with pytest.raises(UsageError, match="positive"):
        charge(path, entry(), budget=0.0)


def test_malformed_ledger(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text(json.dumps(entry()) + "\n{oops\n")
    with pytest.raises(InputError, match="line 2: not valid JSON"):
        read_ledger(path)
    path.write_text('{"schema": "something/1"}\n')
    with pytest.raises(InputError, match="line 1: not a fedeval ledger entry"):
        read_ledger(path)


def _worker(path: str, results) -> None:
    try:
        charge(path, entry(epsilon=1.0), budget=5.0)
        results.put("ok")
    except BudgetExceeded:
        results.put("refused")


def test_concurrent_runs_lose_nothing_and_respect_the_budget(tmp_path):
    # Eight processes race to charge ε = 1 each against a budget of 5: exactly five succeed,
    # every success is in the file, and the total never exceeds the budget.
    path = str(tmp_path / "l.jsonl")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, results)) for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    outcomes = sorted(results.get(timeout=10) for _ in procs)
    assert outcomes == ["ok"] * 5 + ["refused"] * 3
    assert len(read_ledger(path)) == 5
    assert total_epsilon(read_ledger(path)) == pytest.approx(5.0)


@pytest.fixture
def scores(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 3000)
    pq.write_table(pa.table({"score": rng.random(3000), "label": y}), "s.parquet")
    return "s.parquet"


def test_cli_ledger(scores):
    args = ["--seed", "1", "--ledger", "l.jsonl", "--budget", "2.5"]
    assert runner.invoke(app, ["evaluate", scores, *args]).exit_code == 0
    assert runner.invoke(app, ["calibrate", scores, *args]).exit_code == 0
    r = runner.invoke(app, ["curves", scores, *args, "--format", "json", "-o", "c.json"])
    assert r.exit_code == 2
    assert "over its budget of 2.5; nothing was released" in r.stderr
    assert r.stdout == "" and not Path("c.json").exists()
    entries = read_ledger("l.jsonl")
    assert [e["command"] for e in entries] == ["evaluate", "calibrate"]
    assert entries[0]["mechanism"]["name"] == "discrete Laplace from per-client Pólya shares"
    shown = runner.invoke(app, ["ledger", "l.jsonl", "--budget", "2.5", "--format", "json"])
    assert json.loads(shown.stdout)["epsilon_spent"] == pytest.approx(2.0)
    r = runner.invoke(app, ["evaluate", scores, "--ledger", "l.jsonl"])
    assert r.exit_code == 2 and "--ledger and --budget go together" in r.stderr
    r = runner.invoke(
        app, ["evaluate", scores, "-m", "federated", "--ledger", "l.jsonl", "--budget", "9"]
    )
    assert r.exit_code == 2 and "adds no noise" in r.stderr
