"""Calibration map files: written and read back to the same map, refused with a precise message
when they are not maps, and applied to tables (Parquet, CSV, stdin/stdout) without losing a
column or leaving a partial file behind."""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fedeval.tables.read
from fedeval.api.calibrate import apply_map_file, calibrate
from fedeval.core.errors import InputError, UsageError
from fedeval.documents.map_file import SCHEMA, load_map, write_json
from fedeval.views.dicts import map_dict


def fitted(score_range=(0.0, 1.0), method="binning", seed=0):
    rng = np.random.default_rng(seed)
    n = 20_000
    s = rng.random(n)
    y = (rng.random(n) < s**2).astype(int)
    lo, hi = score_range
    return calibrate(
        y, lo + (hi - lo) * s, score_range=score_range, model="distdp", method=method, seed=seed
    )


@pytest.fixture(scope="module")
def result():
    return fitted()


@pytest.fixture
def map_path(tmp_path, result) -> Path:
    path = tmp_path / "map.json"
    write_json(map_dict(result, source="x"), path)
    return path


def load_error(path) -> str:
    with pytest.raises(InputError) as info:
        load_map(path)
    return str(info.value)


def files_in(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# --- write, read back, apply ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["binning", "bbq"])
@pytest.mark.parametrize("score_range", [(0.0, 1.0), (-5.0, 5.0)])
def test_map_round_trips(tmp_path, method, score_range):
    res = fitted(score_range, method)
    path = tmp_path / "m.json"
    write_json(map_dict(res, source="x"), path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA == "fedeval.calibration-map/2"
    assert (doc["kind"], doc["method"], doc["data"]["source"]) == ("binary", method, "x")
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]  # no temp file left

    m = load_map(path)
    assert m.score_range == score_range and m.method == method
    np.testing.assert_array_equal(m.values, res.map.values)
    lo, hi = score_range
    assert (m.edges[0], m.edges[-1]) == (lo, hi)
    rng = np.random.default_rng(1)
    scores = np.concatenate([[lo, hi], lo + (hi - lo) * rng.random(5000)])
    np.testing.assert_array_equal(m(scores), res.apply(scores))


# --- refusals -------------------------------------------------------------------------------------


def valid_doc(result) -> dict:
    return json.loads(json.dumps(map_dict(result, source="x")))


def write_doc(tmp_path: Path, doc) -> Path:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return path


def test_missing_file_and_directory(tmp_path):
    assert load_error(tmp_path / "nope.json") == (
        f"cannot read map '{tmp_path / 'nope.json'}': no such file."
    )
    assert "it is a directory" in load_error(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not a calibration map: it is not valid JSON"),
        ("", "is not a calibration map: it is not valid JSON"),
        ("[1, 2, 3]", "is not a calibration map: it has no 'schema' field"),
        ('{"edges": [0, 1], "values": [0.5]}', "it has no 'schema' field"),
        ('{"schema": 3}', "it has no 'schema' field"),
        (
            '{"schema": "fedeval.report/1"}',
            "is a 'fedeval.report/1' document, not a calibration map",
        ),
        (
            '{"schema": "fedeval.calibration-map/3"}',
            "was written by a newer fedeval (schema 'fedeval.calibration-map/3')",
        ),
        ('{"schema": "fedeval.calibration-map/one"}', "unknown schema version"),
        ('{"schema": "fedeval.calibration-map/1.1"}', "unknown schema version"),
    ],
)
def test_not_a_map(tmp_path, text, message):
    path = tmp_path / "m.json"
    path.write_text(text)
    msg = load_error(path)
    assert message in msg
    assert f"'{path}'" in msg  # every message names the file


def test_invalid_utf8_is_not_json(tmp_path):
    path = tmp_path / "m.json"
    path.write_bytes(b'{"schema": "\xff\xfe"}')
    assert "it is not UTF-8 text" in load_error(path)


