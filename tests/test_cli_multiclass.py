"""`fedeval calibrate --multiclass` and `fedeval apply` with a multiclass map, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fedeval.audit import all_keys
from fedeval.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    n, c = 3000, 4
    y = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)) + 2.5 * np.eye(c)[y]
    df = pd.DataFrame({f"logit_{j}": 3 * logits[:, j] for j in range(c)})  # overconfident
    df["label"] = y
    df.to_parquet("mc.parquet")
    return tmp_path


@pytest.mark.parametrize("method", ["fedbin", "fedbbq", "fedtemp"])
def test_calibrate_then_apply(work, method):
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", method, "--rounds", "3",
            "--participation", "0.5", "--seed", "1", "-o", "map.json", "-f", "json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "multiclass" and doc["method"] == method
    assert json.loads(Path("map.json").read_text()) == doc
    r = run("apply", "map.json", "mc.parquet", "-o", "out.parquet")
    assert r.exit_code == 0, r.output
    out = pd.read_parquet("out.parquet")
    cal = out[[f"cal_prob_{j}" for j in range(4)]].to_numpy()
    np.testing.assert_allclose(cal.sum(axis=1), 1.0, atol=1e-9)
    if method == "fedtemp":  # order-preserving: the top class never changes
        logits = out[[f"logit_{j}" for j in range(4)]].to_numpy()
        assert np.array_equal(cal.argmax(1), logits.argmax(1))


def test_dp_run_states_its_guarantee(work):
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1",
            "--delta", "1e-6", "--clip", "0.4", "--seed", "2", "-f", "json")  # fmt: skip
    assert r.exit_code == 0, r.output
    priv = json.loads(r.stdout)["privacy"]
    assert priv["delta"] == 1e-6
    assert priv["mechanism"]["clip"] == {"temperature": 0.4, "evaluation": 0.2}
    assert "NOT private" in priv["guarantee"]


@pytest.mark.parametrize("method", ["fedbbq", "fedtemp"])
def test_unseeded_dp_map_file_holds_no_seed_and_no_exact_value(work, method):
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", method, "-e", "1",
            "--clients", "20", "-o", "map.json", "-f", "json")  # fmt: skip
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)  # the simulation's report: exact metrics, marked so
    assert report["exact_values"] is True and "before" in report["metrics"]
    assert "seed" not in all_keys(report)
    text = Path("map.json").read_text()
    doc = json.loads(text)
    assert "seed" not in text and not all_keys(doc) & {"metrics", "data", "rows", "clients"}
    assert doc["exact_values"] is False and doc["privacy"] == report["privacy"]
    assert doc["privacy"]["reproducible_simulation"] is False
    assert "NOT private" not in text
    assert run("apply", "map.json", "mc.parquet", "-o", "out.parquet").exit_code == 0


def test_seeded_dp_table_says_not_private(work):
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1",
            "--seed", "3", "-o", "map.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())
    assert "reproducible simulation (--seed): NOT private" in out and "seed 3" in out
    doc = json.loads(Path("map.json").read_text())
    assert doc["run"]["seed"] == 3 and "NOT private" in doc["privacy"]["guarantee"]


def test_unseeded_table_shows_no_seed(work):
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1")
    assert r.exit_code == 0, r.output
    assert "seed" not in r.stdout.lower()


def test_multiclass_run_is_charged_to_the_ledger(work):
    args = ("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1.5",
            "--rounds", "3", "--ledger", "budget.jsonl", "--budget", "2")  # fmt: skip
    r = run(*args, "-o", "map1.json")
    assert r.exit_code == 0, r.output
    assert Path("map1.json").exists()
    lines = Path("budget.jsonl").read_text().splitlines()
    entries = [json.loads(x) for x in lines]
    charged = [e for e in entries if e.get("dp_event")]
    assert len(charged) == 1
    assert charged[0]["dp_event"]["type"] == "gaussian" and charged[0]["unit"] == "client"
    assert charged[0]["relation"] == "add-remove"
    assert "seed" not in Path("budget.jsonl").read_text()
    # Two such runs compose past ε = 2: the second is refused and shows and writes nothing.
    r = run(*args, "-o", "map2.json", "-f", "json")
    assert r.exit_code == 2, r.output
    assert "calibrator" not in r.stdout and not Path("map2.json").exists()  # no map shown
    assert Path("budget.jsonl").read_text().splitlines() == lines


def test_seeded_run_cannot_be_charged(work):
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1", "--seed",
            "1", "--ledger", "budget.jsonl", "--budget", "2", "-o", "map.json")  # fmt: skip
    assert r.exit_code == 2
    assert "--seed" in " ".join(r.stderr.split()) and not Path("map.json").exists()


def test_budget_needs_a_ledger(work):
    r = run("calibrate", "mc.parquet", "--multiclass", "-e", "1", "--budget", "2")
    assert r.exit_code == 2 and "--ledger" in " ".join(r.stderr.split())


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--multiclass", "-m", "distdp"], "--model cannot be used with --multiclass"),
        (["--multiclass", "--height", "8"], "--height cannot be used with --multiclass"),
        (["--rounds", "3"], "--rounds apply to --multiclass only"),
        (["--multiclass", "--clip", "1,2,3"], "--clip takes C or C+,C-"),
        (["--multiclass", "--method", "bbq"], "bbq"),
    ],
)
def test_options_of_the_other_mode_are_refused(work, args, fragment):
    r = run("calibrate", "mc.parquet", *args, "-o", "map.json")
    assert r.exit_code == 2, r.output
    assert fragment in " ".join(r.stderr.split())
    assert not Path("map.json").exists()


def test_binary_map_on_multiclass_input_and_back(work):
    # A binary map needs a score column; the multiclass table has none: one clear error.
    pd.DataFrame({"score": [0.2, 0.8] * 50, "label": [0, 1] * 50}).to_parquet("bin.parquet")
    assert run("calibrate", "bin.parquet", "-m", "federated", "-o", "bmap.json").exit_code == 0
    r = run("apply", "bmap.json", "mc.parquet")
    assert r.exit_code == 2 and "score" in r.stderr
