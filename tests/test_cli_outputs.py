"""The conventions every command shares (issue 14): what -o, --plot, --format, -Q, -V do, that a
failing run writes and charges nothing, and that a reader going away (`| head`) ends the run
quietly with exit 0."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.privacy.ledger import read_ledger

runner = CliRunner()
FAST = ["--ci-draws", "0"]


def invoke(*args: str, input: str | None = None, env: dict | None = None):
    return runner.invoke(app, list(args), input=input, env=env)


@pytest.fixture
def table(tmp_path, monkeypatch) -> str:
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    y = np.arange(400) % 2
    s = np.clip(0.3 * y + 0.7 * rng.random(400), 0, 1)
    Path("t.csv").write_text(
        "score,label\n" + "".join(f"{a:.5f},{b}\n" for a, b in zip(s, y, strict=True))
    )
    return "t.csv"


def files(directory: str = ".") -> list[str]:
    """The files in `directory`, but the ledger's lock file (filelock leaves it on POSIX)."""
    return sorted(p.name for p in Path(directory).iterdir() if not p.name.endswith(".lock"))


# --- a failing run writes nothing and charges nothing -------------------------------------------


def test_unwritable_plot_writes_no_report_and_charges_no_ledger(table):
    r = invoke(
        "evaluate",
        table,
        *FAST,
        "-o",
        "r.json",
        "--ledger",
        "l.jsonl",
        "--budget",
        "3",
        "--plot",
        "/proc/nope/c.png",
    )
    assert r.exit_code == 2, r.stderr
    assert "fedeval: error:" in r.stderr and "/proc/nope" in r.stderr
    assert files() == ["t.csv"]  # no report, no ledger, no temporary file