def test_newer_version_asks_to_upgrade(tmp_path, result):
    doc = valid_doc(result) | {"schema": "fedeval.calibration-map/3"}
    msg = load_error(write_doc(tmp_path, doc))
    assert "newer fedeval" in msg and "Upgrade fedeval" in msg


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"edges": [0.0, 0.5, 1.0], "values": [0.2]}, "one more entry than 'values'"),
        ({"edges": [0.0, 1.0], "values": []}, "one more entry than 'values'"),
        ({"edges": [0.0, 1.0], "values": 0.5}, "one more entry than 'values'"),
        ({"edges": [0.0, 0.5, 1.0], "values": [0.6, 0.4]}, "'values' must be non-decreasing"),
        ({"edges": [0.0, 0.5, 1.0], "values": [0.2, 1.5]}, "probabilities in [0, 1]"),
        ({"edges": [0.0, 0.5, 1.0], "values": [-0.1, 0.5]}, "probabilities in [0, 1]"),
        ({"edges": [0.0, 0.6, 0.5, 1.0], "values": [0.1, 0.2, 0.3]}, "'edges' must be finite"),
        ({"edges": [0.0, "a", 1.0], "values": [0.1, 0.2]}, "must hold numbers"),
        ({"score_range": [1.0, 0.0]}, "'score_range' must be two finite numbers lo < hi"),
        ({"score_range": "wide"}, "must hold numbers"),
        ({"kind": "multiclass"}, "a 'multiclass' map cannot be applied to binary scores"),
    ],
)
def test_malformed_maps_are_refused(tmp_path, result, change, message):
    doc = valid_doc(result)
    for key, value in change.items():
        if value is None:
            del doc[key]
        else:
            doc[key] = value
    msg = load_error(write_doc(tmp_path, doc))
    assert message in msg, msg
    assert "is not a valid calibration map" in msg or "cannot be applied" in msg


@pytest.mark.parametrize("key", ["edges", "values", "score_range"])
def test_missing_field_is_refused(tmp_path, result, key):
    doc = valid_doc(result)
    del doc[key]
    assert "is not a valid calibration map" in load_error(write_doc(tmp_path, doc))


@pytest.mark.parametrize("key", ["edges", "values", "score_range"])
def test_missing_field_is_named(tmp_path, result, key):
    doc = valid_doc(result)
    del doc[key]
    assert f"field '{key}' is missing" in load_error(write_doc(tmp_path, doc))


@pytest.mark.parametrize(
    "token", ['"score_range": [0.0, Infinity]', '"score_range": [NaN, 1.0]', '"values": [NaN]']
)
def test_non_finite_numbers_are_refused(tmp_path, token):
    # Python's json module reads the non-standard tokens NaN and Infinity: they must not pass.
    path = tmp_path / "m.json"
    body = {
        "schema": SCHEMA,
        "edges": [0.0, 1.0],
        "values": [0.5],
        "score_range": [0.0, 1.0],
    }
    key = token.split(":")[0].strip('"')
    text = json.dumps({k: v for k, v in body.items() if k != key})
    path.write_text(text[:-1] + ", " + token + "}")
    msg = load_error(path)
    # refused as it is read: NaN and Infinity are not JSON numbers
    assert "it is not valid JSON" in msg
    assert ("NaN" if "NaN" in token else "Infinity") + " is not a JSON number" in msg


def test_a_minimal_hand_written_map_is_accepted(tmp_path):
    # Only schema, edges, values and score_range are needed; kind defaults to binary.
    path = write_doc(
        tmp_path,
        {"schema": SCHEMA, "edges": [0, 2, 10], "values": [0.1, 0.9], "score_range": [0, 10]},
    )
    m = load_map(path)
    np.testing.assert_array_equal(m(np.array([0.0, 1.9, 2.0, 10.0])), [0.1, 0.1, 0.9, 0.9])


# --- apply_map_file -------------------------------------------------------------------------------


def mixed_table(n: int = 300, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "score": pa.array(rng.random(n)),
            "label": pa.array(rng.integers(0, 2, n) == 1),
            "note": pa.array([None if i % 7 == 0 else f"row {i}" for i in range(n)]),
            "weight": pa.array(rng.random(n).astype(np.float32)),
        }
    )


def test_parquet_in_parquet_out(tmp_path, map_path, result):
    table = mixed_table()
    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.parquet"
    assert apply_map_file(map_path, src, out) == table.num_rows
    got = pq.read_table(out)
    assert got.column_names == [*table.column_names, "calibrated"]
    assert got.schema.field("calibrated").type == pa.float64()
    assert got.select(table.column_names).equals(table)  # every column as it was, types too
    scores = table["score"].to_numpy()
    np.testing.assert_array_equal(got["calibrated"].to_numpy(), result.apply(scores))
    np.testing.assert_array_equal(got["calibrated"].to_numpy(), load_map(map_path)(scores))
    assert files_in(tmp_path) == {"map.json", "in.parquet", "out.parquet"}


