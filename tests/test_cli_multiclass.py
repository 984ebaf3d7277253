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
    assert r.stdout == ""  # -o FILE: the map goes there, stdout stays empty
    doc = json.loads(Path("map.json").read_text())
    assert doc["kind"] == "multiclass" and doc["method"] == method
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
    assert priv["mechanism"]["clip"] == {"temperature": 0.4, "evaluation": 2.0}
    assert "NOT private" in priv["guarantee"]


@pytest.mark.parametrize("method", ["fedbbq", "fedtemp"])
def test_unseeded_dp_map_file_holds_no_seed_and_no_exact_value(work, method):
    args = ("calibrate", "mc.parquet", "--multiclass", "--method", method, "-e", "1",
            "--clients", "20")  # fmt: skip
    r = run(*args, "-f", "json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)  # the simulation's report: exact metrics, marked so
    assert run(*args, "-o", "map.json").exit_code == 0
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
    args = ("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1",
            "--seed", "3")  # fmt: skip
    assert run(*args, "-o", "map.json").exit_code == 0
    r = run(*args)
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
        # Binary options at their default value too: given, they would be silently ignored.
        (["--multiclass", "--ci-draws", "200"], "--ci-draws cannot be used with --multiclass"),
        (["--multiclass", "--score-range", "0,1"], "--score-range cannot be used"),
        (["--multiclass", "--pos-label", "1"], "--pos-label cannot be used with --multiclass"),
        (["--multiclass", "--score-col", "p"], "--score-col cannot be used with --multiclass"),
        (["--multiclass", "--threads", "2"], "--threads cannot be used with --multiclass"),
        (["--rounds", "3"], "--rounds appl"),
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


def calibrated_table(path: str, n: int = 3000, c: int = 4, overconfidence: float = 1.0) -> None:
    """Logits of the true posterior softmax(μx), x ~ N(μ·e_y, I), times `overconfidence`:
    at 1 no temperature can help; at 3 the optimum is T = 3."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, c, n)
    z = overconfidence * 1.5 * (1.5 * np.eye(c)[y] + rng.normal(size=(n, c)))
    df = pd.DataFrame({f"logit_{j}": z[:, j] for j in range(c)})
    df["label"] = y
    df.to_parquet(path)


def test_fail_if_worse_exits_1_and_writes_the_identity(work):
    calibrated_table("cal.parquet")
    r = run("calibrate", "cal.parquet", "--multiclass", "--method", "fedtemp", "-e", "1",
            "--clients", "20", "--seed", "2", "--fail-if-worse", "-o", "map.json")  # fmt: skip
    assert r.exit_code == 1, r.output
    assert "no gain" in " ".join(r.stderr.split())
    doc = json.loads(Path("map.json").read_text())
    assert doc["calibrator"] == {"temperature": 1.0}
    g = doc["safeguard"]
    assert g["kept"] is False and g["released_temperature"] == 1.0
    assert g["lower_95"] <= 0 and g["fitted_temperature"] != 1.0
    # The same run without the flag reports the fallback and exits 0.
    r = run("calibrate", "cal.parquet", "--multiclass", "--method", "fedtemp", "-e", "1",
            "--clients", "20", "--seed", "2")  # fmt: skip
    assert r.exit_code == 0 and "no gain shown" in " ".join(r.stdout.split())


def test_fail_if_worse_passes_when_the_check_shows_a_gain(work):
    calibrated_table("over.parquet", n=10_000, overconfidence=3.0)
    r = run("calibrate", "over.parquet", "--multiclass", "--method", "fedtemp", "-e", "1",
            "--participation", "1", "--seed", "2", "--fail-if-worse", "-f", "json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["safeguard"]["kept"] is True
    assert doc["calibrator"]["temperature"] == doc["safeguard"]["fitted_temperature"] > 2.5
    assert doc["privacy"]["mechanism"]["clip"] == {"temperature": 0.5, "evaluation": 2.0}
    assert doc["privacy"]["dp_event"]["count"] == 13  # 12 rounds, each client in all, + check


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--multiclass", "--method", "fedbin", "--fail-if-worse"], "--fail-if-worse needs"),
        (
            ["--multiclass", "--method", "fedtemp", "--fail-if-worse", "--holdout", "0"],
            "needs held-out rows",
        ),
        (["--multiclass", "--method", "fedtemp", "--holdout", "1"], "--holdout must be in"),
        (["--multiclass", "--method", "fedtemp", "--server-lr", "-1"], "--server-lr must be"),
        (["--multiclass", "--method", "fedbin", "--server-lr", "0.5"], "fedtemp only"),
        (["--multiclass", "--method", "fedtemp", "--buckets", "8"], "--buckets applies to fedbin"),
        (["--multiclass", "--method", "fedbbq", "--buckets", "12"], "--buckets must be 2^M"),
        (["--holdout", "0.3"], "--holdout appl"),
        (["--server-lr", "0.3"], "--server-lr appl"),
        (["--fail-if-worse"], "--fail-if-worse appl"),
    ],
)
def test_new_options_are_checked(work, args, fragment):
    r = run("calibrate", "mc.parquet", *args, "-o", "map.json")
    assert r.exit_code == 2, r.output
    assert fragment in " ".join(r.stderr.split())
    assert not Path("map.json").exists()


def test_holdout_and_server_lr_reach_the_fit(work):
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "--holdout", "0.5",
            "--server-lr", "0.5", "--rounds", "2", "--seed", "1", "-f", "json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["data"]["eval_rows"] == 1500 and doc["data"]["fit_rows"] == 1500
    assert doc["federation"]["server_lr"] == 0.5
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "--holdout", "0",
            "--seed", "1", "-f", "json")  # fmt: skip
    doc = json.loads(r.stdout)
    assert doc["metrics"]["in_sample"] is True and doc["safeguard"] is None


def test_map_to_stdout_with_dash(work):
    """-o - is stdout (no file named '-'): the shareable map, as -o FILE writes it."""
    args = ("calibrate", "mc.parquet", "--multiclass", "--method", "fedbbq", "-e", "1",
            "--clients", "20", "--seed", "4")  # fmt: skip
    r = run(*args, "-o", "-")
    assert r.exit_code == 0, r.output
    assert not Path("-").exists()
    doc = json.loads(r.stdout)
    assert doc["kind"] == "multiclass" and doc["exact_values"] is False
    assert "metrics" not in doc  # under DP the map holds no exact value
    assert run(*args, "-o", "map.json").exit_code == 0
    assert json.loads(Path("map.json").read_text()) == doc
    r = run("apply", "map.json", "mc.parquet", "-o", "-")
    assert r.exit_code == 0 and r.stdout.startswith("logit_0,") and not Path("-").exists()


def test_failing_write_leaves_no_map_and_no_charge(work):
    """The map is staged before the ledger is charged: a target that cannot be written fails
    the run with nothing charged (before, the charge came first)."""
    Path("taken").mkdir()
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1", "--rounds",
            "3", "--ledger", "budget.jsonl", "--budget", "2", "-o", "taken")  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "taken" in r.stderr and "Traceback" not in r.output
    assert not Path("budget.jsonl").exists()
    assert list(Path("taken").iterdir()) == []
