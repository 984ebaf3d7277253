"""`--thresholds` declared up front are cell edges: exact without noise on tied scores, and a
saved release carries the edges to every later `--from`."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.cli import app

runner = CliRunner()


@pytest.fixture
def tied(tmp_path, monkeypatch) -> str:
    """Scores rounded to 0.05: every row sits on one of 21 values, thresholds among them."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(11)
    y = rng.random(8000) < 0.3
    s = np.round(np.clip(rng.normal(0.35 + 0.25 * y, 0.2), 0, 1) * 20) / 20
    pq.write_table(pa.table({"score": s, "label": y.astype(np.int8)}), "tied.parquet")
    return "tied.parquet"


def _json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_federated_metrics_at_declared_thresholds_are_exact(tied):
    doc = _json("evaluate", tied, "--model", "federated", "--thresholds", "0.3,0.45,0.8")
    assert doc["score_axis"]["cell_edges"]["scores"] == [0.3, 0.45, 0.8]
    for row in doc["metrics"]["thresholds"]:
        for name in ("precision", "recall", "accuracy"):
            m = row[name]
            assert m["estimate"] == pytest.approx(m["exact"], abs=1e-12), (row["threshold"], name)


def test_from_a_saved_release_uses_its_edges(tied):
    args = ("--model", "distdp", "--thresholds", "0.3,0.45,0.8", "--seed", "3")
    first = _json("evaluate", tied, *args, "--save-release", "r.fedeval")
    saved = json.load(open("r.fedeval"))
    assert saved["cell_edges"]["scores"] == [0.3, 0.45, 0.8]
    again = _json("evaluate", "--from", "r.fedeval", "--thresholds", "0.3,0.45,0.8")
    assert [r["recall"]["estimate"] for r in again["metrics"]["thresholds"]] == [
        r["recall"]["estimate"] for r in first["metrics"]["thresholds"]
    ]
    # An edited edge breaks the seal: the file is refused, not read on the wrong cells.
    saved["cell_edges"]["units"][0] = 0.25390625
    json.dump(saved, open("bad.fedeval", "w"))
    result = runner.invoke(app, ["evaluate", "--from", "bad.fedeval"])
    assert result.exit_code == 2
