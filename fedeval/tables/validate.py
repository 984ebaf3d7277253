"""Validating a batch of scored rows: scores finite (and in range), labels binary; each problem
one `InputError` naming the file, the column and the 1-based row."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fedeval.core.errors import InputError


@dataclass(frozen=True, eq=False)
class Batch:
    """One validated record batch: float scores (the source's width), boolean positives, the
    largest score, optional client ids."""

    scores: np.ndarray
    positive: np.ndarray
    score_max: float
    clients: pa.Array | None


def validate_batch(
    rb: pa.RecordBatch | pa.Table,
    name: str,
    score_col: str,
    label_col: str,
    client_col: str | None,
    *,
    offset: int = 0,
    score_range: tuple[float, float] = (0.0, 1.0),
    pos_label: object = None,
    labels_seen: dict[object, None] | None = None,
    text_scores: bool = False,
) -> Batch:
    """Check one batch and convert it; `offset` is the number of rows before it (for messages).

    `text_scores`: scores arrive as text (CSV) and are parsed here; a typed source with a string
    score column is refused instead, as a schema error.
    """
    lo, hi = score_range
    score = single_chunk(rb.column(score_col))
    if text_scores and (pa.types.is_string(score.type) or pa.types.is_large_string(score.type)):
        score = parse_numbers(score, f"'{name}', column '{score_col}'", offset)
    scores, score_max = parse_scores(score, name, score_col, offset, lo, hi)
    positive = positive_labels(
        single_chunk(rb.column(label_col)),
        name,
        label_col,
        offset,
        pos_label,
        {} if labels_seen is None else labels_seen,
    )
    clients = single_chunk(rb.column(client_col)) if client_col else None
    if clients is not None and client_col is not None:
        check_client_ids(clients, name, client_col, offset)
    return Batch(scores, positive, score_max, clients)


def check_client_ids(ids: pa.Array | pa.ChunkedArray, name: str, col: str, offset: int = 0) -> None:
    """Client ids are numbers or text (a list, struct or map cannot name a client) and none is
    missing; else one line naming file, column (and row), before anything is released.

    >>> check_client_ids(pa.array([[1.0]]), "t.parquet", "client")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedeval.core.errors.InputError: 't.parquet', column 'client': client ids must be numbers or...
    """
    value_type = ids.type.value_type if pa.types.is_dictionary(ids.type) else ids.type
    if pa.types.is_nested(value_type):
        raise InputError(
            f"'{name}', column '{col}': client ids must be numbers or text, found type {ids.type}."
        )
    if ids.null_count:
        arr = single_chunk(ids)
        row = offset + _first_true(arr.is_null()) + 1
        raise InputError(f"'{name}', column '{col}', row {row}: client id is missing.")


def single_chunk(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The column as one array: a column of one chunk (a Parquet row group's) is that chunk,
    not a copy of it (`combine_chunks` copies even one chunk: a pass over every column)."""
    if not isinstance(col, pa.ChunkedArray):
        return col
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def as_numpy(arr: pa.Array) -> np.ndarray:
    """A numeric or boolean array without nulls as numpy: the values
    `arr.to_numpy(zero_copy_only=False)` gives (a read-only view of a number array's data
    buffer; booleans unpacked), read from the buffers directly because pyarrow's conversion
    imports pandas on first use, a third of a second a short run does not need. Other arrays
    (nulls, other types) take pyarrow's conversion."""
    kind = (
        "f"
        if pa.types.is_floating(arr.type)
        else "i"
        if pa.types.is_signed_integer(arr.type)
        else "u"
        if pa.types.is_unsigned_integer(arr.type)
        else "b"
        if pa.types.is_boolean(arr.type)
        else ""
    )
    data = arr.buffers()[1] if kind and arr.null_count == 0 else None
    if data is None:
        converted: np.ndarray = arr.to_numpy(zero_copy_only=False)
        return converted
    n, start = len(arr), arr.offset
    if kind == "b":
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[start : start + n].astype(bool)
    dtype = np.dtype(f"<{kind}{arr.type.bit_width // 8}")
    return np.frombuffer(data, dtype, count=n, offset=start * dtype.itemsize)


def _first_true(mask: pa.Array | np.ndarray) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0])