def test_output_column_name_and_score_column(tmp_path, map_path, result):
    table = pa.table({"p": [0.1, 0.7], "calibrated": ["x", "y"]})
    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.pq"
    apply_map_file(map_path, src, out, score_col="p", output_col="p_cal")
    got = pq.read_table(out)
    assert got.column_names == ["p", "calibrated", "p_cal"]
    np.testing.assert_array_equal(got["p_cal"].to_numpy(), result.apply(np.array([0.1, 0.7])))


def read_csv_text(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"))))


SIMPLE_CSV = 'score,label,who\n0.05,0,a\n0.5,1,b b\n0.97,1,"c, d"\n1,0,e\n'


def test_csv_in_csv_out(tmp_path, map_path, result):
    src = tmp_path / "in.csv"
    src.write_text(SIMPLE_CSV)
    out = tmp_path / "out.csv"
    assert apply_map_file(map_path, src, out) == 4
    rows = read_csv_text(out.read_bytes())
    original = read_csv_text(SIMPLE_CSV.encode())
    assert rows[0] == [*original[0], "calibrated"]
    assert [r[:-1] for r in rows[1:]] == original[1:]
    scores = np.array([float(r[0]) for r in original[1:]])
    np.testing.assert_array_equal([float(r[-1]) for r in rows[1:]], result.apply(scores))
    assert files_in(tmp_path) == {"map.json", "in.csv", "out.csv"}


TRICKY_CSV = (
    "id,score,label,when,amount\n"
    "007,0.50,1,2024-01-02,1.50\n"
    "010,0.250,0,2024-02-03,1e3\n"
    "123,1,1,2024-03-04,-0.0\n"
)


def test_csv_out_keeps_the_original_text_of_every_column(tmp_path, map_path):
    src = tmp_path / "in.csv"
    src.write_text(TRICKY_CSV)
    out = tmp_path / "out.csv"
    apply_map_file(map_path, src, out)
    rows = read_csv_text(out.read_bytes())
    assert [r[:-1] for r in rows] == read_csv_text(TRICKY_CSV.encode())


class FakeStream:
    """Stands in for sys.stdin / sys.stdout: the code reads and writes `.buffer`."""

    def __init__(self, data: bytes = b""):
        self.buffer = io.BytesIO(data)


def test_csv_through_stdin_and_stdout(monkeypatch, map_path, result):
    stdin, stdout = FakeStream(SIMPLE_CSV.encode()), FakeStream()
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    assert apply_map_file(map_path, "-", None) == 4
    assert not stdout.buffer.closed  # the writer must not close stdout
    rows = read_csv_text(stdout.buffer.getvalue())
    original = read_csv_text(SIMPLE_CSV.encode())
    assert rows[0] == [*original[0], "calibrated"]
    assert [r[:-1] for r in rows[1:]] == original[1:]
    scores = np.array([float(r[0]) for r in original[1:]])
    np.testing.assert_array_equal([float(r[-1]) for r in rows[1:]], result.apply(scores))
    # '-' as output is stdout too.
    stdin2, stdout2 = FakeStream(SIMPLE_CSV.encode()), FakeStream()
    monkeypatch.setattr(sys, "stdin", stdin2)
    monkeypatch.setattr(sys, "stdout", stdout2)
    apply_map_file(map_path, "-", "-")
    assert stdout2.buffer.getvalue() == stdout.buffer.getvalue()


def test_own_units_score_range(tmp_path):
    res = fitted((-5.0, 5.0))
    path = tmp_path / "m.json"
    write_json(map_dict(res), path)
    src = tmp_path / "in.parquet"
    scores = np.array([-5.0, -1.25, 0.0, 3.3, 5.0])
    pq.write_table(pa.table({"score": scores}), src)
    apply_map_file(path, src, tmp_path / "out.parquet")
    got = pq.read_table(tmp_path / "out.parquet")["calibrated"].to_numpy()
    np.testing.assert_array_equal(got, res.apply(scores))
    pq.write_table(pa.table({"score": [0.0, 5.5]}), src)
    with pytest.raises(InputError, match=r"row 2: score 5\.5 is outside the score range \[-5, 5\]"):
        apply_map_file(path, src, tmp_path / "bad.parquet")
    assert not (tmp_path / "bad.parquet").exists()


# --- failures leave nothing behind ----------------------------------------------------------------


@pytest.fixture
def small_batches(monkeypatch):
    """Read in batches of 10 rows, so a fault can come after output has been written."""
    monkeypatch.setattr(
        fedeval.tables.read,
        "read_with_scores",
        functools.partial(fedeval.tables.read.read_with_scores, batch_rows=10),
    )


def assert_no_output(directory: Path, before: set[str]) -> None:
    assert files_in(directory) == before  # neither the output nor a temporary file


@pytest.mark.parametrize("out_name", ["out.csv", "out.parquet"])
def test_existing_output_column_is_refused(tmp_path, map_path, out_name):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"score": [0.2, 0.4], "calibrated": [1.0, 2.0]}), src)
    before = files_in(tmp_path)
    with pytest.raises(UsageError, match="already has a column 'calibrated'"):
        apply_map_file(map_path, src, tmp_path / out_name)
    assert_no_output(tmp_path, before)


