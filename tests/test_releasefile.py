"""Saved releases (`fedeval.aggregate/1`) and estimating from them with no raw data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.calibration import calibrate_run
from fedeval.cli import app
from fedeval.curves import curve_result
from fedeval.data import scored_from_arrays
from fedeval.errors import FedevalError, InputError
from fedeval.evaluate import evaluate_run
from fedeval.releasefile import SCHEMA, load_release, release_dict, save_release
from fedeval.simulate import Simulated, simulate

runner = CliRunner()


@pytest.fixture(scope="module")
def run():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 20_000)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    return simulate(scored_from_arrays(y, s), model="distdp", epsilon=1.0, seed=3)


@pytest.mark.parametrize("model", ["federated", "distdp", "localdp"])
def test_round_trip_gives_the_same_estimates(tmp_path, model):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 10_000)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1) * 4 - 2  # scores in [-2, 2]
    original = simulate(scored_from_arrays(y, s, score_range=(-2, 2)), model=model, seed=5)
    save_release(tmp_path / "a.fedeval", original.release, original.score_range, source="x")
    release, score_range = load_release(tmp_path / "a.fedeval")
    assert score_range == (-2.0, 2.0)
    np.testing.assert_array_equal(release.counts, original.release.counts)
    loaded = Simulated.from_release(release, score_range, seed=7)
    a, b = evaluate_run(original), evaluate_run(loaded)
    # The same release gives the same estimates; only the simulation knows the truth.
    assert a.auc.estimate == b.auc.estimate
    assert [m.recall.estimate for m in a.thresholds] == [m.recall.estimate for m in b.thresholds]
    assert b.auc.exact is None and b.auc.ci95 is not None and not loaded.simulation
    assert loaded.rows == original.rows and loaded.clients == original.clients
    assert curve_result(original).roc_auc.estimate == curve_result(loaded).roc_auc.estimate
    ca, cb = calibrate_run(original), calibrate_run(loaded)
    np.testing.assert_array_equal(ca.map.values, cb.map.values)


def _broken(doc: dict, **changes) -> dict:
    out = json.loads(json.dumps(doc))
    for key, value in changes.items():
        if value is None:
            out.pop(key)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": "fedeval.report/1"}, "is a 'fedeval.report/1' document, not an aggregate"),
        ({"schema": "fedeval.aggregate/2"}, "newer fedeval"),
        ({"schema": "fedeval.aggregate/x"}, "unknown schema version"),
        ({"counts": None}, "field 'counts' is missing"),
        ({"counts": [1, 2, 3]}, "entries"),
        ({"counts": "many"}, "not a valid aggregate"),
        ({"score_range": [1, 0]}, "lo < hi"),
        ({"reporters": [1.5]}, "integers"),
    ],
)
def test_malformed_aggregates_are_refused(tmp_path, run, change, message):
    doc = _broken(release_dict(run.release, run.score_range), **change)
    (tmp_path / "a.fedeval").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=message):
        load_release(tmp_path / "a.fedeval")


def test_other_refusals(tmp_path, run):
    with pytest.raises(InputError, match="no such file"):
        load_release(tmp_path / "none")
    (tmp_path / "x").write_text("{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        load_release(tmp_path / "x")
    doc = release_dict(run.release, run.score_range)
    doc["privacy"]["model"] = "federated"  # federated with an ε is not a valid configuration
    (tmp_path / "y").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="epsilon"):
        load_release(tmp_path / "y")
    # An incomplete distdp sum (clients missing) decodes to less noise than claimed: refused.
    doc = release_dict(run.release, run.score_range)
    doc["n_clients"] -= 1
    (tmp_path / "z").write_text(json.dumps(doc))
    release, score_range = load_release(tmp_path / "z")
    with pytest.raises(FedevalError, match="every client has reported"):
        Simulated.from_release(release, score_range)
    assert release_dict(run.release, run.score_range)["schema"] == SCHEMA


def test_cli_save_and_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 5000)
    pq.write_table(pa.table({"score": rng.random(5000) * 0.5 + 0.5 * y, "label": y}), "s.parquet")
    r = runner.invoke(
        app,
        [
            "evaluate",
            "s.parquet",
            "--seed",
            "1",
            "--save-release",
            "a.fedeval",
            "--format",
            "json",
            "--ledger",
            "l.jsonl",
            "--budget",
            "5",
        ],
    )
    assert r.exit_code == 0, r.stderr
    simulated = json.loads(r.stdout)
    r = runner.invoke(
        app,
        [
            "evaluate",
            "--from",
            "a.fedeval",
            "--format",
            "json",
            "--ledger",
            "l.jsonl",
            "--budget",
            "5",
        ],
    )
    assert r.exit_code == 0, r.stderr
    loaded = json.loads(r.stdout)
    assert loaded["simulation"] is False and loaded["metrics"]["auc"]["exact"] is None
    assert loaded["metrics"]["auc"]["estimate"] == simulated["metrics"]["auc"]["estimate"]
    assert "nothing charged" in r.stderr
    assert len(Path("l.jsonl").read_text().splitlines()) == 1  # only the simulated release
    for cmd in ("curves", "calibrate"):
        assert runner.invoke(app, [cmd, "--from", "a.fedeval"]).exit_code == 0
    r = runner.invoke(app, ["evaluate", "--from", "a.fedeval", "--epsilon", "2"])
    assert r.exit_code == 2 and "--epsilon cannot be used with --from" in r.stderr
    r = runner.invoke(app, ["evaluate"])
    assert r.exit_code == 2 and "exactly one of them" in r.stderr
    r = runner.invoke(app, ["evaluate", "s.parquet", "--from", "a.fedeval"])
    assert r.exit_code == 2 and "exactly one of them" in r.stderr
