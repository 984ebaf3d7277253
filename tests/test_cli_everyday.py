"""Everyday use of the command line (issue 23): one JSON document per run even when a gate
fails, a summary on stderr when -o takes the data, output formats and compression that follow
the file name everywhere, calibration maps through pipes, a visible group-privacy caveat, help
that reads at 80 columns, and a read progress bar that knows its total."""

from __future__ import annotations

import gzip
import io
import json
import os
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from fedeval.cli import app

runner = CliRunner()


def run(*args, input: str | bytes | None = None, columns: int = 200):
    return runner.invoke(app, [str(a) for a in args], input=input, env={"COLUMNS": str(columns)})


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """t.csv / t.parquet: 600 scored rows; g.parquet: the same rows held by 30 clients."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    n = 600
    y = (np.arange(n) % 2).astype(np.int64)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0, 1)
    t = pa.table({"score": s, "label": y})
    pq.write_table(t, "t.parquet")
    pacsv.write_csv(t, "t.csv")
    pq.write_table(t.append_column("client", pa.array(np.arange(n) % 30)), "g.parquet")
    return tmp_path


# --- 1. one JSON document, gates included ------------------------------------------------------


def test_failing_gate_under_format_json_prints_one_document_holding_the_verdicts(work):
    r = run("evaluate", "t.parquet", "--seed", "1", "-f", "json", "--fail-under", "auc=0.999")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)  # one document, not the report followed by an error document
    assert doc["schema"] == "fedeval.report/2"
    gates = doc["gates"]
    assert gates["passed"] is False and gates["on"] == "bound"
    (v,) = gates["verdicts"]
    assert v["metric"] == "auc" and v["kind"] == "floor" and v["limit"] == 0.999
    assert v["passed"] is False and v["value"] == doc["metrics"]["auc"]["ci95"][0]
    assert "gate FAILED: auc" in r.stderr  # people still read the verdict on stderr


def test_passing_gates_are_in_the_report_and_in_the_file(work):
    r = run("evaluate", "t.parquet", "--seed", "1", "-o", "r.json",
            "--fail-under", "auc=0.5,recall@0.5=0.1", "--fail-over", "ece=0.9")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    doc = json.loads(Path("r.json").read_text())
    assert doc["gates"]["passed"] is True
    assert [v["metric"] for v in doc["gates"]["verdicts"]] == ["auc", "recall@0.5", "ece"]
    # The file is still a sealed report that `check` judges.
    assert run("check", "r.json", "--fail-under", "auc=0.5").exit_code == 0


def test_failing_gate_with_output_file_leaves_stdout_empty(work):
    r = run("evaluate", "t.parquet", "--seed", "1", "-f", "json", "-o", "r.json",
            "--fail-under", "auc=0.999")  # fmt: skip
    assert r.exit_code == 1
    assert r.stdout == ""  # -o FILE: the data is in the file, gates included
    assert json.loads(Path("r.json").read_text())["gates"]["passed"] is False


def test_a_report_without_gates_has_no_gates_field(work):
    r = run("evaluate", "t.parquet", "--seed", "1", "-f", "json")
    assert r.exit_code == 0 and "gates" not in json.loads(r.stdout)


def test_check_format_json_prints_the_verdicts_as_one_document(work):
    assert run("evaluate", "t.parquet", "--seed", "1", "-o", "r.json").exit_code == 0
    r = run("check", "r.json", "--fail-under", "auc=0.999", "-f", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["gates"]["passed"] is False and doc["gates"]["verdicts"][0]["metric"] == "auc"


def test_multiclass_fail_if_worse_under_format_json_is_one_document(work):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 4, 3000)
    z = 1.5 * (1.5 * np.eye(4)[y] + rng.normal(size=(3000, 4)))
    pq.write_table(
        pa.table({**{f"logit_{j}": z[:, j] for j in range(4)}, "label": y}), "mc.parquet"
    )
    r = run("calibrate", "mc.parquet", "--multiclass", "--method", "fedtemp", "-e", "1",
            "--clients", "20", "--seed", "2", "--fail-if-worse", "-f", "json")  # fmt: skip
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["gates"]["passed"] is False
    assert doc["gates"]["verdicts"][0]["metric"] == "heldout_nll_gain"


# --- 2. -o FILE: the data goes there, one summary line to stderr --------------------------------


def test_calibrate_to_a_file_reports_the_ece_before_and_after_on_stderr(work):
    r = run("calibrate", "t.parquet", "--seed", "1", "-o", "map.json")
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    doc = json.loads(Path("map.json").read_text())
    line = flat(r.stderr)
    assert "map.json" in line and "ECE" in line
    for key in ("raw", "calibrated"):
        assert f"{doc['ece'][key]['estimate']:.4f}" in line, key
    quiet = run("-Q", "calibrate", "t.parquet", "--seed", "1", "-o", "map2.json")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_evaluate_and_curves_to_a_file_say_so_on_stderr(work):
    r = run("evaluate", "t.parquet", "--seed", "1", "-o", "r.json")
    assert r.exit_code == 0 and r.stdout == ""
    doc = json.loads(Path("r.json").read_text())
    assert "r.json" in r.stderr and f"{doc['metrics']['auc']['estimate']:.4f}" in r.stderr
    r = run("curves", "t.parquet", "--seed", "1", "-o", "c.csv")
    assert r.exit_code == 0 and r.stdout == "" and "c.csv" in r.stderr


def test_summary_line_shows_no_exact_value_the_file_does_not_hold(work):
    # Under DP the map file holds no exact value; its summary line holds none either.
    r = run("calibrate", "t.parquet", "-m", "distdp", "--seed", "1", "-o", "map.json")
    assert r.exit_code == 0
    assert "exact" not in r.stderr.lower()


# --- 3. the file name picks the format and the compression, everywhere --------------------------


def test_partition_compresses_csv_for_a_gz_name(work):
    r = run("partition", "t.parquet", "-k", "5", "--scheme", "iid", "-o", "x.csv.gz")
    assert r.exit_code == 0, r.output
    with gzip.open("x.csv.gz", "rt") as f:
        assert f.readline().strip() == "score,label,client"


def test_curves_writes_csv_for_csv_gz_and_parquet_for_parquet(work):
    assert run("curves", "t.parquet", "--seed", "1", "-o", "c.csv.gz").exit_code == 0
    with gzip.open("c.csv.gz", "rt") as f:
        assert f.readline().strip() == "threshold,fpr,tpr,precision"
    r = run("curves", "t.parquet", "--seed", "1", "-o", "c.parquet")
    assert r.exit_code == 0, r.output
    assert pq.read_table("c.parquet").column_names == ["threshold", "fpr", "tpr", "precision"]
    assert run("curves", "t.parquet", "--seed", "1", "-o", "c.json").exit_code == 0
    assert json.loads(Path("c.json").read_text())["schema"] == "fedeval.curves/2"


def test_apply_compresses_for_every_codec_suffix(work):
    assert run("calibrate", "t.parquet", "--seed", "1", "-o", "map.json").exit_code == 0
    for name in ("o.csv.gz", "o.csv.bz2", "o.csv.zst"):
        r = run("apply", "map.json", "t.csv", "-o", name)
        assert r.exit_code == 0, r.output
        back = pacsv.read_csv(name)  # Arrow decompresses by the suffix
        assert back.column_names == ["score", "label", "calibrated"]


@pytest.mark.parametrize(
    ("args", "name", "fragment"),
    [
        (["evaluate", "t.parquet", "--seed", "1"], "r.parquet", "JSON"),
        (["evaluate", "t.parquet", "--seed", "1"], "r.csv", "JSON"),
        (["calibrate", "t.parquet", "--seed", "1"], "m.csv.gz", "JSON"),
        (["partition", "t.parquet", "-k", "3", "--scheme", "iid"], "x.json", "or Parquet"),
        (["partition", "t.parquet", "-k", "3", "--scheme", "iid"], "x.parquet.gz", "Parquet"),
        (["curves", "t.parquet", "--seed", "1", "-f", "json"], "c.csv", "--format json"),
        (["curves", "t.parquet", "--seed", "1"], "c.xlsx", ".xlsx"),
    ],
)
def test_a_suffix_the_command_cannot_write_is_refused_before_any_work(work, args, name, fragment):
    r = run(*args, "-o", name)
    assert r.exit_code == 2, r.output
    assert fragment in flat(r.stderr) and name in r.stderr
    assert not Path(name).exists()


def test_names_without_a_known_suffix_keep_the_command_default(work):
    assert run("evaluate", "t.parquet", "--seed", "1", "-o", "report.out").exit_code == 0
    assert json.loads(Path("report.out").read_text())["schema"] == "fedeval.report/2"
    assert run("partition", "t.parquet", "-k", "3", "--scheme", "iid", "-o", "x.gz").exit_code == 0
    with gzip.open("x.gz", "rt") as f:
        assert f.readline().startswith("score,label")


# --- 4. a map through a pipe; compressed or Parquet input on stdin ------------------------------


def test_apply_reads_the_map_from_stdin(work):
    m = run("calibrate", "t.parquet", "--seed", "1", "-o", "-")
    assert m.exit_code == 0
    r = run("apply", "-", "t.csv", input=m.stdout)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "score,label,calibrated"
    assert len(r.stdout.splitlines()) == 601


def test_apply_reads_the_map_from_a_fifo(work):
    m = run("calibrate", "t.parquet", "--seed", "1", "-o", "-")
    os.mkfifo("map.pipe")

    def feed() -> None:
        with open("map.pipe", "w") as f:
            f.write(m.stdout)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        r = run("apply", "map.pipe", "t.csv", "-o", "out.csv")
    finally:
        writer.join(timeout=10)
    assert r.exit_code == 0, r.output
    assert pacsv.read_csv("out.csv").num_rows == 600


def test_a_bad_map_on_stdin_is_refused_after_reading(work):
    r = run("apply", "-", "t.csv", input='{"schema": "fedeval.calibration-map/2"')
    assert r.exit_code == 2 and "not valid JSON" in flat(r.stderr)
    r = run("apply", "-", "-", input="{}")
    assert r.exit_code == 2 and "stdin" in flat(r.stderr)


def test_gzip_on_stdin_says_what_it_is_and_what_to_do(work):
    data = gzip.compress(Path("t.csv").read_bytes())
    r = run("evaluate", "-", "--seed", "1", input=data)
    assert r.exit_code == 2
    text = flat(r.stderr)
    assert "gzip" in text and "UTF-8" not in text
    assert "zcat" in text or "file name" in text


def test_parquet_on_stdin_says_what_it_is_and_what_to_do(work):
    r = run("evaluate", "-", "--seed", "1", input=Path("t.parquet").read_bytes())
    assert r.exit_code == 2
    text = flat(r.stderr)
    assert "Parquet" in text and "UTF-8" not in text and "file name" in text


def test_a_compressed_map_on_stdin_says_so(work):
    m = run("calibrate", "t.parquet", "--seed", "1", "-o", "-")
    r = run("apply", "-", "t.csv", input=gzip.compress(m.stdout.encode()))
    assert r.exit_code == 2 and "gzip" in flat(r.stderr)


# --- 5. group privacy is shown where people read --------------------------------------------------

CAVEAT = "k·ε"


def test_table_states_group_privacy_when_clients_hold_several_examples(work):
    r = run("evaluate", "g.parquet", "-m", "distdp", "--seed", "1")
    assert r.exit_code == 0, r.output
    assert CAVEAT in r.stdout and "--unit client" in flat(r.stdout)
    for cmd in ("curves", "calibrate"):
        r = run(cmd, "g.parquet", "-m", "distdp", "--seed", "1")
        assert r.exit_code == 0 and CAVEAT in r.stdout, cmd


def test_no_caveat_without_clients_without_dp_or_under_unit_client(work):
    assert CAVEAT not in run("evaluate", "t.parquet", "-m", "distdp", "--seed", "1").stdout
    assert CAVEAT not in run("evaluate", "g.parquet", "-m", "federated").stdout
    r = run("evaluate", "g.parquet", "--seed", "1", "--unit", "client", "--max-examples", "20")
    assert r.exit_code == 0 and CAVEAT not in r.stdout


def test_caveat_reads_no_exact_count(work):
    """Neighbours under add-remove of one example: D, where every client holds one example,
    and D′, the same with one more example for client 0. Without exact values the caveat (a
    line the analyst reads) must be the same on both: it may not reveal whether any client
    holds more than one example, nor how many the largest holds."""
    rng = np.random.default_rng(5)
    s, y = rng.random(41), np.arange(41) % 2
    clients = np.arange(41)
    clients[40] = 0
    for name, k in (("d.parquet", 40), ("d2.parquet", 41)):
        pq.write_table(pa.table({"score": s[:k], "label": y[:k], "client": clients[:k]}), name)
    lines = []
    for name in ("d.parquet", "d2.parquet"):
        r = run("evaluate", name, "-m", "distdp", "--no-exact", "--ci-draws", "0")
        assert r.exit_code == 0, r.output
        lines.append([ln for ln in r.stdout.splitlines() if CAVEAT in ln])
    assert lines[0] == lines[1] and lines[0], lines
    assert not any(ch.isdigit() for ch in " ".join(lines[0]).replace("ε", ""))


# --- 6. help that reads at 80 columns ---------------------------------------------------------


def commands() -> list[str]:
    import typer.main

    return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


EVALUATE_HELP_MAX_LINES = 120
"""evaluate --help at 80 columns: 269 lines before the help was regrouped (issue 23)."""


def test_every_command_has_help_with_examples_unbroken_at_80_columns():
    import typer.main

    group = typer.main.get_command(app)
    for name in commands():
        r = run(name, "--help", columns=80)
        assert r.exit_code == 0, name
        lines = r.stdout.splitlines()
        assert max(len(x) for x in lines) <= 80, name
        help_text = group.commands[name].help or ""  # type: ignore[attr-defined]
        plain = [Text.from_markup(ln).plain.strip() for ln in help_text.splitlines()]
        examples = [ln for ln in plain if ln.startswith("$ ")]
        assert examples, f"{name}: no example"
        for ex in examples:
            assert any(ex in ln for ln in lines), f"{name}: example broken at 80 columns: {ex}"


def test_evaluate_help_is_short_and_grouped():
    r = run("evaluate", "--help", columns=80)
    lines = r.stdout.splitlines()
    assert len(lines) <= EVALUATE_HELP_MAX_LINES, len(lines)
    for panel in ("Input", "Privacy", "Output", "Quality gates"):
        assert any(panel in ln and "─" in ln for ln in lines), panel
    # The options people reach for first are still all there.
    for option in ("--model", "--epsilon", "--format", "--output", "--fail-under", "--unit"):
        assert option in r.stdout, option


# --- 7. the read progress bar knows its total -------------------------------------------------


def test_read_bar_shows_the_parquet_footers_row_count(work, monkeypatch):
    from fedeval.cli import common

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    monkeypatch.setattr(common, "err", console)
    monkeypatch.setattr(common, "READ_BAR_AFTER", 0.0)
    bar = common.read_bar("t.parquet")
    assert bar is not None
    bar(300)
    bar(None)
    shown = screen.getvalue()
    assert "300" in shown and "600" in shown  # rows read of the footer's total


def test_read_bar_is_off_when_stderr_is_not_a_terminal(work, monkeypatch):
    from fedeval.cli import common

    monkeypatch.setattr(common, "err", Console(file=io.StringIO(), force_terminal=False))
    assert common.read_bar("t.parquet") is None
