"""Multiclass input: prob/logit columns found by prefix, and every bad input refused with one
InputError that names the file, the column and the row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedeval.core.errors import InputError, UsageError
from fedeval.multiclass.data import (
    ColumnSpec,
    InputKind,
    multiclass_from_arrays,
    read_multiclass,
    softmax,
)


def table(n=6, c=3, seed=0, probs=True, logits=True) -> dict:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, c))
    p = softmax(z)
    cols: dict = {"label": np.arange(n) % c}
    if probs:
        cols |= {f"prob_{j}": p[:, j] for j in range(c)}
    if logits:
        cols |= {f"logit_{j}": z[:, j] for j in range(c)}
    return cols


def write(tmp_path, cols: dict, name="t.parquet"):
    path = tmp_path / name
    if name.endswith(".parquet"):
        pq.write_table(pa.table(cols), path)
    else:
        keys = list(cols)
        lines = [",".join(keys)]
        for i in range(len(cols[keys[0]])):
            lines.append(",".join(str(cols[k][i]) for k in keys))
        path.write_text("\n".join(lines) + "\n")
    return path


def error(path, **kw) -> str:
    with pytest.raises(InputError) as info:
        read_multiclass(path, **kw)
    return str(info.value)


def test_reads_both_kinds_and_renormalises(tmp_path):
    cols = table()
    path = write(tmp_path, cols)
    d = read_multiclass(path)
    assert d.rows == 6 and d.n_classes == 3
    np.testing.assert_array_equal(d.labels, cols["label"])
    np.testing.assert_allclose(d.probs.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(d.probabilities(), softmax(d.logits), rtol=1e-12)
    assert d.client is None


def test_csv_reads_the_same_as_parquet(tmp_path):
    cols = table()
    a = read_multiclass(write(tmp_path, cols))
    b = read_multiclass(write(tmp_path, cols, "t.csv"))
    np.testing.assert_allclose(a.probs, b.probs, rtol=1e-14)
    np.testing.assert_array_equal(a.labels, b.labels)


def test_logits_only_give_softmax_probabilities(tmp_path):
    d = read_multiclass(write(tmp_path, table(probs=False)))
    assert d.probs is None
    np.testing.assert_allclose(d.probabilities().sum(axis=1), 1.0)
    # log of the probabilities is a logit vector of the same softmax
    np.testing.assert_allclose(softmax(d.log_scores()), d.probabilities(), rtol=1e-12)


def test_client_column_is_encoded(tmp_path):
    cols = table() | {"site": ["a", "b", "a", "c", "b", "a"]}
    d = read_multiclass(write(tmp_path, cols), ColumnSpec(client="site"))
    assert d.n_clients == 3
    assert len(set(d.client[[0, 2, 5]])) == 1 and d.client[0] != d.client[1]


def test_client_ids_in_lists_are_refused_with_the_column(tmp_path):
    """A list cannot name a client: one line, not Arrow's failed cast (was exit 70)."""
    cols = table() | {"site": pa.array([[1.0]] * 6)}
    msg = error(write(tmp_path, cols), spec=ColumnSpec(client="site"))
    assert "t.parquet', column 'site': client ids must be numbers or text" in msg


def test_missing_label_column(tmp_path):
    cols = table()
    del cols["label"]
    msg = error(write(tmp_path, cols))
    assert "t.parquet" in msg and "no column 'label'" in msg


def test_missing_class_columns(tmp_path):
    cols = {"label": [0, 1], "score": [0.1, 0.2]}
    msg = error(write(tmp_path, cols))
    assert "neither probability columns 'prob_0'" in msg and "score" in msg


def test_needed_kind_missing(tmp_path):
    msg = error(write(tmp_path, table(logits=False)), need=InputKind.LOGITS)
    assert "no logit columns 'logit_0'" in msg


def test_gap_in_class_numbering(tmp_path):
    cols = table(logits=False)
    cols["prob_3"] = cols.pop("prob_2")
    msg = error(write(tmp_path, cols))
    assert "t.parquet" in msg and "missing: prob_2" in msg


def test_nan_probability_names_column_and_row(tmp_path):
    cols = table(logits=False)
    cols["prob_1"] = cols["prob_1"].copy()
    cols["prob_1"][4] = np.nan
    msg = error(write(tmp_path, cols))
    assert "'prob_1', row 5: probability is NaN" in msg and "t.parquet" in msg


def test_infinite_logit_names_column_and_row(tmp_path):
    cols = table(probs=False)
    cols["logit_2"] = cols["logit_2"].copy()
    cols["logit_2"][2] = np.inf
    msg = error(write(tmp_path, cols))
    assert "'logit_2', row 3: logit is infinite" in msg


def test_probability_outside_unit_interval(tmp_path):
    cols = table(logits=False)
    cols["prob_0"] = cols["prob_0"].copy()
    cols["prob_0"][1] = 1.5
    msg = error(write(tmp_path, cols))
    assert "'prob_0', row 2: probability 1.5 is outside [0, 1]" in msg


def test_probabilities_not_summing_to_one(tmp_path):
    cols = table(logits=False)
    cols["prob_0"] = cols["prob_0"] * 0.9
    msg = error(write(tmp_path, cols))
    assert "row 1: probabilities sum to" in msg and "'prob_0'..'prob_2'" in msg


def test_label_out_of_range_names_row(tmp_path):
    cols = table()
    cols["label"] = np.array([0, 1, 2, 3, 0, 1])
    msg = error(write(tmp_path, cols))
    assert "column 'label', row 4: label 3 is not a class index in 0..2" in msg


def test_fractional_label(tmp_path):
    cols = table()
    cols["label"] = np.array([0, 1, 2, 0.5, 0, 1])
    msg = error(write(tmp_path, cols))
    assert "row 4: label 0.5 is not a whole number" in msg


def test_missing_label_value(tmp_path):
    cols = table()
    cols["label"] = pa.array([0, 1, None, 0, 1, 2])
    msg = error(write(tmp_path, cols))
    assert "column 'label', row 3: label is missing" in msg


def test_csv_text_in_a_probability_column_names_row(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("label,prob_0,prob_1\n0,0.5,0.5\n1,abc,0.5\n")
    msg = error(path)
    assert str(path) in msg and "column 'prob_0', row 2: probability 'abc' is not a number" in msg


def test_empty_table(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("label,prob_0,prob_1\n")
    assert "has no rows" in error(path)


def test_missing_file(tmp_path):
    assert "no such file" in error(tmp_path / "nope.parquet")


def test_arrays_are_validated_like_files():
    y = np.array([0, 1, 2])
    p = np.full((3, 3), 1 / 3)
    d = multiclass_from_arrays(y, probs=p, client_ids=["a", "a", "b"])
    assert d.n_clients == 2
    with pytest.raises(InputError, match="label 5 is not a class index"):
        multiclass_from_arrays(np.array([0, 5, 1]), probs=p)
    with pytest.raises(UsageError, match="of one shape"):
        multiclass_from_arrays(y, probs=p, logits=np.zeros((3, 4)))
    with pytest.raises(UsageError, match="pass `probs`"):
        multiclass_from_arrays(y)
