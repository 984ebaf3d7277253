"""The `fedeval ledger` command and the --ledger/--budget options, through Typer's CliRunner.

Ledgers are written through the library API (`fedeval.privacy.ledger`), so these tests do not
depend on
what a run's privacy section holds; one end-to-end test drives evaluate → ledger.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.privacy.ledger import charge, make_entry, read_ledger

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDE = {"COLUMNS": "200"}


def flat(text: str) -> str:
    return " ".join(ANSI.sub("", text).split())


def invoke(*args: str):
    return runner.invoke(app, list(args), env=WIDE)


def doc(epsilon=1.0, *, unit="example", relation="add-remove", event=None, delta=0.0):
    if event is None:
        event = {"type": "discrete_laplace", "parameter": epsilon / 8, "sensitivity": 8}
    return {
        "fedeval_version": "0.0-test",
        "run": {"seed": 4242, "source": "/secret/scores.parquet"},
        "privacy": {
            "model": "distdp",
            "epsilon": epsilon,
            "delta": delta,
            "unit": unit,
            "relation": relation,
            "mechanism": {"name": "discrete Laplace", "sensitivity": 8},
            "dp_event": event,
            "reproducible_simulation": False,
        },
    }


def entry(epsilon=1.0, dataset="default", command="evaluate", **kw):
    return make_entry(doc(epsilon, **kw), command=command, covered="metrics", dataset=dataset)


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def ledger(here):
    charge("l.jsonl", entry(1.0), budget=3.0)
    charge("l.jsonl", entry(0.5, command="calibrate"))
    charge("l.jsonl", entry(2.0, dataset="hospital-b", unit="client", relation="replace"))
    return "l.jsonl"


def test_ledger_table(ledger):
    r = invoke("ledger", ledger)
    assert r.exit_code == 0, r.stderr
    out = flat(r.stdout)
    assert "budget ε = 3, δ = 0 for each dataset" in out
    assert "dataset" in out and "source" not in out and "hospital-b" in out
    assert "DLap Δ=8" in out
    assert (
        "dataset 'default' (unit example, relation add-remove): 2 releases · ε spent 1.5 of 3 "
        "(left: 1.5)" in out
    )
    assert (
        "dataset 'hospital-b' (unit client, relation replace): 1 release · ε spent 2 of 3 "
        "(left: 1)" in out
    )
    assert "ε adds up exactly" in out


def test_ledger_json(ledger):
    r = invoke("ledger", ledger, "--format", "json")
    assert r.exit_code == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["budget"] == {"epsilon": 3.0, "delta": 0.0}
    assert shown["datasets"]["default"]["epsilon_spent"] == pytest.approx(1.5)
    assert shown["datasets"]["default"]["epsilon_left"] == pytest.approx(1.5)
    assert shown["datasets"]["default"]["releases"] == 2
    assert shown["datasets"]["hospital-b"] == {
        "unit": "client",
        "relation": "replace",
        "releases": 1,
        "epsilon_spent": pytest.approx(2.0),
        "epsilon_left": pytest.approx(1.0),
        "composition": "pure ε-DP: ε adds up exactly (δ = 0)",
        "sampler_delta": 0.0,
    }
    assert [e["command"] for e in shown["entries"]] == ["evaluate", "calibrate", "evaluate"]
    assert "4242" not in r.stdout and "secret" not in r.stdout and '"seed"' not in r.stdout


def test_ledger_shows_gaussian_composition(here):
    event = {"type": "gaussian", "noise_multiplier": 2.0, "count": 10}
    charge("g.jsonl", entry(3.0, unit="client", event=event, delta=1e-5), budget=10.0)
    r = invoke("ledger", "g.jsonl")
    assert r.exit_code == 0, r.stderr
    out = flat(r.stdout)
    assert "δ = 1e-05 for each dataset" in out and "Gauss z=2.0×10" in out
    assert "Rényi DP (dp_accounting RdpAccountant, all events) at δ = 1e-05" in out


def test_ledger_refusals(ledger):
    r = invoke("ledger", ledger, "--budget", "9")
    assert r.exit_code == 2 and "stores its budget ε = 3" in flat(r.stderr)
    assert invoke("ledger", ledger, "--budget", "3").exit_code == 0
    r = invoke("ledger", "absent.jsonl")
    assert r.exit_code == 2 and "no such file" in r.stderr
    Path("v1.jsonl").write_text(json.dumps({"schema": "fedeval.ledger-entry/1"}) + "\n")
    r = invoke("ledger", "v1.jsonl")
    assert r.exit_code == 2
    assert "version-1" in flat(r.stderr) and "new ledger" in flat(r.stderr)


def test_ledger_options_are_checked_before_the_run(scores, ledger):
    r = invoke("evaluate", scores, "--budget", "2")
    assert r.exit_code == 2 and "add --ledger" in flat(r.stderr)
    r = invoke("evaluate", scores, "--ledger", "new.jsonl")
    assert r.exit_code == 2 and "does not exist yet" in flat(r.stderr)
    assert not Path("new.jsonl").exists()
    before = Path(ledger).read_bytes()
    r = invoke("evaluate", scores, "--ledger", ledger, "--budget", "10", "-o", "r.json")
    assert r.exit_code == 2 and "stores its budget ε = 3" in flat(r.stderr)
    assert r.stdout == "" and not Path("r.json").exists()
    assert Path(ledger).read_bytes() == before


def test_seeded_runs_are_not_charged(scores, ledger):
    before = Path(ledger).read_bytes()
    r = invoke("evaluate", scores, "--seed", "1", "--ledger", ledger, "-o", "r.json")
    assert r.exit_code == 2 and "reproducible simulation" in flat(r.stderr)
    assert not Path("r.json").exists() and Path(ledger).read_bytes() == before


def test_evaluate_then_ledger(scores):
    args = ["--ledger", "run.jsonl", "--budget", "2.5"]
    r = invoke("evaluate", scores, *args)
    assert r.exit_code == 0, r.stderr
    assert "dataset 'default' ε spent 1 of 2.5" in flat(r.stderr)
    assert invoke("calibrate", scores, "--ledger", "run.jsonl").exit_code == 0
    r = invoke("curves", scores, "--ledger", "run.jsonl", "--format", "json", "-o", "c.json")
    assert r.exit_code == 2
    assert "over its budget of 2.5; nothing was released" in flat(r.stderr)
    # under --format json the refusal is the one document on stdout; no file is written
    assert json.loads(r.stdout)["error"]["type"] == "BudgetExceeded"
    assert not Path("c.json").exists()
    header, entries = read_ledger("run.jsonl")
    assert header["budget"] == {"epsilon": 2.5, "delta": 0.0}
    assert [e["command"] for e in entries] == ["evaluate", "calibrate"]
    # `--height auto` under distdp: the probe of the class totals composed with the tree.
    # The probe's noise picks the tree: an even one is one discrete Laplace event, a split one
    # (`--level-split auto`) composes one per part; either way the tree spends 0.95 of ε.
    event = entries[0]["dp_event"]
    assert event["type"] == "composed"
    probe, tree = event["events"]
    assert probe["type"] == "discrete_laplace"
    parts = tree["events"] if tree["type"] == "composed" else [tree]
    assert {e["type"] for e in parts} == {"discrete_laplace"}
    spent = [e["parameter"] * e["sensitivity"] for e in (probe, *parts)]
    assert spent[0] == pytest.approx(0.05) and sum(spent) == pytest.approx(1.0)
    assert "source" not in entries[0] and "seed" not in json.dumps(entries)
    shown = json.loads(invoke("ledger", "run.jsonl", "--format", "json").stdout)
    assert shown["datasets"]["default"]["epsilon_spent"] == pytest.approx(2.0)
    r = invoke("evaluate", scores, "-m", "federated", "--ledger", "run.jsonl")
    assert r.exit_code == 2 and "adds no noise" in flat(r.stderr)
