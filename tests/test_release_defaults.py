"""One set of defaults wherever a release is made: `encode` (the staged path), the one-shot
`evaluate`, and the Flower apps declare the same thresholds as cell edges when none are given
(1/11 … 10/11 of the score range), so the staged release is the one-shot's bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from fedeval.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_encode_without_thresholds_gives_the_one_shot_release(tmp_path):
    """50k rows, federated, h = 10: the staged AUC was 0.8673214 against the one-shot's
    0.8673211, and P/R/A interpolated inside leaves instead of exact, before encode declared the
    default thresholds as the one-shot does."""
    table = pq.read_table(ROOT / "sample_data" / "scores.parquet").slice(0, 50_000)
    table = table.append_column("client", pa.array(np.arange(50_000) % 100))
    src = tmp_path / "s.parquet"
    pq.write_table(table, src)
    common = ["--model", "federated", "--height", 10]
    enc = _invoke("encode", src, "-o", tmp_path / "reports", *common)
    assert enc.exit_code == 0, enc.output
    manifest = json.loads((tmp_path / "reports" / "manifest.json").read_text())
    agg = _invoke("aggregate", tmp_path / "reports", "-o", tmp_path / "r.fedeval")
    assert agg.exit_code == 0, agg.output
    staged = json.loads(_invoke("evaluate", "--from", tmp_path / "r.fedeval", "-f", "json").stdout)
    one = json.loads(_invoke("evaluate", src, *common, "-f", "json").stdout)
    assert staged["metrics"]["auc"]["estimate"] == one["metrics"]["auc"]["estimate"]
    for a, b in zip(staged["metrics"]["thresholds"], one["metrics"]["thresholds"], strict=True):
        for m in ("threshold", "precision", "recall", "accuracy"):
            got, want = a[m], b[m]
            if isinstance(got, dict):
                got, want = got["estimate"], want["estimate"]
            assert got == want, (m, a["threshold"])
    release = json.loads((tmp_path / "r.fedeval").read_text())
    edges = one["score_axis"]["cell_edges"]
    assert release["cell_edges"] == manifest["cell_edges"] == edges
    assert len(edges["scores"]) == 10  # 1/11 … 10/11, each a leaf edge


def test_the_flower_apps_use_the_same_axis_as_encode_and_evaluate():
    from fedeval.api.evaluate import threshold_axis
    from fedeval.core.axis import ScoreAxis

    try:
        from fedeval.flower.settings import RunSettings
    except ImportError:  # the flower extra is optional; the definition is shared anyway
        return
    for height in ("auto", "6", "12"):
        job = RunSettings(model="federated", height=height).job()
        assert job.axis == threshold_axis((0.0, 1.0), None, height)
        assert job.axis != ScoreAxis.linear(0.0, 1.0)
