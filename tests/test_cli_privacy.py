"""The privacy options end to end: --relation, signatures through the staged protocol, and the
claims each document states (tested through the CLI, as a user meets them)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fedeval.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(11)
    n = 800
    y = rng.integers(0, 2, n)
    pd.DataFrame(
        {
            "score": np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1),
            "label": y,
            "client": rng.integers(0, 60, n),
        }
    ).to_parquet("clients.parquet")
    return tmp_path


def evaluate_json(*args) -> dict:
    r = run("evaluate", "clients.parquet", "--format", "json", "--height", "4", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_relation_sets_the_sensitivity_and_what_is_public(work):
    add = evaluate_json("-m", "distdp", "--no-exact")["privacy"]
    rep = evaluate_json("-m", "distdp", "--no-exact", "--relation", "replace")
    assert add["relation"] == "add-remove" and rep["privacy"]["relation"] == "replace"
    assert rep["privacy"]["mechanism"]["sensitivity"] == 2 * add["mechanism"]["sensitivity"]
    assert math.isclose(rep["privacy"]["mechanism"]["alpha"], math.exp(-1 / 8))
    # Under replace the number of examples is public; under add-remove it is not released.
    assert rep["data"]["rows"] == 800
    assert "rows" not in evaluate_json("-m", "distdp", "--no-exact")["data"]
    assert "no exact count" in add["guarantee"]
    for key in ("server_learns", "analyst_learns", "dp_event", "neighbouring"):
        assert add[key], key


def test_relation_refusals(work):
    r = run("evaluate", "clients.parquet", "-m", "localdp", "--relation", "add-remove")
    assert r.exit_code == 2 and "not available under --model localdp" in flat(r.stderr)
    r = run("evaluate", "clients.parquet", "-m", "federated", "--relation", "replace")
    assert r.exit_code == 2 and "does not apply to --model federated" in flat(r.stderr)
    r = run("evaluate", "clients.parquet", "-m", "distdp", "--relation", "swap")
    assert r.exit_code == 2 and "'add-remove'" in flat(r.stderr)  # Click names the choices


def test_localdp_defaults_to_replace(work):
    doc = evaluate_json("-m", "localdp", "--no-exact")
    assert doc["privacy"]["relation"] == "replace"
    assert doc["privacy"]["dp_event"] == {"type": "pure", "epsilon": 5.0}


def test_localdp_unit_client_reports_have_a_fixed_shape(work):
    r = run("encode", "clients.parquet", "-m", "localdp", "--height", "3", "--unit", "client",
            "--max-examples", "4", "-o", "rep")  # fmt: skip
    assert r.exit_code == 0, r.output
    parts = sorted(Path("rep").glob("part-*.parquet"))
    client = pd.concat([pd.read_parquet(p) for p in parts])["client"]
    assert set(client.value_counts()) == {4}  # every client sends exactly L reports
    r = run("aggregate", "rep", "-o", "agg.fedeval")
    assert r.exit_code == 0, r.output
    doc = json.loads(Path("agg.fedeval").read_text())
    assert sum(doc["reporters"]) == 60 * 4


def test_signed_staged_protocol(work):
    assert run("keygen", "-o", "clients").exit_code == 0
    assert run("keygen", "-o", "server").exit_code == 0
    assert run("keygen", "-o", "mallory").exit_code == 0
    r = run("encode", "clients.parquet", "-m", "distdp", "--height", "4", "-o", "rep",
            "--sign-key", "clients.key")  # fmt: skip
    assert r.exit_code == 0, r.output
    r = run("aggregate", "rep", "-o", "agg.fedeval", "--verify-key", "mallory.pub")
    assert r.exit_code == 2 and "signature check failed" in flat(r.stderr)
    assert not Path("agg.fedeval").exists()
    r = run("aggregate", "rep", "-o", "agg.fedeval", "--verify-key", "clients.pub",
            "--sign-key", "server.key")  # fmt: skip
    assert r.exit_code == 0, r.output
    ok = run("evaluate", "--from", "agg.fedeval", "--verify-key", "server.pub")
    assert ok.exit_code == 0, ok.output
    bad = run("evaluate", "--from", "agg.fedeval", "--verify-key", "clients.pub")
    assert bad.exit_code == 2 and "agg.fedeval" in flat(bad.stderr)
    # Keys only where they mean something.
    r = run("evaluate", "clients.parquet", "--sign-key", "server.key")
    assert r.exit_code == 2 and "--save-release" in flat(r.stderr)
    r = run("evaluate", "clients.parquet", "--verify-key", "server.pub")
    assert r.exit_code == 2 and "--from" in flat(r.stderr)


def test_an_edited_report_fails_the_gate_check(work):
    doc = evaluate_json("-m", "distdp", "--seed", "3")
    doc["metrics"]["auc"]["estimate"] = 0.99
    Path("report.json").write_text(json.dumps(doc))
    r = run("check", "report.json", "--fail-under", "auc=0.9")
    assert r.exit_code == 2 and "integrity check failed" in flat(r.stderr)


def test_huge_cap_is_charged_exactly(work):
    # Δ = L·levels beyond any accountant's grid: the ledger still composes pure ε exactly.
    for _ in range(2):
        r = run("evaluate", "clients.parquet", "-m", "distdp", "--unit", "client",
                "--max-examples", "300000000", "--ledger", "l.jsonl", "--budget", "2",
                "--no-exact", "--ci-draws", "0")  # fmt: skip
        assert r.exit_code == 0, r.output
    r = run("ledger", "l.jsonl", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["datasets"]
    r = run("evaluate", "clients.parquet", "-m", "distdp", "--unit", "client",
            "--max-examples", "300000000", "--ledger", "l.jsonl", "--no-exact")  # fmt: skip
    assert r.exit_code == 2 and "budget" in flat(r.stderr)
    r = run("evaluate", "clients.parquet", "-m", "distdp", "--ledger", "l.jsonl",
            "--no-exact")  # fmt: skip
    assert r.exit_code == 2 and "unit" in flat(r.stderr)  # example-level into a client ledger
