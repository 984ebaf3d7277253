"""Multiclass map documents: written and read back to the same calibrator, refused with a message
naming the file and the field when they are not valid, and applied to tables (Parquet, CSV,
stdout) without losing a column or leaving a partial file."""

from __future__ import annotations

import csv
import io
import json
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedeval.audit import all_keys
from fedeval.core.errors import InputError, UsageError
from fedeval.documents.map_file import load_map
from fedeval.multiclass import (
    apply_multiclass_map_file,
    calibrate_multiclass,
    load_multiclass_map,
    multiclass_map_dict,
    write_map,
)
from fedeval.multiclass.data import softmax

N, C = 3000, 4


def arrays(seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, C, N)
    z = 3.0 * np.eye(C)[y] + rng.normal(0, 1.5, (N, C))
    return y, z


@pytest.fixture(scope="module", params=["fedbbq", "fedtemp"])
def result(request):
    y, z = arrays()
    bins = {"bins": 16} if request.param == "fedbbq" else {}
    return calibrate_multiclass(
        y, logits=z, method=request.param, clients=10, beta=0.5, seed=0, **bins
    )


@pytest.fixture
def map_path(tmp_path, result):
    path = tmp_path / "map.json"
    write_map(multiclass_map_dict(result, source="x.parquet"), path)
    return path


def table_path(tmp_path, z, name="new.parquet", extra=True):
    cols = {f"logit_{j}": z[:, j] for j in range(C)}
    if extra:
        cols = {"id": np.arange(len(z))} | cols
    path = tmp_path / name
    if name.endswith(".parquet"):
        pq.write_table(pa.table(cols), path)
    else:
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            w.writerows(zip(*cols.values(), strict=True))
    return path


def load_error(path) -> str:
    with pytest.raises(InputError) as info:
        load_multiclass_map(path)
    return str(info.value)


def test_round_trip_gives_the_same_probabilities(map_path, result):
    m = load_multiclass_map(map_path)
    _, z = arrays(1)
    np.testing.assert_allclose(m(z), result.apply(z), rtol=1e-15, atol=1e-15)
    doc = json.loads(map_path.read_text())
    assert doc["schema"] == "fedeval.calibration-map/2" and doc["kind"] == "multiclass"
    assert doc["input"] == "logits" and doc["classes"] == C
    assert doc["privacy"]["epsilon"] is None
    assert "no differential privacy" in doc["privacy"]["guarantee"]


EXACT_KEYS = {"metrics", "before", "after", "accuracy_change", "cw_ece", "accuracy", "data"}
COUNT_KEYS = {"rows", "fit_rows", "eval_rows", "clients", "source"}


@pytest.mark.parametrize("method", ["fedbbq", "fedtemp"])
def test_unseeded_dp_map_has_no_seed_no_exact_metric_and_no_count(tmp_path, method):
    y, z = arrays()
    bins = {"bins": 16} if method == "fedbbq" else {}
    r = calibrate_multiclass(y, logits=z, method=method, clients=10, epsilon=1.0, **bins)
    report = multiclass_map_dict(r, source="secret-name.parquet")
    assert report["exact_values"] is True and "metrics" in report  # the simulation's report
    path = tmp_path / "dp.json"
    write_map(report, path)
    text = path.read_text()
    doc = json.loads(text)
    keys = all_keys(doc)
    assert "seed" not in keys and "seed" not in text
    assert not keys & EXACT_KEYS and not keys & COUNT_KEYS
    assert "secret-name" not in text
    assert doc["exact_values"] is False and doc["simulation"] is True
    assert (
        doc["privacy"] == r.mechanism.section() and doc["run"]["reproducible_simulation"] is False
    )
    assert doc["federation"]["rounds"] == r.rounds
    # What is left still applies: the same calibrator as the result's.
    np.testing.assert_allclose(load_multiclass_map(path)(z), r.apply(z), rtol=1e-15, atol=1e-15)


def test_seeded_dp_map_says_not_private_and_keeps_its_seed(tmp_path):
    y, z = arrays()
    r = calibrate_multiclass(y, logits=z, method="fedtemp", clients=10, epsilon=1.0, seed=7)
    path = tmp_path / "dp.json"
    write_map(multiclass_map_dict(r), path)
    doc = json.loads(path.read_text())
    assert doc["privacy"]["reproducible_simulation"] is True
    assert "reproducible simulation (--seed): NOT private" in doc["privacy"]["guarantee"]
    assert doc["run"] == {"path": "fast", "reproducible_simulation": True, "seed": 7}
    assert "metrics" not in doc


