"""`fedeval compare` on the command line: gates and their exit codes, the plain verdicts, bad
usage (exit 2, one line, nothing written or charged), two saved releases, the ledger entry, the
plot, and `plan --detect`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from paired import paired_scores
from typer.testing import CliRunner

import fedeval.cli.compare  # noqa: F401  (registers the command)
from fedeval.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """20,000 paired rows, 2% positives, a candidate worse by about 0.02 AUC."""
    y, b, c = paired_scores(20_000, np.random.default_rng(0), shift=-0.25)
    path = tmp_path_factory.mktemp("cmp") / "s.parquet"
    pq.write_table(pa.table({"label": y.astype(np.int8), "score": b, "score_new": c}), path)
    return path


COLS = ["--baseline-col", "score", "--candidate-col", "score_new"]


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_gate_passes_and_fails_with_plain_verdicts(table):
    ok = run("compare", table, *COLS, "--seed", 1, "--fail-if-worse", "auc=0.2")
    assert ok.exit_code == 0, ok.output
    assert "candidate not worse than baseline by more than 0.2 (95%)" in ok.stderr
    bad = run("compare", table, *COLS, "--seed", 1, "--fail-if-worse", "auc=0.001,recall@0.5=0.5")
    assert bad.exit_code == 1, bad.output
    assert "cannot rule out that the candidate is worse than the baseline by more than 0.001" in (
        bad.stderr
    )
    assert "1 of 2 quality gates failed: auc" in bad.stderr
    est = run("compare", table, *COLS, "--seed", 1, "--fail-if-worse", "auc=0.001",
              "--gate-on", "estimate")  # fmt: skip
    assert est.exit_code == 1 and "on the estimate" in est.stderr


def test_json_document(table, tmp_path):
    r = run("compare", table, *COLS, "--seed", 2, "-f", "json", "--thresholds", "0.3,0.5")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "fedeval.compare/1" and doc["paired"] is True
    assert [t["threshold"] for t in doc["metrics"]["thresholds"]] == [0.3, 0.5]
    auc = doc["metrics"]["auc"]
    assert auc["ci95"][0] <= auc["estimate"] <= auc["ci95"][1]
    assert doc["privacy"]["split"]["baseline"] == 0.5 and doc["privacy"]["epsilon"] == 1.0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--baseline-col", "score"], "--candidate-col"),
        (["--baseline-col", "score", "--candidate-col", "score"], "the same column"),
        ([*COLS, "--fail-if-worse", "auc=-0.1"], "margin ≥ 0"),
        ([*COLS, "--fail-if-worse", "auc"], "METRIC=MARGIN"),
        ([*COLS, "--interval", "sample"], "population or generalisation"),
        ([*COLS, "--split", "1"], "strictly between 0 and 1"),
        (["--baseline-col", "score", "--candidate-col", "nope"], "'nope'"),
        # A missing column is named with the option that chose it, not evaluate's --score-col.
        (["--baseline-col", "score", "--candidate-col", "nope"], "with --candidate-col."),
        (["--baseline-col", "nope", "--candidate-col", "score"], "with --baseline-col."),
        ([*COLS, "--fail-if-worse", "ece=0.1"], "no metric 'ece'"),
    ],
)
def test_bad_usage_is_one_line_exit_2_nothing_written(table, tmp_path, args, words):
    out, ledger = tmp_path / "o.json", tmp_path / "l.jsonl"
    r = run("compare", table, *args, "-o", out, "--ledger", ledger, "--budget", 5)
    assert r.exit_code == 2, r.output
    assert words in r.stderr
    assert r.stderr.startswith("fedeval: error:")
    assert not out.exists() and not ledger.exists()


def test_from_two_saved_releases(table, tmp_path):
    for col, name in (("score", "base"), ("score_new", "cand")):
        r = run("evaluate", table, "--score-col", col, "--save-release", tmp_path / f"{name}.f",
                "--no-exact", "-o", tmp_path / f"{name}.json")  # fmt: skip
        assert r.exit_code == 0, r.output
    ledger = tmp_path / "l.jsonl"
    r = run("compare", "--from", tmp_path / "base.f", "--from", tmp_path / "cand.f", "-f", "json",
            "--ledger", ledger, "--budget", 5, "--fail-if-worse", "recall@0.5=0.9")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["paired"] is False and doc["simulation"] is False
    assert "pairing was never released" in doc["pairing"]
    assert doc["metrics"]["auc"]["exact"] is None
    assert any(t["threshold"] == 0.5 for t in doc["metrics"]["thresholds"])
    assert "nothing charged" in r.stderr
    once = run("compare", "--from", tmp_path / "base.f")
    assert once.exit_code == 2 and "two saved releases" in once.stderr
    fixed = run("compare", "--from", tmp_path / "base.f", "--from", tmp_path / "cand.f",
                "--epsilon", 1)  # fmt: skip
    assert fixed.exit_code == 2 and "--epsilon" in fixed.stderr


def test_ledger_charges_the_pair_as_one_entry(table, tmp_path):
    ledger = tmp_path / "l.jsonl"
    r = run("compare", table, *COLS, "-e", 2, "--split", 0.25, "--ledger", ledger,
            "--budget", 3, "-o", tmp_path / "c.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    entries = [json.loads(line) for line in ledger.read_text().splitlines()][1:]
    assert len(entries) == 1
    assert entries[0]["command"] == "compare" and entries[0]["epsilon"] == pytest.approx(2.0)
    again = run("compare", table, *COLS, "-e", 2, "--ledger", ledger, "--budget", 3)
    assert again.exit_code == 2 and "budget" in again.stderr
    seeded = run("compare", table, *COLS, "--seed", 1, "--ledger", tmp_path / "s.jsonl",
                 "--budget", 3)  # fmt: skip
    assert seeded.exit_code == 2 and not (tmp_path / "s.jsonl").exists()


def test_plot(table, tmp_path):
    pytest.importorskip("matplotlib")
    r = run("compare", table, *COLS, "--seed", 1, "--plot", tmp_path / "c.svg", "-o",
            tmp_path / "c.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    svg = (tmp_path / "c.svg").read_text()
    assert "baseline" in svg and "candidate" in svg


@pytest.mark.slow
def test_plan_detect():
    r = run("plan", "--detect", "auc=0.05", "--model", "distdp", "-e", 1,
            "--positives-fraction", 0.02, "--auc", 0.92, "--format", "json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)["detect"]
    assert doc["metric"] == "auc" and doc["delta"] == 0.05
    assert 1_000 < doc["rows_80_power"] <= doc["rows_5_percent_false_failures"] < 200_000
    bad = run("plan", "--detect", "auc=2", "--model", "distdp")
    assert bad.exit_code == 2 and "METRIC=δ" in bad.stderr
    both = run("plan", "--detect", "auc=0.05", "--rows", 1000)
    assert both.exit_code == 2 and "drop --rows" in both.stderr


def test_generalisation_interval_on_the_command_line(table):
    r = run("compare", table, *COLS, "--seed", 1, "-f", "json", "--interval", "generalisation")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["interval"] == "generalisation"
    auc = doc["metrics"]["auc"]
    lo, hi = auc["generalisation_ci95"]
    assert lo <= auc["ci95"][0] and hi >= auc["ci95"][1]
    assert "generalisation_ci95" not in doc["metrics"]["ap"]  # no sampling variance for AP
    table_out = run("compare", table, *COLS, "--seed", 1, "--interval", "generalisation")
    assert "generalisation" in table_out.stdout


def test_stdin_and_mismatched_scores_are_refused(table):
    r = runner.invoke(app, ["compare", "-", *COLS], input="label,score,score_new\n1,0.5,0.4\n")
    assert r.exit_code == 2 and "reads its table twice" in r.stderr
    from fedeval.api.compare import compare
    from fedeval.core.errors import UsageError

    with pytest.raises(UsageError, match="same examples"):
        compare([0, 1, 1], [0.1, 0.5, 0.7], [0.2, 0.6])


def test_library_call_is_the_command(table):
    """`fedeval.compare_file` with the command's defaults writes the command's document."""
    import inspect

    import fedeval
    from fedeval.api.compare import compare_file

    r = run("compare", table, *COLS, "--seed", 9, "--ci-draws", 20, "-f", "json")
    assert r.exit_code == 0, r.output
    c = compare_file(table, baseline_col="score", candidate_col="score_new", seed=9, ci_draws=20)
    assert json.loads(c.to_json(source=str(table))) == json.loads(r.stdout)
    # The release's keywords (model, ε, …) take `ReleaseSpec`'s defaults, the command's too.
    from fedeval.core.spec import ReleaseSpec

    assert "release" in inspect.signature(fedeval.compare).parameters
    assert ReleaseSpec().model == "distdp"
