"""No traceback on any input: malformed tables, maps, releases, reports, ledgers and options.

Every case runs a real command through Typer's CliRunner and checks the contract of issue 14:
bad input exits 2 (never 1, the quality-gate code, and never 70, an internal error), stderr holds
exactly one `fedeval: error: …` line (plus at most a `hint:` line and warnings), the message
names the file (and the column and row where one is to blame), and no output file is left.

Two layers: hand-written cases for every input kind the issue lists, and a seeded generator of
mutated CSV/Parquet/JSON files (`FEDEVAL_FUZZ_CASES` sets how many; the default keeps this file
fast, `FEDEVAL_FUZZ_CASES=5000` is the full run). A generated case may happen to be valid input,
so it may exit 0 or 2, but never anything else.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.cli import app

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FAST = ["--ci-draws", "0", "--seed", "1"]
N_GENERATED = int(os.environ.get("FEDEVAL_FUZZ_CASES", "120"))


def invoke(*args: str, input: str | bytes | None = None):
    return runner.invoke(app, ["-Q", *args], input=input)


def error_lines(result) -> list[str]:
    lines = [ANSI.sub("", line) for line in result.stderr.splitlines() if line.strip()]
    return [line for line in lines if line.startswith("fedeval: error:")]


def assert_clean_error(result, *, names: tuple[str, ...] = (), code: int = 2) -> str:
    """Exit `code` with one error line (no traceback) naming each of `names`; the message."""
    detail = (result.exit_code, result.stdout[-500:], result.stderr[-2000:], result.exception)
    assert result.exit_code == code, detail
    assert result.exception is None or isinstance(result.exception, SystemExit), detail
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, detail
    lines = [ANSI.sub("", line) for line in result.stderr.splitlines() if line.strip()]
    errors = error_lines(result)
    assert len(errors) == 1, detail
    for line in lines:  # nothing but the error, its hint and warnings
        assert line.startswith(("fedeval: error:", "hint:", "fedeval: warning:")), detail
    for name in names:
        assert name in errors[0], (name, errors[0])
    return errors[0]


def assert_no_traceback(result) -> None:
    """A generated case: valid (0) or refused cleanly (2); never a gate failure or a crash."""
    detail = (result.exit_code, result.stderr[-2000:], result.exception)
    assert result.exit_code in (0, 2), detail
    assert result.exception is None or isinstance(result.exception, SystemExit), detail
    if result.exit_code == 2:
        assert len(error_lines(result)) == 1, detail


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def good_csv(n: int = 60) -> str:
    rng = np.random.default_rng(0)
    y = np.arange(n) % 2
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1)
    return "score,label\n" + "".join(f"{a:.4f},{b}\n" for a, b in zip(s, y, strict=True))


def good_table(n: int = 60) -> pa.Table:
    rng = np.random.default_rng(0)
    y = np.arange(n) % 2
    return pa.table({"score": np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1), "label": y})


def write(path: str, content: str | bytes | pa.Table) -> str:
    if isinstance(content, pa.Table):
        pq.write_table(content, path)
    elif isinstance(content, bytes):
        Path(path).write_bytes(content)
    else:
        Path(path).write_text(content)
    return path


MAP = {  # a hand-written binary map (welcome unsealed): no calibrate run per case
    "schema": "fedeval.calibration-map/2",
    "edges": [0.0, 0.25, 0.5, 1.0],
    "values": [0.1, 0.4, 0.8],
    "score_range": [0.0, 1.0],
}


def write_map(path: str = "map.json") -> str:
    Path(path).write_text(json.dumps(MAP))
    return path


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


# --- tables: every kind of malformed input the issue found ----------------------------------

N = 6
SCORES = [0.1, 0.9, 0.4, 0.6, 0.2, 0.8]
LABELS = [0, 1, 0, 1, 0, 1]

TABLES: dict[str, tuple[str, Callable[[], str | bytes | pa.Table], tuple[str, ...]]] = {
    "duplicate columns csv": ("t.csv", lambda: "score,score,label\n0.1,0.2,0\n0.3,0.4,1\n", ()),
    "duplicate columns parquet": (
        "t.parquet",
        lambda: pa.Table.from_arrays(
            [pa.array(SCORES), pa.array(SCORES), pa.array(LABELS)], ["score", "score", "label"]
        ),
        ("score",),
    ),
    "non-utf8 header": ("t.csv", lambda: b"sc\xffore,label\n0.1,0\n0.9,1\n", ()),
    "non-utf8 value": ("t.csv", lambda: b"score,label\n0.1,0\n0.9,\xff\xfe\n", ()),
    "corrupt parquet": ("t.parquet", lambda: b"PAR1" + bytes(range(200)) + b"PAR1", ()),
    "truncated parquet": (
        "t.parquet",
        lambda: _parquet_bytes(pa.table({"score": SCORES, "label": LABELS}))[:-30],
        (),
    ),
    "bad gzip": ("t.csv.gz", lambda: b"\x1f\x8bthis is not gzip at all", ()),
    "truncated gzip": ("t.csv.gz", lambda: gzip.compress(good_csv().encode())[:40], ()),
    "plain text named .gz": ("t.csv.gz", lambda: good_csv(), ()),
    "list-typed labels": (
        "t.parquet",
        lambda: pa.table({"score": SCORES, "label": [[x] for x in LABELS]}),
        ("label",),
    ),
    "list-typed scores": (
        "t.parquet",
        lambda: pa.table({"score": [[x] for x in SCORES], "label": LABELS}),
        ("score",),
    ),
    "struct labels": (
        "t.parquet",
        lambda: pa.table({"score": SCORES, "label": [{"a": x} for x in LABELS]}),
        ("label",),
    ),
    "binary labels": (
        "t.parquet",
        lambda: pa.table({"score": SCORES, "label": [bytes([x]) for x in LABELS]}),
        ("label",),
    ),
    "timestamp scores": (
        "t.parquet",
        lambda: pa.table({"score": pa.array(range(N), pa.timestamp("s")), "label": LABELS}),
        ("score",),
    ),
    "string scores parquet": (
        "t.parquet",
        lambda: pa.table({"score": [str(x) for x in SCORES], "label": LABELS}),
        ("score",),
    ),
    "decimal scores": (
        "t.parquet",
        lambda: pa.table(
            {"score": pa.array([1, 2, 3, 4, 5, 6], pa.decimal128(5, 1)), "label": LABELS}
        ),
        ("score",),
    ),
    "overflowing score csv": ("t.csv", lambda: "score,label\n0.1,0\n1e400,1\n", ("row 2",)),
    "overflowing label csv": (
        "t.csv",
        lambda: "score,label\n0.1,0\n0.9,99999999999999999999999999\n",
        ("label",),
    ),
    "huge int label parquet": (
        "t.parquet",
        lambda: pa.table({"score": SCORES, "label": pa.array([0, 1, 0, 1, 0, 2**62], pa.int64())}),
        ("label", "row 6"),
    ),
    "nan score csv": ("t.csv", lambda: "score,label\n0.1,0\nnan,1\n", ("row 2",)),
    "inf score parquet": (
        "t.parquet",
        lambda: pa.table({"score": [0.1, float("inf"), 0.4, 0.6, 0.2, 0.8], "label": LABELS}),
        ("row 2",),
    ),
    "-inf score csv": ("t.csv", lambda: "score,label\n-inf,0\n0.9,1\n", ("row 1",)),
    "empty file": ("t.csv", lambda: "", ()),
    "whitespace only": ("t.csv", lambda: "\n\n  \n", ()),
    "header only": ("t.csv", lambda: "score,label\n", ()),
    "empty parquet": (
        "t.parquet",
        lambda: pa.table({"score": pa.array([], pa.float64()), "label": pa.array([], pa.int64())}),
        (),
    ),
    "missing columns": ("t.csv", lambda: "a,b\n1,2\n", ("score",)),
    "ragged rows": ("t.csv", lambda: "score,label\n0.1,0\n0.9,1,7\n", ()),
    "nul bytes": ("t.csv", lambda: b"score,label\n0.1,0\n0.9\x00,1\n", ()),
    "label 0.5": ("t.csv", lambda: "score,label\n0.1,0\n0.9,0.5\n", ("row 2",)),
    "label text": ("t.csv", lambda: "score,label\n0.1,no\n0.9,yes\n", ("label",)),
    "float16 scores": (
        "t.parquet",
        lambda: pa.table({"score": pa.array(np.array(SCORES, np.float16)), "label": LABELS}),
        (),
    ),
    "null client": (
        "t.parquet",
        lambda: pa.table({"score": SCORES, "label": LABELS, "client": [1, None, 2, 3, 4, 5]}),
        ("client", "row 2"),
    ),
    "list client": (
        "t.parquet",
        lambda: pa.table({"score": SCORES, "label": LABELS, "client": [[i] for i in range(N)]}),
        ("client",),
    ),
}

# Cases that are, after all, valid input: they must run (exit 0), not crash.
VALID = {"float16 scores"}

COMMANDS = {
    "evaluate": ["evaluate", *FAST],
    "curves": ["curves", *FAST],
    "calibrate": ["calibrate", *FAST],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(TABLES))
def test_malformed_table(workdir, case, command):
    name, build, names = TABLES[case]
    write(name, build())
    result = invoke(*COMMANDS[command], name, "-o", "out.json")
    if case in VALID:
        assert result.exit_code in (0, 2), result.stderr
        if result.exit_code == 2:
            assert_clean_error(result)
        return
    assert_clean_error(result, names=(name, *names))
    assert not Path("out.json").exists()
    assert [p.name for p in workdir.iterdir() if p.name.startswith(".out")] == []


@pytest.mark.parametrize("case", ["duplicate columns csv", "non-utf8 header", "list-typed scores"])
def test_malformed_table_under_apply_and_plan(workdir, case):
    name, build, _ = TABLES[case]
    write(name, build())
    write("good.csv", good_csv())
    assert invoke("calibrate", "good.csv", *FAST, "-o", "map.json").exit_code == 0
    assert_clean_error(invoke("apply", "map.json", name, "-o", "out.csv"), names=(name,))
    assert not Path("out.csv").exists()
    assert_clean_error(invoke("plan", "--like", name, "--rows", "1000"), names=(name,))


def test_csv_on_stdin_that_is_not_utf8(workdir):
    result = invoke("evaluate", "-", *FAST, input=b"score,label\n0.1,\xff\n")
    assert_clean_error(result, names=("<stdin>",))


def test_json_error_document_names_file_column_row(workdir):
    write("t.csv", "score,label\n0.1,0\nhigh,1\n")
    result = invoke("evaluate", "t.csv", *FAST, "--format", "json")
    assert_clean_error(result)
    error = json.loads(result.stdout)["error"]
    assert (error["file"], error["column"], error["row"]) == ("t.csv", "score", 2)
    assert "'high' is not a number" in error["message"]


# --- options and privacy parameters ----------------------------------------------------------

OPTIONS = {
    "epsilon 1e-17": ["--epsilon", "1e-17"],
    "epsilon 800": ["--epsilon", "800"],
    "epsilon 0": ["--epsilon", "0"],
    "epsilon -1": ["--epsilon", "-1"],
    "epsilon nan": ["--epsilon", "nan"],
    "epsilon inf": ["--epsilon", "inf"],
    "localdp epsilon 1e-17": ["-m", "localdp", "--epsilon", "1e-17"],
    "localdp epsilon 800": ["-m", "localdp", "--epsilon", "800"],
    "score range empty": ["--score-range", "0,0"],
    "score range nan": ["--score-range", "nan,1"],
    "score range huge": ["--score-range", "-1e308,1e308"],
    "thresholds nan": ["--thresholds", "nan"],
    "thresholds inf": ["--thresholds", "inf"],
    "height -1": ["--height", "-1"],
    "height 0": ["--height", "0"],
    "height 200": ["--height", "200"],
    "buckets huge": ["--buckets", "1000000000000"],
    "quantiles huge": ["--quantiles", "1000000000"],
    "pos-label absent": ["--pos-label", "yes"],
    "max-examples without unit": ["--max-examples", "3"],
}
# Valid but meaningless or extreme: a warning is fine, a crash is not.
MAY_RUN = {
    "epsilon 1e-17",
    "epsilon 800",
    "localdp epsilon 1e-17",
    "localdp epsilon 800",
    "score range huge",
    "max-examples without unit",
}


@pytest.mark.parametrize("command", ["evaluate", "curves", "calibrate"])
@pytest.mark.parametrize("case", list(OPTIONS))
def test_extreme_options(workdir, case, command):
    write("t.csv", good_csv())
    result = invoke(command, "t.csv", *FAST, *OPTIONS[case], "-o", "out.json")
    if case in MAY_RUN and result.exit_code == 0:
        assert "Traceback" not in result.stderr
        json.loads(Path("out.json").read_text())  # a valid document (no NaN in it)
        return
    assert_clean_error(result)
    assert not Path("out.json").exists()


def test_tiny_epsilon_warns(workdir):
    write("t.csv", good_csv())
    result = invoke("evaluate", "t.csv", *FAST, "--epsilon", "1e-6", "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert "fedeval: warning:" in result.stderr
    assert "ε" in result.stderr or "epsilon" in result.stderr


@pytest.mark.parametrize("command", ["evaluate", "curves", "calibrate"])
def test_localdp_on_tiny_data(workdir, command):
    write("t.csv", "score,label\n0.1,0\n0.9,1\n0.3,0\n")
    result = invoke(command, "t.csv", "-m", "localdp", "-o", "out.json", "--ci-draws", "5")
    if result.exit_code == 0:
        json.loads(Path("out.json").read_text())
    else:
        assert_clean_error(result)


# --- JSON documents: maps, releases, reports ----------------------------------------------------


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


DOCUMENTS = {
    "deeply nested": lambda: _nested(100_000),
    "nested object": lambda: '{"schema": ' + _nested(50_000) + "}",
    "not utf-8": lambda: b'{"schema": "\xff"}',
    "not json": lambda: "{schema",
    "a list": lambda: "[1, 2, 3]",
    "empty": lambda: "",
    "nan values": lambda: json.dumps(
        {
            "schema": "fedeval.calibration-map/1",
            "edges": [0, 0.5, 1],
            "values": [float("nan"), 1],
            "score_range": [0, 1],
        }
    ),
    "huge numbers": lambda: (
        '{"schema": "fedeval.calibration-map/1", "edges": [0, 1e999, 1], '
        '"values": [0, 1], "score_range": [0, 1]}'
    ),
    "string edges": lambda: json.dumps(
        {
            "schema": "fedeval.calibration-map/1",
            "edges": ["a", "b"],
            "values": [0.5],
            "score_range": [0, 1],
        }
    ),
    "nested edges": lambda: json.dumps(
        {
            "schema": "fedeval.calibration-map/1",
            "edges": [[0], [1]],
            "values": [[0.5]],
            "score_range": [[0], [1]],
        }
    ),
    "schema number": lambda: '{"schema": 7}',
    "huge int": lambda: '{"schema": "fedeval.aggregate/2", "counts": [' + "9" * 5000 + "]}",
    "wrong schema version": lambda: '{"schema": "fedeval.aggregate/99999999999999999999999"}',
    "release wrong fields": lambda: json.dumps(
        {"schema": "fedeval.aggregate/2", "privacy": [], "counts": "x", "score_range": 3}
    ),
}


@pytest.mark.parametrize("case", list(DOCUMENTS))
def test_malformed_documents(workdir, case):
    write("doc.json", DOCUMENTS[case]())
    write("t.csv", good_csv())
    runs = {
        "apply": ["apply", "doc.json", "t.csv", "-o", "out.csv"],
        "from": ["evaluate", "--from", "doc.json", "--ci-draws", "0", "-o", "out.json"],
        "check": ["check", "doc.json", "--fail-under", "auc=0.5"],
        "ledger": ["ledger", "doc.json"],
    }
    if case == "empty":
        del runs["ledger"]  # an empty ledger is a valid one, with nothing charged yet
    for what, args in runs.items():
        result = invoke(*args)
        assert_clean_error(result, names=("doc.json",)), what
        assert not Path("out.csv").exists() and not Path("out.json").exists(), what


def test_oversized_document_is_refused(workdir, monkeypatch):
    from fedeval.documents import files as documents

    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 1000)
    write("t.csv", good_csv())
    assert invoke("calibrate", "t.csv", *FAST, "-o", "map.json").exit_code == 0
    msg = assert_clean_error(invoke("apply", "map.json", "t.csv"), names=("map.json",))
    assert "too large" in msg


# --- ledgers ---------------------------------------------------------------------------------


def test_read_only_ledger_charges_nothing_and_writes_nothing(workdir, monkeypatch):
    write("t.csv", good_csv(200))
    assert (
        invoke(
            "evaluate", "t.csv", "--ci-draws", "0", "--ledger", "l.jsonl", "--budget", "5"
        ).exit_code
        == 0
    )
    before = Path("l.jsonl").read_text()
    os.chmod("l.jsonl", stat.S_IRUSR)
    if os.geteuid() == 0:  # root writes anyway: make the permission check see a read-only file
        import fedeval.privacy.ledger

        monkeypatch.setattr(fedeval.privacy.ledger.os, "access", lambda *a, **k: False)
    try:
        result = invoke(
            "evaluate", "t.csv", "--ci-draws", "0", "--ledger", "l.jsonl", "-o", "r.json"
        )
        assert_clean_error(result, names=("l.jsonl",))
    finally:
        os.chmod("l.jsonl", stat.S_IRUSR | stat.S_IWUSR)
    assert Path("l.jsonl").read_text() == before
    assert not Path("r.json").exists()


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe", b"[1,2]\n", b'{"schema": "fedeval.ledger/2"}\n', _nested(50_000).encode()],
    ids=["not utf-8", "a list", "header without budget", "deeply nested"],
)
def test_malformed_ledger(workdir, content):
    write("l.jsonl", content)
    write("t.csv", good_csv(200))
    assert_clean_error(invoke("ledger", "l.jsonl"), names=("l.jsonl",))
    result = invoke("evaluate", "t.csv", "--ci-draws", "0", "--ledger", "l.jsonl", "-o", "r.json")
    assert_clean_error(result, names=("l.jsonl",))
    assert not Path("r.json").exists()
    assert Path("l.jsonl").read_bytes() == content


def test_ledger_that_is_a_directory(workdir):
    Path("l.jsonl").mkdir()
    write("t.csv", good_csv(200))
    result = invoke("evaluate", "t.csv", "--ci-draws", "0", "--ledger", "l.jsonl", "--budget", "3")
    assert_clean_error(result, names=("l.jsonl",))


# --- files that are not regular files ---------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_not_read(workdir):
    os.mkfifo("t.csv")  # reading it would block forever
    assert_clean_error(invoke("evaluate", "t.csv", *FAST), names=("t.csv",))
    write("good.csv", good_csv())
    assert invoke("calibrate", "good.csv", *FAST, "-o", "map.json").exit_code == 0
    assert_clean_error(invoke("apply", "map.json", "t.csv"), names=("t.csv",))
    # A map may come through a pipe (read once, to its end: test_cli_everyday); a device
    # that never ends is still refused.
    if Path("/dev/zero").exists():
        os.symlink("/dev/zero", "m.json")
        assert_clean_error(invoke("apply", "m.json", "good.csv"), names=("m.json",))


def test_device_is_refused(workdir):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    os.symlink("/dev/zero", "t.csv")
    assert_clean_error(invoke("evaluate", "t.csv", *FAST), names=("t.csv",))


# --- the seeded generator ----------------------------------------------------------------------

TOKENS = [
    "",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "-0",
    "0x10",
    "true",
    "[1]",
    '"',
    "\\",
    ",",
    "é",
    "\x00",
    "1" * 400,
    "-1",
    "2",
    " ",
    "None",
    "{}",
    "0.5",
]


def _mutate_csv(rng: random.Random) -> bytes:
    lines = good_csv(20).splitlines()
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        op = rng.randrange(6)
        cells = lines[i].split(",")
        if op == 0:
            cells[rng.randrange(len(cells))] = rng.choice(TOKENS)
        elif op == 1:
            cells.append(rng.choice(TOKENS))
        elif op == 2 and len(cells) > 1:
            cells.pop(rng.randrange(len(cells)))
        elif op == 3:
            lines.insert(i, rng.choice(TOKENS))
        elif op == 4:
            del lines[i:]
            lines = lines or [""]
            continue
        lines[i] = ",".join(cells)
    data = ("\n".join(lines) + "\n").encode()
    if rng.random() < 0.2:
        data = bytearray(data)
        for _ in range(rng.randint(1, 5)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data)
    return data


def _mutate_parquet(rng: random.Random) -> bytes:
    data = bytearray(_parquet_bytes(good_table(20)))
    op = rng.randrange(3)
    if op == 0:
        del data[rng.randrange(len(data)) :]
    elif op == 1:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    else:
        i = rng.randrange(len(data))
        data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 50)))
    return bytes(data)


def _mutate_map(rng: random.Random, valid: dict) -> bytes:
    doc = json.loads(json.dumps(valid))
    doc.pop("integrity", None)
    key = rng.choice(list(doc))
    doc[key] = rng.choice(
        [None, [], {}, "x", -1, 1e308, [None], [[1]], ["a"], [0.5] * 3, True, [1, 0], 10**30]
    )
    return json.dumps(doc).encode()


OPTION_NAMES = [
    "--epsilon", "--height", "--shape", "--buckets", "--thresholds", "--quantiles",
    "--score-range", "--pos-label", "--ci-draws", "--max-examples", "--unit", "--relation",
    "--model", "--fail-under", "--fail-over", "--gate-on", "--bins", "--method",
    "--curve-method", "--client-col", "--score-col", "--label-col",
]  # fmt: skip
OPTION_VALUES = [
    "-1", "0", "1e-300", "1e300", "nan", "inf", "abc", "", "3", "0.5", "1,2", "-5,5",
    "0.2,0.8", "auto", "2", "20", "1e-5", "client", "example", "replace", "add-remove",
    "auc=0.5", "ece=nan", "recall@0.5=0.1", "precision@2=0.1", "x=1", "bbq", "binning",
    "pchip", "leaves", "flat", "hierarchy", "yes", "1",
]  # fmt: skip


@pytest.mark.parametrize("seed", range(N_GENERATED))
def test_generated_inputs(workdir, seed):
    rng = random.Random(seed)
    kind = seed % 5
    if kind == 4:  # good data, random option values
        write("t.csv", good_csv(80))
        args = [rng.choice(["evaluate", "curves", "calibrate"]), "t.csv", "--ci-draws", "3"]
        for _ in range(rng.randint(1, 3)):
            args += [rng.choice(OPTION_NAMES), rng.choice(OPTION_VALUES)]
        result = invoke(*args, "-o", "out.json")
        gated = "--fail-under" in args or "--fail-over" in args
        if gated and result.exit_code == 1:  # a gate may fail: that is its job
            assert result.exception is None or isinstance(result.exception, SystemExit)
            return
        assert_no_traceback(result)
        if result.exit_code == 2:
            assert not Path("out.json").exists()
        return
    if kind == 0:
        write("t.csv", _mutate_csv(rng))
        command = rng.choice(["evaluate", "curves", "calibrate"])
        result = invoke(command, "t.csv", *FAST, "-o", "out.json")
    elif kind == 1:
        write("t.parquet", _mutate_parquet(rng))
        command = rng.choice(["evaluate", "curves", "calibrate"])
        result = invoke(command, "t.parquet", *FAST, "-o", "out.json")
    elif kind == 2:
        write("t.csv", _mutate_csv(rng))
        result = invoke("apply", write_map(), "t.csv", "-o", "out.csv")
    else:
        write("good.csv", good_csv())
        write("m2.json", _mutate_map(rng, MAP))
        result = invoke("apply", "m2.json", "good.csv", "-o", "out.csv")
    assert_no_traceback(result)
    if result.exit_code == 2:
        assert not Path("out.json").exists() and not Path("out.csv").exists()


# --- resource limits ---------------------------------------------------------------------------


def test_decompression_bomb_is_refused(workdir, monkeypatch):
    import fedeval.tables.limits

    monkeypatch.setattr(fedeval.tables.limits, "MIN_DECOMPRESSED_CAP", 10_000)
    monkeypatch.setattr(fedeval.tables.limits, "MAX_EXPANSION", 50)  # real CSV: 3-20x
    data = gzip.compress(b"score,label\n" + b"0.5,1\n0.25,0\n" * 100_000)  # 1.3 MB from ~4 kB
    write("bomb.csv.gz", data)
    msg = assert_clean_error(invoke("evaluate", "bomb.csv.gz", *FAST), names=("bomb.csv.gz",))
    assert "decompressed" in msg
    # a genuine compressed table well within the cap reads as usual
    write("ok.csv.gz", gzip.compress(good_csv().encode()))
    assert invoke("evaluate", "ok.csv.gz", *FAST, "-o", "r.json").exit_code == 0


def test_overlong_header_is_refused(workdir, monkeypatch):
    import fedeval.tables.limits

    monkeypatch.setattr(fedeval.tables.limits, "MAX_HEADER_BYTES", 1000)
    names = ",".join(f"column_{i}" for i in range(500))
    write("wide.csv", "score,label," + names + "\n0.5,1," + ",".join("0" * 500) + "\n")
    msg = assert_clean_error(invoke("evaluate", "wide.csv", *FAST), names=("wide.csv",))
    assert "header" in msg


def test_only_the_needed_csv_columns_are_read(workdir):
    from fedeval.tables.limits import open_csv

    write("t.csv", "a,score,b,label,c\n1,0.5,x,1,2020-01-01\n2,0.25,y,0,2020-01-02\n")
    names, reader = open_csv(Path("t.csv"), "t.csv", ["score", "label", "client"], ["score"])
    assert names == ["a", "score", "b", "label", "c"]
    batch = next(iter(reader))
    assert batch.schema.names == ["score", "label"]
    assert batch.column(0).type == pa.string()  # scores as text, parsed later row by row


@pytest.mark.parametrize("case", list(TABLES))
def test_malformed_table_under_partition_and_apply(workdir, case):
    name, build, _ = TABLES[case]
    write_map()
    write(name, build())
    for args in (
        ["partition", name, "--scheme", "iid", "-k", "2", "-o", "out.csv"],
        ["apply", "map.json", name, "-o", "out.csv"],
    ):
        result = invoke(*args)
        assert result.exit_code in (0, 2), (args, result.stderr, result.exception)
        if result.exit_code == 2:
            assert_clean_error(result)
            assert not Path("out.csv").exists()
        Path("out.csv").unlink(missing_ok=True)


def test_report_parts_that_escape_their_directory_are_refused(workdir):
    write("t.csv", good_csv(40))
    r = invoke("encode", "t.csv", "-m", "federated", "--min-cohort", "10", "-o", "reports")
    assert r.exit_code == 0, r.stderr
    manifest = json.loads(Path("reports/manifest.json").read_text())
    part = Path("reports") / manifest["parts"][0]["file"]
    Path("outside.parquet").write_bytes(part.read_bytes())  # the same bytes, outside the run
    for target in ("/dev/zero", str(Path("outside.parquet").resolve())):
        if not Path(target).exists():
            continue
        part.unlink()
        os.symlink(target, part)
        msg = assert_clean_error(invoke("aggregate", "reports", "-o", "run.fedeval"))
        assert "not a regular file inside" in msg
        assert not Path("run.fedeval").exists()


@pytest.mark.parametrize("command", ["encode", "evaluate"])
def test_a_score_range_far_wider_than_the_scores_spacing(workdir, command):
    # Mapped from [-2^45, 1], scores just below 1 round onto the top of the unit range (the
    # float spacing there is 2^-7): they must fall in the last leaf, not one past it (a crash,
    # exit 70, found by the fuzz profile).
    rows = "".join(f"{0.997 + 0.00004 * i:.5f},{i % 2},{i % 20}\n" for i in range(60))
    write("t.csv", "score,label,client\n" + rows)
    args = [command, "t.csv", "-m", "federated", "--height", "4"]
    args += [
        "--score-range",
        "-35184372088832.0,1.0",
        "-o",
        "out" if command == "encode" else "r.json",
    ]
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    if command == "evaluate":
        report = json.loads(Path("r.json").read_text())
        assert report["data"]["rows"] == 60
