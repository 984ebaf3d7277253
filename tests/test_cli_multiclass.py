"""`fedeval calibrate --multiclass` and `fedeval apply` with a multiclass map, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

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
    text = json.dumps(json.loads(r.stdout))
    assert "1e-06" in text and "0.4" in text


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
