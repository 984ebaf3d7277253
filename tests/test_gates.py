"""Quality gates: parsing, judging on the bound or the estimate, and the CLI exit codes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fedeval.api.gates import GateOn, Kind, gate_thresholds, judge, parse_gates, report_metrics
from fedeval.cli import app
from fedeval.core.errors import UsageError

runner = CliRunner()

DOC = {
    "schema": "fedeval.report/1",
    "metrics": {
        "auc": {"estimate": 0.86, "ci95": [0.85, 0.87]},
        "thresholds": [
            {
                "threshold": 6 / 11,
                "precision": {"estimate": 0.8, "ci95": [0.79, 0.81]},
                "recall": {"estimate": 0.78, "ci95": [0.77, 0.79]},
                "accuracy": {"estimate": 0.8, "ci95": None},
            }
        ],
        "ece": {"estimate": 0.02, "ci95": [0.015, 0.031]},
    },
}


def test_parse_gates():
    gates = parse_gates(["auc=0.85,recall@0.5=0.7", "ap=0.8"], Kind.FLOOR)
    assert [(g.metric, g.limit) for g in gates] == [("auc", 0.85), ("recall@0.5", 0.7), ("ap", 0.8)]
    assert gate_thresholds(gates) == [0.5]
    for bad in ("auc", "auc=", "=0.8", "auc=high", "auc=nan"):
        with pytest.raises(UsageError, match="METRIC=VALUE"):
            parse_gates([bad], Kind.CEILING)


@pytest.mark.parametrize(
    ("spec", "kind", "on", "passed"),
    [
        ("auc=0.855", Kind.FLOOR, GateOn.BOUND, False),  # lower bound 0.85 < 0.855
        ("auc=0.855", Kind.FLOOR, GateOn.ESTIMATE, True),  # estimate 0.86 ≥ 0.855
        ("auc=0.85", Kind.FLOOR, GateOn.BOUND, True),  # the bound itself clears it
        ("ece=0.03", Kind.CEILING, GateOn.BOUND, False),  # upper bound 0.031 > 0.03
        ("ece=0.03", Kind.CEILING, GateOn.ESTIMATE, True),
        ("recall@0.5455=0.775", Kind.FLOOR, GateOn.BOUND, False),  # 6/11, 4 significant digits
    ],
)
def test_judge(spec, kind, on, passed):
    (v,) = judge(parse_gates([spec], kind), report_metrics(DOC), on)
    assert v.passed is passed


def test_threshold_must_match_as_written():
    metrics = report_metrics(DOC)
    with pytest.raises(UsageError, match=r"no metric 'recall@0\.55'"):
        judge(parse_gates(["recall@0.55=0.5"], Kind.FLOOR), metrics)
    (v,) = judge(parse_gates([f"recall@{6 / 11!r}=0.5"], Kind.FLOOR), metrics)
    assert v.passed


def test_bound_needs_an_interval():
    with pytest.raises(UsageError, match="no 95% interval"):
        judge(parse_gates(["accuracy@0.5455=0.5"], Kind.FLOOR), report_metrics(DOC))
    (v,) = judge(
        parse_gates(["accuracy@0.5455=0.5"], Kind.FLOOR), report_metrics(DOC), GateOn.ESTIMATE
    )
    assert v.passed


def test_evaluate_gates_exit_codes(scores):
    ok = runner.invoke(app, ["evaluate", scores, "--seed", "1", "--fail-under", "auc=0.5"])
    assert ok.exit_code == 0, ok.stderr
    assert "gate ok: auc lower 95% bound" in ok.stderr
    bad = runner.invoke(
        app, ["evaluate", scores, "--seed", "1", "--fail-under", "auc=0.99", "-o", "r.json"]
    )
    assert bad.exit_code == 1
    assert "gate FAILED: auc" in bad.stderr and "1 of 1 quality gates failed: auc" in bad.stderr
    assert bad.stdout == ""  # -o: the report goes to the file (still saved), stdout stays empty
    doc = json.loads(open("r.json").read())
    # A gate's threshold is evaluated even though --thresholds did not name it.
    r = runner.invoke(
        app, ["evaluate", scores, "--seed", "1", "--fail-under", "recall@0.5=0.01", "-o", "t.json"]
    )
    assert r.exit_code == 0, r.stderr
    assert 0.5 in [
        t["threshold"] for t in json.loads(open("t.json").read())["metrics"]["thresholds"]
    ]
    # check on the saved report agrees with the run.
    c = runner.invoke(app, ["check", "r.json", "--fail-under", "auc=0.99"])
    assert c.exit_code == 1 and "gate FAILED: auc" in c.stderr
    c = runner.invoke(
        app, ["check", "r.json", "--fail-over", f"ece={doc['metrics']['ece']['ci95'][1] + 1e-6}"]
    )
    assert c.exit_code == 0, c.stderr


def test_check_refuses_bad_input(scores):
    assert runner.invoke(app, ["check", "nope.json", "--fail-under", "auc=0.5"]).exit_code == 2
    open("x.json", "w").write("[1, 2]")
    r = runner.invoke(app, ["check", "x.json", "--fail-under", "auc=0.5"])
    assert r.exit_code == 2 and "not a fedeval report" in r.stderr
    r = runner.invoke(app, ["check", "x.json"])
    assert r.exit_code == 2 and "at least one gate" in r.stderr
    r = runner.invoke(app, ["evaluate", scores, "--gate-on", "maybe", "--fail-under", "auc=0.5"])
    assert r.exit_code == 2 and "--gate-on takes bound or estimate" in r.stderr
