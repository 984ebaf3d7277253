"""Reading and validating scored tables, streamed in record batches; atomic output files.

Every problem with the input becomes one `InputError` that names the file, the column and, where
one row is to blame, the row (1-based, not counting a CSV header).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from fedeval.errors import InputError

BATCH_ROWS = 1 << 20
STDIN = "-"


@dataclass(frozen=True)
class Columns:
    """Which columns hold what. `client=None` means: use a column named "client" if present."""

    score: str = "score"
    label: str = "label"
    client: str | None = None


DEFAULT_COLUMNS = Columns()


@dataclass(frozen=True, eq=False)
class Batch:
    """One validated record batch: float64 scores, boolean positives, optional client ids."""

    scores: np.ndarray
    positive: np.ndarray
    clients: pa.Array | None


def source_name(source: str | os.PathLike) -> str:
    return "<stdin>" if str(source) == STDIN else str(source)


def _is_parquet(path: Path) -> bool:
    if path.suffix.lower() in {".parquet", ".pq"}:
        return True
    if path.suffix.lower() in {".csv", ".gz", ".txt", ".tsv"}:
        return False
    with path.open("rb") as f:
        return f.read(4) == b"PAR1"


def _record_batches(
    source: str | os.PathLike, wanted: list[str], name: str, batch_rows: int
) -> tuple[list[str], Iterator[pa.RecordBatch]]:
    """(column names of the table, iterator over batches holding only `wanted` ∩ columns)."""
    if str(source) == STDIN:
        return _csv_batches(sys.stdin.buffer, wanted, name)
    path = Path(source)
    if not path.exists():
        raise InputError(f"cannot read '{name}': no such file.")
    if path.is_dir():
        raise InputError(f"cannot read '{name}': it is a directory, not a table.")
    try:
        parquet = _is_parquet(path)
    except OSError as e:
        raise InputError(f"cannot read '{name}': {e.strerror or e}.") from e
    if not parquet:
        return _csv_batches(path, wanted, name)
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"cannot read '{name}' as Parquet: {e}") from e
    names = pf.schema_arrow.names
    cols = [c for c in wanted if c in names]
    return names, _guard(pf.iter_batches(batch_size=batch_rows, columns=cols), name)


def _csv_batches(src, wanted: list[str], name: str) -> tuple[list[str], Iterator[pa.RecordBatch]]:
    try:
        reader = pacsv.open_csv(
            src,
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            convert_options=pacsv.ConvertOptions(
                include_columns=wanted, include_missing_columns=True
            ),
        )
    except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
            raise InputError(f"'{name}' is empty: expected a header row and data rows.") from e
        raise InputError(f"cannot read '{name}' as CSV: {e}") from e
    except OSError as e:
        raise InputError(f"cannot read '{name}': {e}") from e
    # include_missing_columns adds absent columns as all-null; tell them apart by the header.
    present = [f.name for f in reader.schema if not pa.types.is_null(f.type)]
    return present, _guard(reader, name)


def _guard(batches, name: str) -> Iterator[pa.RecordBatch]:
    """Turn Arrow's mid-stream decoding errors into InputError naming the file."""
    try:
        yield from batches
    except pa.ArrowException as e:
        raise InputError(f"cannot read '{name}': {e}") from e