def test_map_without_dp_keeps_its_metrics(map_path, result):
    doc = json.loads(map_path.read_text())
    assert doc.pop("integrity")["sha256"]  # sealed on writing
    assert doc == multiclass_map_dict(result, source="x.parquet")
    assert doc["exact_values"] is True and doc["metrics"]["exact"] is True
    assert doc["privacy"]["dp_event"] == {"type": "none"}


def test_apply_to_parquet_adds_renormalised_columns(tmp_path, map_path, result):
    _, z = arrays(2)
    out = tmp_path / "out.parquet"
    rows = apply_multiclass_map_file(map_path, table_path(tmp_path, z), out)
    t = pq.read_table(out)
    assert rows == N
    assert t.column_names[: 1 + C] == ["id"] + [f"logit_{j}" for j in range(C)]
    cal = np.column_stack([t.column(f"cal_prob_{j}").to_numpy() for j in range(C)])
    np.testing.assert_allclose(cal, result.apply(z), rtol=1e-15)
    np.testing.assert_allclose(cal.sum(axis=1), 1.0, rtol=1e-12)


def test_apply_csv_to_stdout_keeps_cells_as_written(tmp_path, map_path, capsysbinary):
    _, z = arrays(3)
    src = table_path(tmp_path, z[:5], "new.csv")
    apply_multiclass_map_file(map_path, src)
    out = capsysbinary.readouterr().out.decode()
    lines = out.splitlines()
    assert lines[0].split(",")[: 1 + C] == src.read_text().splitlines()[0].split(",")
    assert lines[0].endswith(f"cal_prob_{C - 1}")
    original = src.read_text().splitlines()
    for a, b in zip(lines[1:], original[1:], strict=True):
        assert a.startswith(b + ",")


def test_apply_probabilities_map_reads_prob_columns(tmp_path):
    y, z = arrays()
    r = calibrate_multiclass(y, probs=softmax(z), method="fedbin", clients=5, seed=1, bins=8)
    path = tmp_path / "m.json"
    write_map(multiclass_map_dict(r), path)
    p = softmax(arrays(4)[1])
    src = tmp_path / "p.parquet"
    pq.write_table(pa.table({f"prob_{j}": p[:, j] for j in range(C)}), src)
    apply_multiclass_map_file(path, src, tmp_path / "o.csv")
    got = np.loadtxt(tmp_path / "o.csv", delimiter=",", skiprows=1)[:, C:]
    np.testing.assert_allclose(got, r.apply(p), rtol=1e-12)


def test_apply_needs_the_kind_of_columns_the_map_reads(tmp_path, map_path):
    src = tmp_path / "p.parquet"
    pq.write_table(pa.table({"prob_0": [0.5], "prob_1": [0.5]}), src)
    doc = json.loads(map_path.read_text())
    with pytest.raises(InputError, match="no logit columns 'logit_0'"):
        apply_multiclass_map_file(map_path, src, tmp_path / "o.csv")
    assert not (tmp_path / "o.csv").exists()
    assert doc["input"] == "logits"


def test_apply_with_the_wrong_number_of_classes(tmp_path, map_path):
    src = tmp_path / "z.parquet"
    pq.write_table(pa.table({f"logit_{j}": [0.1, 0.2] for j in range(C + 1)}), src)
    with pytest.raises(InputError, match=f"map '.*' calibrates {C} classes"):
        apply_multiclass_map_file(map_path, src, tmp_path / "o.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.json", "z.parquet"]


def test_apply_refuses_to_overwrite_a_column(tmp_path, map_path):
    _, z = arrays()
    src = tmp_path / "z.parquet"
    pq.write_table(
        pa.table({f"logit_{j}": z[:, j] for j in range(C)} | {"cal_prob_1": z[:, 0]}), src
    )
    with pytest.raises(UsageError, match="already has a column 'cal_prob_1'"):
        apply_multiclass_map_file(map_path, src, tmp_path / "o.parquet")


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_apply_streams_in_small_slices_with_the_same_output(
    tmp_path, map_path, monkeypatch, suffix
):
    # Memory is bounded by the slice, not the table: with slices of 7 values (1 row of 4
    # classes) every row still gets its calibrated values, and a bad row keeps its number.
    import fedeval.multiclass.data as data

    _, z = arrays(3)
    src = table_path(tmp_path, z, name=f"in{suffix}")
    whole = tmp_path / "whole.parquet"
    apply_multiclass_map_file(map_path, src, whole)
    seen = []
    parse = data.parse_batch

    def spy(rb, *a, **kw):
        seen.append(rb.num_rows)
        return parse(rb, *a, **kw)

    monkeypatch.setattr(data, "APPLY_CELLS", 7)
    monkeypatch.setattr(data, "parse_batch", spy)
    sliced = tmp_path / "sliced.parquet"
    assert apply_multiclass_map_file(map_path, src, sliced) == N
    assert max(seen) == 1 and sum(seen) == N
    assert pq.read_table(sliced).to_pandas().equals(pq.read_table(whole).to_pandas())
    bad = tmp_path / "bad.csv"
    bad.write_text("logit_0,logit_1,logit_2,logit_3\n1,2,3,4\n1,2,3,4\n1,nan,3,4\n")
    with pytest.raises(InputError, match=r"column 'logit_1', row 3: logit is NaN"):
        apply_multiclass_map_file(map_path, bad, tmp_path / "o.csv")