def parse_scores(
    arr: pa.Array, name: str, col: str, offset: int, lo: float, hi: float
) -> tuple[np.ndarray, float]:
    """Validated scores as floats (float32 stays float32: exact, half the work) and their max."""
    where = f"'{name}', column '{col}'"
    if arr.null_count:
        raise InputError(
            f"{where}, row {offset + _first_true(arr.is_null()) + 1}: score is missing."
        )
    if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)):
        raise InputError(f"{where}: scores must be numbers, found type {arr.type}.")
    s = as_numpy(arr)
    if s.dtype.kind != "f" or s.dtype.itemsize < 4:
        s = s.astype(np.float64)
    # One min and one max pass; NaN makes both comparisons fail, so it lands in the slow path.
    s_min, s_max = s.min(), s.max()
    if not (s_min >= lo and s_max <= hi):
        bad = np.isnan(s)
        if bad.any():
            raise InputError(f"{where}, row {offset + _first_true(bad) + 1}: score is NaN.")
        i = _first_true((s < lo) | (s > hi))
        raise InputError(
            f"{where}, row {offset + i + 1}: score {float(s[i])!r} is outside the score range "
            f"[{lo:g}, {hi:g}]; pass `score_range` lo,hi if scores are not probabilities."
        )
    return s, float(s_max)


def parse_numbers(arr: pa.Array, where: str, offset: int) -> pa.Array:
    if arr.null_count:  # reported as missing by parse_scores, with its row
        return arr
    try:
        return pc.cast(pc.utf8_trim_whitespace(arr), pa.float64())
    except pa.ArrowInvalid:
        import pandas as pd  # only to find the row of a bad CSV value

        parsed = pd.to_numeric(pd.Series(arr.to_pylist()), errors="coerce")
        i = int(np.flatnonzero(parsed.isna().to_numpy())[0])
        raise InputError(
            f"{where}, row {offset + i + 1}: score {arr[i].as_py()!r} is not a number."
        ) from None


def positive_labels(
    arr: pa.Array, name: str, col: str, offset: int, pos_label: object, seen: dict[object, None]
) -> np.ndarray:
    where = f"'{name}', column '{col}'"
    if arr.null_count:
        raise InputError(
            f"{where}, row {offset + _first_true(arr.is_null()) + 1}: label is missing."
        )
    if pos_label is not None:
        for v in pc.unique(arr).to_pylist():
            seen.setdefault(v, None)  # a dict: insertion-ordered set
        if len(seen) > 2:
            first, second = list(seen)[:2]
            allowed = pa.array([first, second], type=arr.type)
            i = _first_true(pc.invert(pc.is_in(arr, value_set=allowed)))
            raise InputError(
                f"{where}, row {offset + i + 1}: label {arr[i].as_py()!r} is a third value; "
                f"labels must be binary (already seen {first!r} and {second!r})."
            )
        try:
            target = pa.scalar(pos_label).cast(arr.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InputError(
                f"{where}: `pos_label` {pos_label!r} cannot be compared with labels of type "
                f"{arr.type}."
            ) from e
        if len(seen) == 2 and target.as_py() not in seen:
            found = " and ".join(repr(v) for v in sorted(seen, key=str))
            raise InputError(
                f"{where}: the positive label {pos_label!r} is neither of the labels found, "
                f"{found} (compared exactly, case included).",
                file=name,
                column=col,
            )
        return as_numpy(pc.equal(arr, target))
    if pa.types.is_boolean(arr.type):
        return as_numpy(arr)
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        raise InputError(
            f"{where}: labels must be 0/1 or true/false, found type {arr.type}; "
            "pass `pos_label` VALUE to say which value is the positive class."
        )
    y = as_numpy(arr)
    if pa.types.is_integer(arr.type):
        ok = y.min() >= 0 and y.max() <= 1
    else:
        ok = bool(((y == 0) | (y == 1)).all())
    if not ok:
        i = _first_true((y != 0) & (y != 1))
        raise InputError(
            f"{where}, row {offset + i + 1}: label {y[i].item()!r} is not binary (expected 0/1 or "
            "true/false); pass `pos_label` VALUE for other codings."
        )
    positive: np.ndarray = y == 1
    return positive