def read_batches(
    source: str | os.PathLike,
    columns: Columns = DEFAULT_COLUMNS,
    *,
    score_range: tuple[float, float] = (0.0, 1.0),
    pos_label: object = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[Batch]:
    """Stream validated batches of (score, label[, client]) from Parquet, CSV or '-' (CSV stdin).

    Raises `InputError` for an unreadable file, a missing column, a null or NaN score, a score
    outside `score_range`, a label that is not binary, or a table with no rows.
    """
    name = source_name(source)
    wanted = [columns.score, columns.label] + ([columns.client] if columns.client else ["client"])
    names, batches = _record_batches(source, wanted, name, batch_rows)
    for col, option in ((columns.score, "--score-col"), (columns.label, "--label-col")):
        if col not in names:
            raise InputError(
                f"'{name}' has no column '{col}' (it has: {', '.join(names) or 'none'}); "
                f"name the right one with {option}."
            )
    client_col = columns.client or "client"
    if columns.client and columns.client not in names:
        raise InputError(
            f"'{name}' has no column '{columns.client}' (it has: {', '.join(names)}); "
            "drop --client-col to treat every row as its own client."
        )
    has_client = client_col in names

    labels_seen: set = set()
    offset = 0
    for rb in batches:
        if rb.num_rows == 0:
            continue
        yield validate_batch(
            rb,
            name,
            columns.score,
            columns.label,
            client_col if has_client else None,
            offset=offset,
            score_range=score_range,
            pos_label=pos_label,
            labels_seen=labels_seen,
        )
        offset += rb.num_rows
    if offset == 0:
        raise InputError(f"'{name}' has no rows: nothing to evaluate.")


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
    labels_seen: set | None = None,
) -> Batch:
    """Check one batch and convert it; `offset` is the number of rows before it (for messages)."""
    lo, hi = score_range
    scores = _scores(_chunk(rb.column(score_col)), name, score_col, offset, lo, hi)
    positive = _positives(
        _chunk(rb.column(label_col)),
        name,
        label_col,
        offset,
        pos_label,
        set() if labels_seen is None else labels_seen,
    )
    clients = _chunk(rb.column(client_col)) if client_col else None
    if clients is not None and clients.null_count:
        row = offset + _first_true(clients.is_null()) + 1
        raise InputError(f"'{name}', column '{client_col}', row {row}: client id is missing.")
    return Batch(scores, positive, clients)


def _chunk(col) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _first_true(mask) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0])


def _scores(arr: pa.Array, name: str, col: str, offset: int, lo: float, hi: float) -> np.ndarray:
    where = f"'{name}', column '{col}'"
    if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)):
        raise InputError(f"{where}: scores must be numbers, found type {arr.type}.")
    if arr.null_count:
        raise InputError(
            f"{where}, row {offset + _first_true(arr.is_null()) + 1}: score is missing."
        )
    s = arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    # One min and one max pass; NaN makes both comparisons fail, so it lands in the slow path.
    if s.size and not (s.min() >= lo and s.max() <= hi):
        bad = np.isnan(s)
        if bad.any():
            raise InputError(f"{where}, row {offset + _first_true(bad) + 1}: score is NaN.")
        i = _first_true((s < lo) | (s > hi))
        raise InputError(
            f"{where}, row {offset + i + 1}: score {s[i]!r} is outside the score range "
            f"[{lo:g}, {hi:g}]; pass --score-range lo,hi if scores are not probabilities."
        )
    return s


def _positives(
    arr: pa.Array, name: str, col: str, offset: int, pos_label: object, seen: set
) -> np.ndarray:
    where = f"'{name}', column '{col}'"
    if arr.null_count:
        raise InputError(
            f"{where}, row {offset + _first_true(arr.is_null()) + 1}: label is missing."
        )
    if pos_label is not None:
        values = pc.unique(arr).to_pylist()
        seen.update(values)
        if len(seen) > 2:
            shown = ", ".join(map(repr, sorted(seen, key=str)[:5]))
            raise InputError(f"{where}: labels are not binary; found values {shown}.")
        try:
            target = pa.scalar(pos_label).cast(arr.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise InputError(
                f"{where}: --pos-label {pos_label!r} cannot be compared with labels of type "
                f"{arr.type}."
            ) from e
        return pc.equal(arr, target).to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(arr.type):
        return arr.to_numpy(zero_copy_only=False)
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        raise InputError(
            f"{where}: labels must be 0/1 or true/false, found type {arr.type}; "
            "pass --pos-label VALUE to say which value is the positive class."
        )
    y = arr.to_numpy(zero_copy_only=False)
    if pa.types.is_integer(arr.type):
        ok = y.min() >= 0 and y.max() <= 1
    else:
        ok = bool(((y == 0) | (y == 1)).all())
    if not ok:
        i = _first_true((y != 0) & (y != 1))
        raise InputError(
            f"{where}, row {offset + i + 1}: label {y[i]!r} is not binary (expected 0/1 or "
            "true/false); pass --pos-label VALUE for other codings."
        )
    return y == 1


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w") -> Iterator:
    """Write to a temporary file beside `path` and rename it into place only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