def test_apply_bad_row_names_file_column_row(tmp_path, map_path):
    src = tmp_path / "z.csv"
    src.write_text("logit_0,logit_1,logit_2,logit_3\n1,2,3,4\n1,nan,3,4\n")
    with pytest.raises(InputError, match=r"z.csv', column 'logit_1', row 2: logit is NaN"):
        apply_multiclass_map_file(map_path, src, tmp_path / "o.csv")
    assert not (tmp_path / "o.csv").exists()


def test_map_kind_lets_a_caller_pick_the_loader(tmp_path, map_path):
    from fedeval.multiclass import map_kind

    assert map_kind(map_path) == "multiclass"
    binary = tmp_path / "b.json"
    binary.write_text(json.dumps({"schema": "fedeval.calibration-map/1", "edges": [0, 1]}))
    assert map_kind(binary) == "binary"
    with pytest.raises(InputError, match="no such file"):
        map_kind(tmp_path / "none.json")


def test_binary_loader_refuses_a_multiclass_map(map_path):
    with pytest.raises(InputError, match="'multiclass' map cannot be applied to binary scores"):
        load_map(map_path)


def test_multiclass_loader_refuses_a_binary_map(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(
        json.dumps(
            {
                "schema": "fedeval.calibration-map/1",
                "kind": "binary",
                "edges": [0, 1],
                "values": [0],
            }
        )
    )
    msg = load_error(path)
    assert str(path) in msg and "'binary' calibration map, not a multiclass one" in msg


def test_corrupt_json(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"schema": "fedeval.calibration-map/1", ')
    assert "is not a calibration map: it is not valid JSON" in load_error(path)


def test_not_a_map(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"schema": "fedeval.report/1"}))
    assert "is a 'fedeval.report/1' document, not a calibration map" in load_error(path)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.pop("method"), "method"),
        (lambda d: d.update(method="platt"), "method"),
        (lambda d: d.update(input="scores"), "input"),
        (lambda d: d.update(classes=1), "classes"),
        (lambda d: d.pop("calibrator"), "calibrator"),
    ],
)
def test_invalid_fields_are_named(map_path, edit, field):
    doc = json.loads(map_path.read_text())
    doc.pop("integrity")  # edited by hand: a seal left in place would be refused first
    edit(doc)
    map_path.write_text(json.dumps(doc))
    msg = load_error(map_path)
    assert str(map_path) in msg and f"field '{field}'" in msg


def test_invalid_calibrator_values_are_named(map_path, result):
    doc = json.loads(map_path.read_text())
    doc.pop("integrity")
    if result.method.value == "fedtemp":
        doc["calibrator"]["temperature"] = -1.0
        field = "calibrator.temperature"
    else:
        doc["calibrator"]["values"][0] = doc["calibrator"]["values"][0][:-1]
        field = "calibrator.values"
    map_path.write_text(json.dumps(doc))
    assert f"field '{field}'" in load_error(map_path)


def test_an_edited_sealed_map_is_refused(map_path):
    doc = json.loads(map_path.read_text())
    doc["classes"] = doc["classes"] + 1
    map_path.write_text(json.dumps(doc))
    assert "integrity check failed" in load_error(map_path)


def test_map_dict_is_strict_json(result):
    text = json.dumps(multiclass_map_dict(result), allow_nan=False)
    assert '"kind": "multiclass"' in text


def test_stdin_source(tmp_path, map_path, monkeypatch, capsysbinary):
    _, z = arrays(5)
    text = table_path(tmp_path, z[:3], "s.csv").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    assert apply_multiclass_map_file(map_path, "-", tmp_path / "o.parquet") == 3
    assert pq.read_table(tmp_path / "o.parquet").num_rows == 3
