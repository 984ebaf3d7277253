"""Saved releases (`fedeval.aggregate/2`) and estimating from them with no raw data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.api.calibrate import calibrate_run
from fedeval.api.curves import curve_result
from fedeval.api.evaluate import evaluate_run
from fedeval.cli import app
from fedeval.core.errors import InputError
from fedeval.documents.release_file import SCHEMA, load_release, release_dict, save_release
from fedeval.documents.seals import seal
from fedeval.protocol.simulate import Simulated, simulate
from fedeval.tables.scored import scored_from_arrays

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
    save_release(tmp_path / "a.fedeval", original.release, original.score_range)
    release, score_range = load_release(tmp_path / "a.fedeval")
    assert score_range.score_range == (-2.0, 2.0) and score_range.is_linear
    np.testing.assert_array_equal(release.counts, original.release.counts)
    loaded = Simulated.from_release(release, score_range, seed=7)
    a, b = evaluate_run(original), evaluate_run(loaded)
    # The same release gives the same estimates; only the simulation knows the truth.
    assert a.auc.estimate == b.auc.estimate
    assert [m.recall.estimate for m in a.thresholds] == [m.recall.estimate for m in b.thresholds]
    assert b.auc.exact is None and b.auc.ci95 is not None and not loaded.simulation
    if model == "distdp":  # add-remove: no exact size travels with the release
        assert loaded.rows is None and loaded.clients is None
        assert loaded.examples_estimate == pytest.approx(original.rows, rel=0.01)
    else:
        assert loaded.rows == original.rows and loaded.clients == original.clients
    assert loaded.release.seeded  # the seeded simulation's release says so when loaded
    if model != "federated":
        assert "NOT private" in loaded.mechanism.guarantee()
    assert curve_result(original).roc_auc.estimate == curve_result(loaded).roc_auc.estimate
    ca, cb = calibrate_run(original), calibrate_run(loaded)
    np.testing.assert_array_equal(ca.map.values, cb.map.values)


def _broken(doc: dict, **changes) -> dict:
    """`doc` edited, and sealed again (anyone can recompute a bare digest: the reader's own
    checks must catch the edit)."""
    out = json.loads(json.dumps(doc))
    for key, value in changes.items():
        if value is None:
            out.pop(key)
        else:
            out[key] = value
    return seal(out)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": "fedeval.report/1"}, "is a 'fedeval.report/1' document, not an aggregate"),
        ({"schema": "fedeval.aggregate/3"}, "newer fedeval"),
        ({"schema": "fedeval.aggregate/1"}, "did not hold"),
        ({"n_clients": 20_000}, "must not carry exact counts"),
        ({"cohorts": 0}, "at least one cohort"),
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
    (tmp_path / "y").write_text(json.dumps(seal(doc)))
    with pytest.raises(InputError, match="epsilon"):
        load_release(tmp_path / "y")
    assert release_dict(run.release, run.score_range)["schema"] == SCHEMA


def test_an_edited_release_is_refused(tmp_path, run):
    # The attack from the issue: counts edited to move the AUC. The seal catches it, naming
    # the file and the check.
    doc = seal(release_dict(run.release, run.score_range))
    doc["counts"][0] += 500
    (tmp_path / "a.fedeval").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"a\.fedeval.*integrity check failed"):
        load_release(tmp_path / "a.fedeval")
    # An edited privacy claim (a smaller ε than the noise added, re-sealed) does not match the
    # mechanism the configuration implies.
    doc = release_dict(run.release, run.score_range)
    doc["privacy"]["guarantee"] = "pure 0.01-DP"
    (tmp_path / "b.fedeval").write_text(json.dumps(seal(doc)))
    with pytest.raises(InputError, match="privacy section does not match"):
        load_release(tmp_path / "b.fedeval")


def test_federated_counts_are_checked_for_consistency(tmp_path):
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 2000)
    fed = simulate(scored_from_arrays(y, rng.random(2000)), model="federated", height=3,
                   shape="hierarchy")  # fmt: skip
    doc = release_dict(fed.release, fed.score_range)
    doc["counts"][-1] += 7  # a leaf that no longer sums to its parent
    (tmp_path / "f.fedeval").write_text(json.dumps(seal(doc)))
    with pytest.raises(InputError, match=r"f\.fedeval.*consistency check failed"):
        load_release(tmp_path / "f.fedeval")


def test_distdp_release_holds_no_exact_count_or_seed(run):
    doc = release_dict(run.release, run.score_range)
    assert not {"n_clients", "reporters", "population", "source", "seed"} & set(doc)
    assert doc["privacy"]["reproducible_simulation"] is True  # `run` was seeded
    # `run` chose its height by `auto`: a probe of the class totals at s·ε, then the tree.
    event = doc["privacy"]["dp_event"]
    assert event["type"] == "composed"
    assert [e["type"] for e in event["events"]] == ["discrete_laplace"] * 2
    released = doc["privacy"]["probe"]["released"]
    assert set(released) == {"counts"}  # the noisy totals only: no report count under distdp


def test_probe_round_trips_and_an_edited_probe_is_refused(tmp_path, run):
    save_release(tmp_path / "p.fedeval", run.release, run.score_range)
    release, _ = load_release(tmp_path / "p.fedeval")
    assert release.probe is not None and release.probe.same(run.release.probe)
    assert release.config == run.config and release.config.probed
    doc = release_dict(run.release, run.score_range)
    del doc["privacy"]["probe"]["released"]
    (tmp_path / "q.fedeval").write_text(json.dumps(seal(doc)))
    with pytest.raises(InputError, match="probe"):
        load_release(tmp_path / "q.fedeval")


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
    assert "rows" not in loaded["data"] and "seed" not in loaded["run"]
    assert "nothing charged" in r.stderr
    # The header (budget), then only the simulated release.
    assert len(Path("l.jsonl").read_text().splitlines()) == 2
    for cmd in ("curves", "calibrate"):
        assert runner.invoke(app, [cmd, "--from", "a.fedeval"]).exit_code == 0
    r = runner.invoke(app, ["evaluate", "--from", "a.fedeval", "--epsilon", "2"])
    assert r.exit_code == 2 and "--epsilon cannot be used with --from" in r.stderr
    r = runner.invoke(app, ["evaluate"])
    assert r.exit_code == 2 and "exactly one of them" in r.stderr
    r = runner.invoke(app, ["evaluate", "s.parquet", "--from", "a.fedeval"])
    assert r.exit_code == 2 and "exactly one of them" in r.stderr