@pytest.mark.parametrize("out_name", ["out.csv", "out.parquet"])
def test_score_out_of_range_mid_stream_leaves_no_file(tmp_path, map_path, small_batches, out_name):
    scores = np.linspace(0.0, 1.0, 35)
    scores[26] = 1.5  # row 27, in the third batch: two batches are written before it
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"score": scores, "n": np.arange(35)}), src)
    before = files_in(tmp_path)
    with pytest.raises(InputError) as info:
        apply_map_file(map_path, src, tmp_path / out_name)
    assert f"'{src}', column 'score', row 27: score 1.5 is outside the score range [0, 1]" in str(
        info.value
    )
    assert_no_output(tmp_path, before)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("score,label\n0.1,0\nabc,1\n", "row 2: score 'abc' is not a number"),
        ("score,label\n0.1,0\n,1\n", "row 2: score is missing"),
        ("label\n1\n", "has no column 'score'"),
        ("score,label\n", "has no rows"),
        ("", "is empty"),
    ],
)
def test_bad_csv_leaves_no_file(tmp_path, map_path, text, message):
    src = tmp_path / "in.csv"
    src.write_text(text)
    before = files_in(tmp_path)
    with pytest.raises(InputError, match=message.replace("'", ".")):
        apply_map_file(map_path, src, tmp_path / "out.csv")
    assert_no_output(tmp_path, before)


def test_nan_score_leaves_no_file(tmp_path, map_path):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"score": [0.1, 0.2, np.nan]}), src)
    before = files_in(tmp_path)
    with pytest.raises(InputError, match="column 'score', row 3: score is NaN"):
        apply_map_file(map_path, src, tmp_path / "out.parquet")
    assert_no_output(tmp_path, before)


def test_bad_map_or_missing_input_leaves_no_file(tmp_path, map_path):
    src = tmp_path / "in.csv"
    src.write_text(SIMPLE_CSV)
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "fedeval.report/1"}))
    before = files_in(tmp_path)
    with pytest.raises(InputError, match="not a calibration map"):
        apply_map_file(report, src, tmp_path / "out.csv")
    with pytest.raises(InputError, match="no such file"):
        apply_map_file(map_path, tmp_path / "missing.csv", tmp_path / "out.csv")
    assert_no_output(tmp_path, before)


def test_unwritable_output_is_a_usage_error(tmp_path, map_path):
    src = tmp_path / "in.csv"
    src.write_text(SIMPLE_CSV)
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(UsageError, match="cannot write"):
        apply_map_file(map_path, src, tmp_path / "dir.csv")


def test_stdout_stream_is_not_a_file(monkeypatch, tmp_path, map_path):
    # With output None nothing is created in the working directory.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", FakeStream(SIMPLE_CSV.encode()))
    out = FakeStream()
    monkeypatch.setattr(sys, "stdout", out)
    before = files_in(tmp_path)
    apply_map_file(map_path, "-", None)
    assert files_in(tmp_path) == before
    assert read_csv_text(out.buffer.getvalue())[0] == ["score", "label", "who", "calibrated"]