def test_plot_without_matplotlib_writes_no_map(table, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails: not installed
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = invoke("calibrate", table, *FAST, "-o", "m.json", "--plot", "rel.png")
    assert r.exit_code == 2, r.stderr
    assert "matplotlib" in r.stderr
    assert files() == ["t.csv"]


def test_plot_with_a_wrong_extension_is_refused_before_any_work(table):
    for command in ("evaluate", "curves", "calibrate"):
        r = invoke(command, table, *FAST, "-o", "out.json", "--plot", "figure.jpeg")
        assert r.exit_code == 2
        assert ".png or .svg" in r.stderr
    assert files() == ["t.csv"]


def test_budget_refusal_writes_nothing(table):
    assert invoke("evaluate", table, *FAST, "--ledger", "l.jsonl", "--budget", "1").exit_code == 0
    before = Path("l.jsonl").read_text()
    r = invoke(
        "calibrate",
        table,
        *FAST,
        "--ledger",
        "l.jsonl",
        "-o",
        "m.json",
        "--plot",
        "rel.svg",
        "--save-release",
        "run.fedeval",
    )
    assert r.exit_code == 2
    assert files() == ["l.jsonl", "t.csv"]
    assert Path("l.jsonl").read_text() == before


def test_budget_refusal_leaves_no_directory_it_made(table):
    assert invoke("evaluate", table, *FAST, "--ledger", "l.jsonl", "--budget", "1").exit_code == 0
    r = invoke("evaluate", table, *FAST, "--ledger", "l.jsonl", "-o", "sub/deeper/r.json")
    assert r.exit_code == 2
    assert files() == ["l.jsonl", "t.csv"]


def test_a_gate_that_cannot_be_judged_writes_nothing(table):
    # Without interval draws a gate on the bound has nothing to judge: a usage error found
    # before the report, the plot and the saved release are written.
    r = invoke(
        "evaluate",
        table,
        *FAST,
        "-o",
        "r.json",
        "--save-release",
        "run.fedeval",
        "--fail-under",
        "auc=0.5",
    )
    assert r.exit_code == 2, r.stderr
    assert files() == ["t.csv"]


def test_a_successful_run_commits_every_output_and_one_charge(table):
    r = invoke(
        "curves",
        table,
        *FAST,
        "-o",
        "c.csv",
        "--plot",
        "figs/",
        "--save-release",
        "run.fedeval",
        "--ledger",
        "l.jsonl",
        "--budget",
        "5",
    )
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert files() == ["c.csv", "figs", "l.jsonl", "run.fedeval", "t.csv"]
    assert files("figs") == ["curves.png"]
    assert Path("c.csv").read_text().startswith("threshold,")
    _, entries = read_ledger("l.jsonl")
    assert [e["command"] for e in entries] == ["curves"]


# --- -o: a file, and stdout stays empty; - is stdout ----------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "curves", "calibrate"])
def test_output_file_leaves_stdout_empty(table, command):
    r = invoke(command, table, *FAST, "-o", "out.json")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert json.loads(Path("out.json").read_text())["schema"].startswith("fedeval.")


@pytest.mark.parametrize("command", ["evaluate", "curves", "calibrate"])
def test_output_dash_is_stdout(table, command):
    r = invoke(command, table, *FAST, "-o", "-")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["schema"].startswith("fedeval.")
    assert files() == ["t.csv"]  # no file named '-'


def test_calibrate_dash_writes_the_shareable_map(table):
    r = invoke("calibrate", table, *FAST, "-o", "-")
    assert json.loads(r.stdout)["schema"].startswith("fedeval.calibration-map/")
    Path("m.json").write_text(r.stdout)
    assert invoke("apply", "m.json", table, "-o", "out.csv").exit_code == 0


@pytest.mark.parametrize("suffix, magic", [(".gz", b"\x1f\x8b"), (".zst", b"\x28\xb5\x2f\xfd")])
def test_apply_compresses_by_extension(table, suffix, magic):
    assert invoke("calibrate", table, *FAST, "-o", "m.json").exit_code == 0
    r = invoke("apply", "m.json", table, "-o", f"out.csv{suffix}")
    assert r.exit_code == 0, r.stderr
    data = Path(f"out.csv{suffix}").read_bytes()
    assert data.startswith(magic)
    if suffix == ".gz":
        assert gzip.decompress(data).decode().startswith("score,label,calibrated\n")
    # and it reads back as input
    r = invoke("evaluate", f"out.csv{suffix}", *FAST, "-f", "json")
    assert r.exit_code == 0, r.stderr


# --- global options -----------------------------------------------------------------------------


def test_version_short_and_long():
    for flag in ("-V", "--version"):
        r = invoke(flag)
        assert r.exit_code == 0 and r.stdout.startswith("fedeval ")


def test_quiet_keeps_stderr_for_errors_only(table):
    ledger = ["--ledger", "l.jsonl", "--budget", "5"]
    loud = invoke("evaluate", table, *FAST, "-f", "json", *ledger)
    quiet = invoke("-Q", "evaluate", table, *FAST, "-f", "json", *ledger)
    assert "ε spent 1 of 5" in loud.stderr and quiet.stderr == ""
    assert json.loads(quiet.stdout)["schema"] == "fedeval.report/2"
    bad = invoke("-Q", "evaluate", "missing.csv")
    assert bad.exit_code == 2 and bad.stderr.startswith("fedeval: error:")


def test_usage_errors_are_plain_lines_not_boxes(table):
    r = invoke("evaluate", table, "--no-such-option", env={"NO_COLOR": "1"})
    assert r.exit_code == 2
    # click words it "No such option: --x" or, in newer releases, "No such option '--x'."
    first = r.stderr.splitlines()[0]
    assert first.startswith("fedeval: error: No such option") and "--no-such-option" in first
    assert not any(ch in r.stderr for ch in "╭│╰\x1b")


def test_usage_error_under_json_is_a_json_document(table):
    r = invoke("evaluate", table, "--format", "json", "--model", "nope")
    assert r.exit_code == 2
    error = json.loads(r.stdout)["error"]
    assert "nope" in error["message"]


def test_internal_error_exits_70_with_a_debug_pointer(table, monkeypatch):
    def boom(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(sys.modules["fedeval.api.evaluate"], "evaluate_file", boom)
    r = invoke("evaluate", table)
    assert r.exit_code == 70
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("fedeval: error: internal error")
    assert "ZeroDivisionError: a bug" in lines[0]
    assert "--debug" in lines[1]
    assert "Traceback" not in r.stderr
    r = invoke("--debug", "evaluate", table)
    assert isinstance(r.exception, ZeroDivisionError)  # --debug lets the traceback through


def test_gate_failure_still_exits_1_and_writes_the_report(table):
    r = invoke(
        "evaluate",
        table,
        *FAST,
        "-o",
        "r.json",
        "--fail-under",
        "auc=0.999",
        "--gate-on",
        "estimate",
    )
    assert r.exit_code == 1
    assert Path("r.json").exists()
    assert "fedeval: error:" in r.stderr and "quality gate" in r.stderr


# --- a reader that goes away -------------------------------------------------------------------


@pytest.mark.slow
def test_broken_pipe_exits_0_without_traceback(tmp_path):
    rows = 200_000
    rng = np.random.default_rng(0)
    lines = "".join(f"{x:.4f},{i % 2}\n" for i, x in enumerate(rng.random(rows)))
    src = tmp_path / "big.csv"
    src.write_text("score,label\n" + lines)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    m = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedeval.cli",
            "calibrate",
            str(src),
            "--ci-draws",
            "0",
            "-m",
            "federated",
            "-o",
            str(tmp_path / "m.json"),
        ],
        capture_output=True,
        env=env,
        check=False,
    )
    assert m.returncode == 0, m.stderr
    p = subprocess.Popen(
        [sys.executable, "-m", "fedeval.cli", "apply", str(tmp_path / "m.json"), str(src)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert p.stdout.readline().startswith(b"score,label,calibrated")
    p.stdout.close()  # the reader goes away, as `| head -1` does
    _, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr
    assert b"Traceback" not in stderr and b"BrokenPipeError" not in stderr


# --- messages ------------------------------------------------------------------------------


README = Path(__file__).resolve().parents[1] / "README.md"
SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "scores.parquet"


def test_readme_ci_example_passes_on_the_sample_data(tmp_path, monkeypatch):
    import shlex

    monkeypatch.chdir(tmp_path)
    Path("scores.parquet").write_bytes(SAMPLE.read_bytes())
    text = README.read_text()
    block = text[text.index("In CI, fail the build") :]
    block = block[block.index("```sh") + 5 : block.index("```", block.index("```sh") + 5)]
    commands = [line for line in block.splitlines() if line.startswith("fedeval ")]
    assert [c.split()[1] for c in commands] == ["evaluate", "check"]
    for command in commands:
        r = invoke(*shlex.split(command)[1:])
        assert r.exit_code == 0, (command, r.stderr)


def test_pos_label_that_matches_no_label_lists_the_labels_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("t.csv").write_text("score,label\n0.1,no\n0.9,yes\n0.3,no\n0.8,yes\n")
    r = invoke("evaluate", "t.csv", *FAST, "--pos-label", "Yes")
    assert r.exit_code == 2
    assert "'no' and 'yes'" in r.stderr and "'Yes'" in r.stderr
    assert invoke("evaluate", "t.csv", *FAST, "--pos-label", "yes").exit_code == 0


def test_plan_like_takes_rows_and_positive_share_from_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    y = (rng.random(3000) < 0.3).astype(int)
    s = np.clip(0.3 * y + 0.7 * rng.random(3000), 0, 1)
    Path("p.csv").write_text(
        "score,label\n" + "".join(f"{a:.4f},{b}\n" for a, b in zip(s, y, strict=True))
    )
    r = invoke("plan", "--like", "p.csv", "-f", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["rows"] == 3000
    assert doc["positives_fraction"] == pytest.approx(y.mean())
    table = invoke("plan", "--like", "p.csv")
    assert f"({y.mean():.1%} positive)" in " ".join(table.stdout.split())
    r = invoke("plan")
    assert r.exit_code == 2 and "--rows" in r.stderr


def test_counts_in_messages_are_singular_for_one():
    from fedeval.cli.common import plural

    assert [plural(n, "part") for n in (0, 1, 2, 1000)] == [
        "0 parts",
        "1 part",
        "2 parts",
        "1,000 parts",
    ]


def test_multiclass_options_are_refused_in_binary_mode_even_at_their_default(table):
    r = invoke("calibrate", table, *FAST, "--rounds", "12")
    assert r.exit_code == 2
    assert "--rounds applies to --multiclass only" in r.stderr
    r = invoke("calibrate", table, *FAST, "--rounds", "12", "--participation", "0.1")
    assert "--rounds, --participation apply to --multiclass only" in r.stderr


def test_apply_reads_the_score_column_the_map_was_fitted_on(table):
    Path("s.csv").write_text(Path(table).read_text().replace("score,label", "p,label", 1))
    assert invoke("calibrate", "s.csv", *FAST, "--score-col", "p", "-o", "m.json").exit_code == 0
    r = invoke("apply", "m.json", "s.csv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("p,label,calibrated\n")
    r = invoke("apply", "m.json", "s.csv", "--score-col", "label")  # given: it wins
    assert r.exit_code == 0, r.stderr


def test_dash_for_outputs_that_are_not_one_document(table):
    r = invoke("encode", table, "-m", "federated", "--min-cohort", "10", "-o", "-")
    assert r.exit_code == 2 and "directory" in r.stderr
    assert invoke("keygen", "-o", "-").exit_code == 2
    r = invoke("evaluate", table, *FAST, "--save-release", "-")
    assert r.exit_code == 2 and "--save-release takes a file name" in r.stderr
    assert files() == ["t.csv"]


@pytest.mark.slow
def test_aggregate_dash_writes_the_release_to_stdout(table):
    r = invoke("encode", table, "-m", "federated", "--min-cohort", "10", "-o", "reports")
    assert r.exit_code == 0, r.stderr
    r = invoke("aggregate", "reports", "-o", "-")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "fedeval.aggregate/2"
    Path("run.fedeval").write_text(r.stdout)
    r = invoke("evaluate", "--from", "run.fedeval", *FAST, "-o", "-")
    assert r.exit_code == 0, r.stderr
    assert "-" not in files()


def test_plan_refuses_an_epsilon_too_small_to_predict_anything():
    r = invoke("plan", "--rows", "1000", "--epsilon", "1e-9", "-f", "json")
    assert r.exit_code == 2
    assert "no finite or useful error" in json.loads(r.stdout)["error"]["message"]
    assert "Mean of empty slice" not in r.stderr  # numpy's RuntimeWarnings are not shown
