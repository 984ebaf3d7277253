"""Library parity: what the command line does is a library call with the same defaults, the
same documents and the same ledger; and the cli/ package stays a thin layer of small modules."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import fedeval
import fedeval.cli
from fedeval.api.calibrate import calibrate_data, calibrate_file
from fedeval.api.curves import curves_data, roc_pr_curves_file
from fedeval.api.evaluate import evaluate_data, evaluate_file
from fedeval.api.gates import enforce, gates_from, judge_report, with_gate_thresholds
from fedeval.cli import app
from fedeval.core.config import PrivacyModel
from fedeval.core.errors import GateFailed
from fedeval.core.spec import ReleaseSpec
from fedeval.multiclass import calibrate_multiclass_file
from fedeval.privacy.ledger import BudgetExceeded, Ledger, read_ledger
from fedeval.protocol.encode import encode_file
from fedeval.protocol.simulate import simulate

runner = CliRunner()
CLI_DIR = Path(fedeval.cli.__file__).parent
MAX_MODULE_LINES = 300


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_every_cli_module_is_small():
    sizes = {p.name: len(p.read_text().splitlines()) for p in CLI_DIR.glob("*.py")}
    assert len(sizes) >= 10  # one module per command group, not one big file
    big = {name: n for name, n in sizes.items() if n >= MAX_MODULE_LINES}
    assert not big, f"cli/ modules of {MAX_MODULE_LINES}+ lines: {big}"


def test_cli_imports_point_one_way():
    """The library never imports the command line."""
    lib = Path(fedeval.__file__).parent
    offenders = [
        str(p.relative_to(lib))
        for p in lib.rglob("*.py")
        if CLI_DIR not in p.parents and p.name != "__main__.py" and "fedeval.cli" in p.read_text()
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "call",
    [
        fedeval.evaluate,
        evaluate_file,
        evaluate_data,
        curves_data,
        calibrate_data,
        simulate,
        encode_file,
    ],
)
def test_library_default_model_is_the_cli_default(call):
    """`fedeval evaluate FILE` and `fedeval.evaluate(...)` release under the same model: every
    entry point takes the release as a `ReleaseSpec` (or its keywords), whose one default is
    the command line's; none declares a default of its own (simulate and encode_file once
    defaulted to federated)."""
    command = {p.name: p for p in _command_params("evaluate")}
    assert command["model"].default == PrivacyModel.DISTDP
    params = inspect.signature(call).parameters
    assert "model" not in params and params["spec"].default is None
    assert ReleaseSpec().model is PrivacyModel.DISTDP


@pytest.mark.parametrize("call", [fedeval.roc_pr_curves, fedeval.calibrate])
def test_calls_passing_options_on_release_under_distdp(call):
    y = np.tile([0, 1], 200)
    s = np.where(y == 1, 0.7, 0.3)
    assert call(y, s, seed=0, ci_draws=0).run.config.model is PrivacyModel.DISTDP


def _command_params(name: str):
    import typer.main

    group = typer.main.get_command(app)
    return group.commands[name].params  # type: ignore[attr-defined]


def _cli_json(*args) -> dict:
    r = run(*args, "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_evaluation_to_dict_is_the_cli_report(scores):
    doc = _cli_json("evaluate", scores, "--seed", "3", "--ci-draws", "20")
    ev = evaluate_file(scores, seed=3, ci_draws=20)
    assert json.loads(ev.to_json(source=scores)) == doc
    sealed = {k: v for k, v in doc.items() if k != "integrity"}
    assert ev.to_dict(source=scores) == sealed


def test_curves_to_dict_is_the_cli_document(scores):
    doc = _cli_json("curves", scores, "--seed", "4", "-q", "16", "--ci-draws", "20")
    c = roc_pr_curves_file(scores, seed=4, quantiles=16, ci_draws=20)
    assert json.loads(c.to_json(source=scores)) == doc


def test_calibration_to_dict_is_the_cli_report(scores):
    doc = _cli_json("calibrate", scores, "--seed", "5", "--method", "bbq", "--ci-draws", "20")
    cal = calibrate_file(scores, seed=5, method="bbq", ci_draws=20)
    assert json.loads(cal.to_json(source=scores)) == doc


def test_multiclass_to_dict_is_the_cli_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 1500)
    logits = rng.normal(size=(1500, 3)) + 2.0 * np.eye(3)[y]
    df = pd.DataFrame({f"logit_{j}": 3 * logits[:, j] for j in range(3)})
    df["label"] = y
    df.to_parquet("mc.parquet")
    doc = _cli_json("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp",
                    "--rounds", "3", "--seed", "2")  # fmt: skip
    result = calibrate_multiclass_file("mc.parquet", method="fedtemp", rounds=3, seed=2)
    assert json.loads(result.to_json(source="mc.parquet")) == doc


def test_ledger_from_python_refuses_past_the_budget(scores):
    """Charged from Python as the CLI charges: same entry, same refusal, nothing written."""
    ledger = Ledger("privacy.jsonl", budget=2.5)
    ledger.check()
    ev = evaluate_file(scores, epsilon=1.0, ci_draws=0)  # unseeded: a private release
    assert ledger.charge(ev) == pytest.approx(1.0)
    r = run("evaluate", scores, "-e", "1", "--ci-draws", "0", "--ledger", "privacy.jsonl",
            "-o", "report.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    _, entries = read_ledger("privacy.jsonl")
    assert [e["command"] for e in entries] == ["evaluate", "evaluate"]
    assert entries[0]["covered"] == entries[1]["covered"]
    before = Path("privacy.jsonl").read_text()
    with pytest.raises(BudgetExceeded, match=r"over its budget of 2\.5"):
        ledger.charge(evaluate_file(scores, epsilon=1.0, ci_draws=0))
    assert Path("privacy.jsonl").read_text() == before
    assert ledger.summary()["datasets"]["default"]["epsilon_spent"] == pytest.approx(2.0)
    assert ledger.summary() == _cli_json("ledger", "privacy.jsonl")


def test_ledger_refuses_a_seeded_run_and_a_missing_budget(scores):
    with pytest.raises(fedeval.UsageError, match="does not exist yet"):
        Ledger("new.jsonl").check()
    with pytest.raises(fedeval.UsageError, match="reproducible simulation"):
        Ledger("new.jsonl", budget=1.0).charge(evaluate_file(scores, seed=1, ci_draws=0))
    assert not Path("new.jsonl").exists()


def test_estimates_from_a_saved_release_cost_nothing(scores):
    assert run("evaluate", scores, "--ci-draws", "0", "--save-release", "r.fedeval",
               "-o", "x.json").exit_code == 0  # fmt: skip
    from fedeval.api.evaluate import evaluate_run
    from fedeval.documents.release_file import load_release
    from fedeval.protocol.simulate import Simulated

    release, score_range = load_release("r.fedeval")
    ev = evaluate_run(Simulated.from_release(release, score_range, ci_draws=0))
    assert Ledger("p.jsonl", budget=1.0).charge(ev) is None
    assert not Path("p.jsonl").exists()


def test_gates_from_python_judge_as_the_cli_does(scores):
    gates, on = gates_from(["auc=0.5", "recall@0.5=0.2"], ["ece=1"])
    thresholds = with_gate_thresholds(None, gates, (0.0, 1.0))  # the defaults, and 0.5
    assert len(thresholds) == 11 and 0.5 in thresholds
    ev = evaluate_file(scores, model="federated", thresholds=thresholds)
    verdicts = judge_report(gates, ev, on)
    assert [v.passed for v in verdicts] == [True, True, True]
    enforce(verdicts)
    gates, on = gates_from(["auc=0.999"], gate_on="estimate")
    with pytest.raises(GateFailed, match="1 of 1 quality gates failed: auc"):
        enforce(judge_report(gates, ev.to_dict(), on))
    with pytest.raises(fedeval.UsageError, match="`gate_on` takes bound or estimate"):
        gates_from(gate_on="median")


def test_readme_python_ledger_and_gates_example_runs(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    Path("scores.parquet").write_bytes((root / "sample_data" / "scores.parquet").read_bytes())
    text = (root / "README.md").read_text()
    block = text[text.index("Every command is a library call") :]
    start = block.index("```python") + len("```python")
    code = block[start : block.index("```", start)]
    assert "ledger.charge(result)" in code and "enforce(" in code
    exec(compile(code, "README.md", "exec"), {"fedeval": fedeval})
    assert Ledger("budget.jsonl").summary()["datasets"]["default"]["releases"] == 1


def test_multiclass_result_is_charged_as_the_cli_charges_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 1200)
    df = pd.DataFrame({f"logit_{j}": rng.normal(size=1200) + 2.0 * (y == j) for j in range(3)})
    df["label"] = y
    df.to_parquet("mc.parquet")
    args = ("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "--rounds", "3",
            "-e", "1", "--ledger", "cli.jsonl", "--budget", "5", "-o", "map.json")  # fmt: skip
    assert run(*args).exit_code == 0
    result = calibrate_multiclass_file("mc.parquet", method="fedtemp", rounds=3, epsilon=1.0)
    Ledger("py.jsonl", budget=5).charge(result)
    (cli_entry,), (py_entry,) = read_ledger("cli.jsonl")[1], read_ledger("py.jsonl")[1]
    same = ("command", "covered", "model", "unit", "relation", "epsilon", "delta", "dp_event")
    assert {k: cli_entry[k] for k in same} == {k: py_entry[k] for k in same}
    assert py_entry["command"] == "calibrate --multiclass"
