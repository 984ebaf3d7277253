"""Reading and validating scored tables: every bad input is one InputError naming the file, the
column and (when one row is to blame) the 1-based data row; atomic output files."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedeval.api.evaluate import evaluate
from fedeval.core.errors import InputError
from fedeval.tables.read import DEFAULT_COLUMNS, Columns, read_batches
from fedeval.tables.scored import read_scored
from fedeval.tables.write import atomic_output

N = 35
BAD_ROW = 27  # 1-based; with batch_rows=10 it lies in the third batch


def _scores(n: int = N) -> np.ndarray:
    return np.linspace(0.0, 1.0, n)


def _labels(n: int = N) -> np.ndarray:
    return np.arange(n) % 2


def write_parquet(path: Path, **columns) -> Path:
    """A one-row-group Parquet file (so batching is done by read_batches, not by row groups)."""
    pq.write_table(pa.table(columns), path)
    return path


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def read_all(source, columns: Columns = DEFAULT_COLUMNS, **kw) -> list:
    return list(read_batches(source, columns, **kw))


def raises_input_error(fn, *args, **kw) -> str:
    """Run fn, expect exactly an InputError, and return its message."""
    with pytest.raises(InputError) as info:
        fn(*args, **kw)
    return str(info.value)


def with_bad(values: list, i: int, bad) -> list:
    out = list(values)
    out[i - 1] = bad
    return out


# --- a valid table: the baseline the faults are measured against --------------------------------


def test_valid_table_streams_in_batches_of_batch_rows(tmp_path):
    path = write_parquet(tmp_path / "ok.parquet", score=_scores(), label=_labels())
    batches = read_all(path, batch_rows=10)
    assert [len(b.scores) for b in batches] == [10, 10, 10, 5]
    scores = np.concatenate([b.scores for b in batches])
    positive = np.concatenate([b.positive for b in batches])
    assert scores.dtype == np.float64
    np.testing.assert_array_equal(scores, _scores())
    np.testing.assert_array_equal(positive, _labels() == 1)
    assert all(b.clients is None for b in batches)


def test_read_scored_counts_rows_classes_and_clients(tmp_path):
    path = write_parquet(
        tmp_path / "ok.parquet", score=_scores(), label=_labels(), client=np.arange(N) % 4
    )
    data = read_scored(path)
    assert data.rows == N
    assert data.positives == int(_labels().sum())
    assert data.negatives == N - int(_labels().sum())
    assert data.n_clients == 4


def test_no_client_column_means_one_client_per_row(tmp_path):
    path = write_parquet(tmp_path / "ok.parquet", score=_scores(), label=_labels())
    assert read_scored(path).n_clients == N


# --- unreadable sources -----------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.parquet"
    msg = raises_input_error(read_all, path)
    assert f"'{path}'" in msg
    assert "no such file" in msg


def test_directory(tmp_path):
    msg = raises_input_error(read_all, tmp_path)
    assert f"'{tmp_path}'" in msg
    assert "is a directory" in msg


def test_not_parquet_but_named_parquet(tmp_path):
    path = write_csv(tmp_path / "fake.parquet", "score,label\n0.1,0\n0.9,1\n")
    msg = raises_input_error(read_all, path)
    assert f"cannot read '{path}' as Parquet" in msg


def test_empty_parquet_has_no_rows(tmp_path):
    path = write_parquet(
        tmp_path / "empty.parquet",
        score=pa.array([], pa.float64()),
        label=pa.array([], pa.int64()),
    )
    msg = raises_input_error(read_all, path)
    assert f"'{path}' has no rows" in msg


def test_empty_csv_file(tmp_path):
    path = write_csv(tmp_path / "empty.csv", "")
    msg = raises_input_error(read_all, path)
    assert f"'{path}' is empty" in msg


def test_csv_with_header_only_says_no_rows(tmp_path):
    path = write_csv(tmp_path / "header.csv", "score,label\n")
    msg = raises_input_error(read_all, path)
    assert f"'{path}'" in msg
    assert "has no rows" in msg


# --- missing columns --------------------------------------------------------------------------


def test_missing_score_column(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", prob=_scores(), label=_labels())
    msg = raises_input_error(read_all, path)
    assert f"'{path}' has no column 'score'" in msg
    assert "it has: prob, label" in msg
    assert "`score_col`" in msg


def test_missing_label_column(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), target=_labels())
    msg = raises_input_error(read_all, path)
    assert f"'{path}' has no column 'label'" in msg
    assert "it has: score, target" in msg
    assert "`label_col`" in msg


def test_renamed_columns_are_used(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", prob=_scores(), target=_labels())
    data = read_scored(path, Columns(score="prob", label="target"))
    assert data.rows == N
    assert data.positives == int(_labels().sum())


@pytest.mark.parametrize("sep", [";", "\t"])
def test_csv_with_another_separator_says_so(tmp_path, sep):
    path = write_csv(tmp_path / "t.csv", f"score{sep}label\n0.1{sep}0\n0.9{sep}1\n")
    msg = raises_input_error(read_all, path)
    assert f"'{path}' has no column 'score'" in msg
    assert f"The header looks {sep!r}-separated" in msg
    assert "\n" not in msg


def test_client_col_naming_a_missing_column(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_labels())
    msg = raises_input_error(read_all, path, Columns(client="hospital"))
    assert f"'{path}' has no column 'hospital'" in msg
    assert "`client_col`" in msg


def test_csv_missing_score_column(tmp_path):
    path = write_csv(tmp_path / "t.csv", "prob,label\n0.1,0\n0.9,1\n")
    msg = raises_input_error(read_all, path)
    assert f"'{path}' has no column 'score'" in msg
    assert "`score_col`" in msg


# --- scores -----------------------------------------------------------------------------------


def test_null_score_names_the_row(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet",
        score=pa.array(with_bad(_scores().tolist(), 5, None), pa.float64()),
        label=_labels(),
    )
    msg = raises_input_error(read_all, path)
    assert msg == f"'{path}', column 'score', row 5: score is missing."


def test_nan_score_names_the_row(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet",
        score=pa.array(with_bad(_scores().tolist(), 8, math.nan), pa.float64()),
        label=_labels(),
    )
    msg = raises_input_error(read_all, path)
    assert msg == f"'{path}', column 'score', row 8: score is NaN."


def test_score_outside_range_names_row_and_value(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet", score=with_bad(_scores().tolist(), 3, 1.5), label=_labels()
    )
    msg = raises_input_error(read_all, path)
    assert msg.startswith(f"'{path}', column 'score', row 3: score ")
    assert re.search(r"\b1\.5\b", msg)
    assert "outside the score range [0, 1]" in msg
    assert "`score_range`" in msg


def test_negative_score_outside_range(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet", score=with_bad(_scores().tolist(), 2, -0.25), label=_labels()
    )
    msg = raises_input_error(read_all, path)
    assert f"'{path}', column 'score', row 2:" in msg
    assert "-0.25" in msg


def test_score_outside_unit_range_accepted_with_score_range(tmp_path):
    scores = with_bad(_scores().tolist(), 3, 1.5)
    path = write_parquet(tmp_path / "t.parquet", score=scores, label=_labels())
    batches = read_all(path, score_range=(0.0, 2.0))
    np.testing.assert_array_equal(np.concatenate([b.scores for b in batches]), scores)
    data = read_scored(path, score_range=(0.0, 2.0))
    assert data.rows == N
    np.testing.assert_allclose(data.to_unit([0.0, 1.0, 2.0]), [0.0, 0.5, 1.0])


def test_score_range_is_enforced_with_its_own_bounds(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet", score=with_bad(_scores().tolist(), 4, 3.0), label=_labels()
    )
    msg = raises_input_error(read_all, path, score_range=(-1.0, 2.0))
    assert f"'{path}', column 'score', row 4:" in msg
    assert "outside the score range [-1, 2]" in msg


def test_integer_scores_accepted(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet",
        score=pa.array(np.arange(N) % 3, pa.int32()),
        label=_labels(),
    )
    (batch,) = read_all(path, score_range=(0.0, 2.0))
    assert batch.scores.dtype == np.float64
    np.testing.assert_array_equal(batch.scores, (np.arange(N) % 3).astype(float))


def test_string_score_column_refused(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=[str(s) for s in _scores()], label=_labels())
    msg = raises_input_error(read_all, path)
    assert f"'{path}', column 'score'" in msg
    assert "scores must be numbers" in msg
    assert "string" in msg


def test_csv_non_numeric_score_names_the_row(tmp_path):
    rows = "".join(f"{s},{y}\n" for s, y in zip(_scores(), _labels(), strict=True))
    path = write_csv(tmp_path / "t.csv", "score,label\n" + rows + "abc,0\n")
    msg = raises_input_error(read_all, path)
    assert f"'{path}', column 'score', row {N + 1}: score 'abc' is not a number" in msg


def test_csv_rows_do_not_count_the_header(tmp_path):
    path = write_csv(tmp_path / "t.csv", "score,label\n0.1,0\n0.2,1\n7,0\n0.4,1\n")
    msg = raises_input_error(read_all, path)
    assert f"'{path}', column 'score', row 3:" in msg
    assert "outside the score range" in msg


def test_csv_valid_file_is_read(tmp_path):
    path = write_csv(tmp_path / "t.csv", "score,label,client\n0.1,0,a\n0.2,1,b\n0.9,1,a\n")
    data = read_scored(path)
    assert (data.rows, data.positives, data.negatives, data.n_clients) == (3, 2, 1, 2)


# --- labels -----------------------------------------------------------------------------------


def test_label_two_names_the_row(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet", score=_scores(), label=with_bad(_labels().tolist(), 6, 2)
    )
    msg = raises_input_error(read_all, path)
    assert msg.startswith(f"'{path}', column 'label', row 6: label ")
    assert re.search(r"\b2\b", msg.split("row 6:")[1])
    assert "is not binary" in msg
    assert "`pos_label`" in msg


def test_float_label_half_names_the_row(tmp_path):
    labels = with_bad(_labels().astype(float).tolist(), 9, 0.5)
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=labels)
    msg = raises_input_error(read_all, path)
    assert msg.startswith(f"'{path}', column 'label', row 9: label ")
    assert "0.5" in msg
    assert "is not binary" in msg


def test_float_labels_zero_one_accepted(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_labels().astype(float))
    (batch,) = read_all(path)
    np.testing.assert_array_equal(batch.positive, _labels() == 1)


def test_bool_labels_accepted(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_labels() == 1)
    (batch,) = read_all(path)
    assert batch.positive.dtype == np.bool_
    np.testing.assert_array_equal(batch.positive, _labels() == 1)


def _yes_no(n: int = N) -> list[str]:
    return ["yes" if y else "no" for y in _labels(n)]


def test_string_labels_refused_without_pos_label(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_yes_no())
    msg = raises_input_error(read_all, path)
    assert f"'{path}', column 'label'" in msg
    assert "labels must be 0/1 or true/false" in msg
    assert "`pos_label`" in msg


def test_string_labels_accepted_with_pos_label(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_yes_no())
    (batch,) = read_all(path, pos_label="yes")
    np.testing.assert_array_equal(batch.positive, _labels() == 1)
    (batch,) = read_all(path, pos_label="no")
    np.testing.assert_array_equal(batch.positive, _labels() == 0)


def test_more_than_two_label_values_with_pos_label_refused(tmp_path):
    labels = with_bad(_yes_no(), 4, "maybe")
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=labels)
    msg = raises_input_error(read_all, path, pos_label="yes")
    assert f"'{path}', column 'label', row 4: label 'maybe' is a third value" in msg
    assert "labels must be binary" in msg


def test_third_label_value_in_a_later_batch_refused(tmp_path):
    labels = with_bad(_yes_no(), BAD_ROW, "maybe")
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=labels)
    msg = raises_input_error(read_all, path, pos_label="yes", batch_rows=10)
    assert f"row {BAD_ROW}: label 'maybe' is a third value" in msg


def test_pos_label_of_the_wrong_type_refused(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_labels())
    msg = raises_input_error(read_all, path, pos_label="yes")
    assert f"'{path}', column 'label'" in msg
    assert "`pos_label` 'yes' cannot be compared" in msg


def test_integer_labels_with_string_pos_label(tmp_path):
    """The CLI always passes --pos-label as a string: '0' must work on integer labels."""
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_labels())
    (batch,) = read_all(path, pos_label="0")
    np.testing.assert_array_equal(batch.positive, _labels() == 0)


def test_null_label_names_the_row(tmp_path):
    labels = pa.array(with_bad(_labels().tolist(), 11, None), pa.int64())
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=labels)
    msg = raises_input_error(read_all, path)
    assert msg == f"'{path}', column 'label', row 11: label is missing."


def test_null_client_id_names_the_row(tmp_path):
    clients = pa.array(with_bad([f"c{i % 3}" for i in range(N)], 12, None), pa.string())
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_labels(), client=clients)
    msg = raises_input_error(read_all, path)
    assert msg == f"'{path}', column 'client', row 12: client id is missing."


def test_null_client_id_in_named_client_column(tmp_path):
    clients = pa.array(with_bad(list(range(N)), 2, None), pa.int64())
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=_labels(), site=clients)
    msg = raises_input_error(read_all, path, Columns(client="site"))
    assert msg == f"'{path}', column 'site', row 2: client id is missing."


# --- row numbers across record batches -------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "bad", "expected"),
    [
        ("score", 1.5, "outside the score range"),
        ("score", None, "score is missing"),
        ("score", math.nan, "score is NaN"),
        ("label", 2, "is not binary"),
        ("label", None, "label is missing"),
        ("client", None, "client id is missing"),
    ],
)
def test_row_numbers_are_correct_across_batches(tmp_path, column, bad, expected):
    cols = {
        "score": pa.array(_scores().tolist(), pa.float64()),
        "label": pa.array(_labels().tolist(), pa.int64()),
        "client": pa.array([i % 5 for i in range(N)], pa.int64()),
    }
    cols[column] = pa.array(with_bad(cols[column].to_pylist(), BAD_ROW, bad), cols[column].type)
    path = write_parquet(tmp_path / "t.parquet", **cols)
    msg = raises_input_error(read_all, path, batch_rows=10)
    assert f"'{path}', column '{column}', row {BAD_ROW}:" in msg
    assert expected in msg


def test_bad_row_in_first_row_of_a_later_batch(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet", score=with_bad(_scores().tolist(), 21, 9.0), label=_labels()
    )
    msg = raises_input_error(read_all, path, batch_rows=10)
    assert "row 21:" in msg


# --- in-memory arrays (fedeval.evaluate) ----------------------------------------------------------


def test_evaluate_arrays_of_different_lengths():
    msg = raises_input_error(evaluate, [0, 1, 0], [0.1, 0.2], seed=0)
    assert "equal length" in msg
    assert "(3,)" in msg
    assert "(2,)" in msg


def test_evaluate_client_ids_of_wrong_length():
    msg = raises_input_error(evaluate, [0, 1, 0], [0.1, 0.2, 0.3], client_ids=[1, 2], seed=0)
    assert "client_ids" in msg
    assert "(3,)" in msg


def test_evaluate_empty_arrays():
    msg = raises_input_error(evaluate, [], [], seed=0)
    assert "empty" in msg


def test_evaluate_one_class_labels_no_positive():
    msg = raises_input_error(evaluate, [0, 0, 0, 0], [0.1, 0.4, 0.6, 0.9], seed=0)
    assert "no positive example" in msg


def test_evaluate_one_class_labels_no_negative():
    msg = raises_input_error(evaluate, [1, 1, 1], [0.1, 0.4, 0.9], seed=0)
    assert "no negative example" in msg


def test_evaluate_one_class_file(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", score=_scores(), label=np.zeros(N, np.int64))
    from fedeval.api.evaluate import evaluate_file

    msg = raises_input_error(evaluate_file, path, seed=0)
    assert f"'{path}', column 'label': the labels hold no positive example" in msg


def test_evaluate_arrays_name_the_row():
    msg = raises_input_error(evaluate, [0, 1, 1], [0.1, 0.2, 1.2], seed=0)
    assert "'<arrays>', column 'score', row 3:" in msg
    msg = raises_input_error(evaluate, [0, 1, 2], [0.1, 0.2, 0.3], seed=0)
    assert "'<arrays>', column 'label', row 3:" in msg


def test_evaluate_arrays_bool_and_string_labels():
    scores = [0.1, 0.4, 0.35, 0.8]
    a = evaluate([False, False, True, True], scores, model="federated", seed=0)
    b = evaluate(["no", "no", "yes", "yes"], scores, model="federated", pos_label="yes", seed=0)
    assert a.auc.exact == pytest.approx(0.75)
    assert b.auc.exact == pytest.approx(0.75)
    msg = raises_input_error(evaluate, ["no", "no", "yes", "yes"], scores, seed=0)
    assert "labels must be 0/1 or true/false" in msg


def test_evaluate_string_scores_refused():
    msg = raises_input_error(evaluate, [0, 1, 1], ["a", "b", "c"], seed=0)
    assert "'<arrays>', column 'score'" in msg
    assert "scores must be numbers" in msg


# --- atomic_output ----------------------------------------------------------------------------


def test_atomic_output_success_writes_content(tmp_path):
    target = tmp_path / "report.json"
    with atomic_output(target) as f:
        f.write('{"ok": true}\n')
        assert not target.exists()  # nothing visible until the block succeeds
    assert target.read_text() == '{"ok": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_atomic_output_exception_leaves_nothing(tmp_path):
    target = tmp_path / "report.json"
    with pytest.raises(RuntimeError, match="boom"), atomic_output(target) as f:
        f.write("partial")
        raise RuntimeError("boom")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []
    assert list(tmp_path.glob(".report.json.*.tmp")) == []


def test_atomic_output_exception_keeps_existing_target(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), atomic_output(target) as f:
        f.write("new")
        raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_atomic_output_replaces_existing_target_and_creates_parents(tmp_path):
    target = tmp_path / "out" / "sub" / "report.json"
    with atomic_output(target) as f:
        f.write("first")
    with atomic_output(target) as f:
        f.write("second")
    assert target.read_text() == "second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_atomic_output_binary_mode(tmp_path):
    target = tmp_path / "blob.bin"
    with atomic_output(target, "wb") as f:
        f.write(b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"


def test_bad_values_are_shown_as_plain_numbers(tmp_path):
    path = write_parquet(
        tmp_path / "t.parquet", score=with_bad(_scores().tolist(), 3, 1.5), label=_labels()
    )
    assert "row 3: score 1.5 is outside" in raises_input_error(read_all, path)


def test_csv_missing_column_hint_lists_the_files_columns(tmp_path):
    path = write_csv(tmp_path / "t.csv", "prob,label\n0.1,0\n0.9,1\n")
    assert "it has: prob, label" in raises_input_error(read_all, path)


def test_atomic_output_file_has_ordinary_permissions(tmp_path):
    import os

    umask = os.umask(0o022)
    try:
        with atomic_output(tmp_path / "report.json") as f:
            f.write("{}")
    finally:
        os.umask(umask)
    assert (tmp_path / "report.json").stat().st_mode & 0o777 == 0o644


def test_csv_empty_string_client_id_is_missing(tmp_path):
    path = write_csv(tmp_path / "t.csv", "score,label,client\n0.1,0,a\n0.2,1,\n0.9,1,b\n")
    msg = raises_input_error(read_all, path)
    assert "column 'client', row 2: client id is missing" in msg


def test_csv_empty_integer_client_id_is_missing(tmp_path):
    path = write_csv(tmp_path / "t.csv", "score,label,client\n0.1,0,1\n0.2,1,\n0.9,1,2\n")
    msg = raises_input_error(read_all, path)
    assert msg == f"'{path}', column 'client', row 2: client id is missing."


@pytest.mark.parametrize(
    "kw", [{"label": "score"}, {"client": "label"}, {"score": "x", "label": "y", "client": "x"}]
)
def test_one_column_for_two_roles_is_refused(kw):
    from fedeval.core.errors import UsageError

    with pytest.raises(UsageError, match="must name different columns"):
        Columns(**kw)


def test_a_score_column_named_client_is_not_also_the_client_column(tmp_path):
    # The implicit client column is "client" unless that name already holds the scores.
    path = tmp_path / "t.csv"
    path.write_text("client,label\n0.2,0\n0.4,1\n0.6,0\n0.8,1\n")
    data = read_scored(path, Columns(score="client"), keep_examples=True)
    assert data.examples is not None and data.n_clients == 4  # every row its own client


def test_a_failed_write_leaves_no_directory_it_made(tmp_path):
    target = tmp_path / "a" / "b" / "out.csv"
    with pytest.raises(RuntimeError), atomic_output(target) as f:
        f.write("partial")
        raise RuntimeError("the run failed")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()
    with pytest.raises(RuntimeError), atomic_output(tmp_path / "kept" / "x.csv") as f:
        raise RuntimeError("the run failed")
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]  # not made by the write: kept


def _big_groups_file(path, groups: int = 5, rows: int = 3000):
    rng = np.random.default_rng(3)
    n = groups * rows
    t = pa.table({"score": rng.random(n), "label": (rng.random(n) < 0.3).astype(np.int8)})
    pq.write_table(t, path, row_group_size=rows)
    return t


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_large_row_groups_read_several_at_once_give_the_same_batches(tmp_path, threads):
    """Row groups over `batch_rows` are streamed, several at a time in threads: the same
    batches, offsets and rows, in file order, as one reader."""
    from fedeval.tables.read import scan

    t = _big_groups_file(tmp_path / "big.parquet")
    one = list(scan(tmp_path / "big.parquet", batch_rows=1000))
    many = list(scan(tmp_path / "big.parquet", batch_rows=1000, threads=threads))
    assert [(p.offset, p.rows) for p in one] == [(p.offset, p.rows) for p in many]
    assert len(many) == 15 and sum(p.rows for p in many) == t.num_rows
    for a, b in zip(one, many, strict=True):
        assert a.table().equals(b.table())


def test_stopping_early_ends_the_row_group_readers(tmp_path):
    import threading

    from fedeval.tables.read import scan

    _big_groups_file(tmp_path / "big.parquet", groups=6)
    pieces = scan(tmp_path / "big.parquet", batch_rows=500, threads=4)
    first = [next(pieces) for _ in range(3)]
    pieces.close()
    assert sum(p.rows for p in first) == 1500
    assert not [t for t in threading.enumerate() if t.name == "fedeval-row-group"]
