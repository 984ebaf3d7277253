"""Reading and validating scored tables, streamed in record batches; atomic output files.

Every problem with the input becomes one `InputError` that names the file, the column and, where
one row is to blame, the row (1-based, not counting a CSV header).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from fedeval.core.errors import InputError, UsageError
from fedeval.tables.limits import (
    CappedReader,
    Source,
    open_csv,  # bounded header, needed columns only, capped expansion
    open_source,
    read_header,
)
from fedeval.tables.sources import (
    STDIN,
    Piece,
    big_row_groups,
    is_parquet,
    one_line,
    partition_types,
    row_group_loaders,
    row_group_sizes,
    source_files,
)
from fedeval.tables.validate import Batch, parse_numbers, parse_scores, single_chunk, validate_batch

BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class Columns:
    """Which columns hold what. `client=None` means: use a column named "client" if present."""

    score: str = "score"
    label: str = "label"
    client: str | None = None

    def __post_init__(self) -> None:
        named = [self.score, self.label] + ([self.client] if self.client is not None else [])
        twice = sorted({c for c in named if named.count(c) > 1})
        if twice:
            raise UsageError(
                f"`score_col`, `label_col` and `client_col` must name different columns: "
                f"'{twice[0]}' is named for two of them."
            )


DEFAULT_COLUMNS = Columns()


def source_name(source: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(source) == STDIN else str(source)


def _record_batches(
    source: str | os.PathLike[str],
    wanted: list[str] | None,
    text: list[str],
    name: str,
    batch_rows: int,
) -> tuple[list[str], Iterator[pa.RecordBatch], bool]:
    """(column names, iterator over batches holding `wanted` ∩ columns, or all columns if
    `wanted` is None, whether it is CSV).

    CSV columns named in `text` are read as text and converted later, row by row if need be,
    so a bad value is reported with its row and ids stay consistent across blocks.
    """
    if str(source) == STDIN:
        return (*_csv_batches(sys.stdin.buffer, wanted, text, name), True)
    path = _table_file(source, name)
    try:
        parquet = is_parquet(path)
    except OSError as e:
        raise InputError(f"cannot read '{name}': {e.strerror or e}.") from e
    if not parquet:
        return (*_csv_batches(path, wanted, text, name), True)
    try:
        # No pre-buffering: it reads whole row groups of every column ahead, so memory grows
        # with the file (20M rows: 410 → 265 MB peak without it, and no slower).
        pf = pq.ParquetFile(path, pre_buffer=False)
        names = pf.schema_arrow.names
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"cannot read '{name}' as Parquet: {one_line(e)}") from e
    cols = names if wanted is None else [c for c in wanted if c in names]
    _check_unique(names, cols, name)
    return names, _guard(pf.iter_batches(batch_size=batch_rows, columns=cols), name), False


def _csv_batches(
    src: Source, wanted: list[str] | None, text: list[str], name: str
) -> tuple[list[str], Iterator[pa.RecordBatch]]:

    try:
        names, reader = open_csv(src, name, wanted, text)
    except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
            raise InputError(f"'{name}' is empty: expected a header row and data rows.") from e
        raise InputError(f"cannot read '{name}' as CSV: {one_line(e)}") from e
    except OSError as e:
        raise InputError(f"cannot read '{name}': {one_line(e)}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read the header of '{name}': not UTF-8 text ({e}).") from e
    cols = names if wanted is None else [c for c in wanted if c in names]
    _check_unique(names, cols, name)
    return names, _guard((rb.select(cols) for rb in reader), name)


def _table_file(source: str | os.PathLike[str], name: str) -> Path:
    """`source` as the path of a table to read: one that exists, not a directory, a regular
    file (`_check_regular`)."""
    path = Path(source)
    if not path.exists():
        raise InputError(f"cannot read '{name}': no such file.")
    if path.is_dir():
        raise InputError(f"cannot read '{name}': it is a directory, not a table.")
    _check_regular(path, name)
    return path


def _check_regular(path: Path, name: str) -> None:
    """Refuse what is not a regular file (a FIFO would block, a device never ends)."""
    try:
        if not path.is_file():
            raise InputError(
                f"cannot read '{name}': not a regular file (a FIFO, device or socket); give a file."
            )
    except OSError as e:
        raise InputError(f"cannot read '{name}': {e.strerror or e}.") from e


def _check_unique(names: list[str], used: list[str], name: str) -> None:
    """A column used must be named once: which of two same-named columns is meant is a guess."""
    for col in used:
        if names.count(col) > 1:
            raise InputError(
                f"'{name}', column '{col}': {names.count(col)} columns have this name; "
                "rename all but one.",
                file=name,
                column=col,
            )


def _guard(batches: Iterable[pa.RecordBatch], name: str) -> Iterator[pa.RecordBatch]:
    """Turn Arrow's mid-stream decoding errors into InputError naming the file."""
    try:
        yield from batches
    except (pa.ArrowException, OSError) as e:  # OSError: a corrupt Parquet page, a bad gzip
        raise InputError(f"cannot read '{name}': {one_line(e)}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read '{name}': it is not UTF-8 text ({e}).") from e


def scan(
    source: str | os.PathLike[str],
    columns: Columns = DEFAULT_COLUMNS,
    *,
    batch_rows: int = BATCH_ROWS,
    threads: int = 1,
) -> Iterator[Piece]:
    """Raw record batches of (score, label[, client]) from a file, '-', a directory (a
    Parquet or CSV dataset, hive partitions included) or a glob, file by file in sorted order,
    only the needed columns read. Each file must hold the score and label columns.

    Validation is left to `validate_piece`, so that it can run beside the reading (threads).
    A Parquet file's row groups of more than `batch_rows` rows are streamed, up to `threads`
    of them at once. Raises `InputError` for an unreadable file or a missing column.
    """
    files = source_files(source)
    if files is None:
        yield from _scan_file(source, {}, {}, columns, batch_rows, threads)
        return
    types = partition_types(files)
    for f in files:
        yield from _scan_file(f.path, f.partition, types, columns, batch_rows, threads)


def _scan_file(
    source: str | os.PathLike[str],
    partition: dict[str, str],
    types: dict[str, pa.DataType],
    columns: Columns,
    batch_rows: int,
    threads: int = 1,
) -> Iterator[Piece]:
    name = source_name(source)
    # The implicit "client" column, unless it already holds the scores or the labels.
    implicit = None if "client" in (columns.score, columns.label) else "client"
    client_col = columns.client or implicit
    wanted = [columns.score, columns.label] + ([client_col] if client_col else [])
    text_cols = [columns.score] + ([client_col] if client_col else [])
    names, batches, is_csv = _record_batches(source, wanted, text_cols, name, batch_rows)
    from_dirs = [c for c in wanted if c in partition and c not in names]
    names = [*names, *from_dirs]
    for col, option in ((columns.score, "`score_col`"), (columns.label, "`label_col`")):
        if col not in names:
            raise InputError(
                f"'{name}' has no column '{col}' (it has: {', '.join(names) or 'none'}); "
                f"name the right one with {option}.{separator_hint(names, is_csv)}"
            )
    if columns.client and columns.client not in names:
        raise InputError(
            f"'{name}' has no column '{columns.client}' (it has: {', '.join(names)}); "
            "drop `client_col` to treat every row as its own client."
        )
    client = client_col if client_col is not None and client_col in names else None

    def extra(rb: pa.Table) -> pa.Table:  # hive partition keys: one value for the whole file
        for col in from_dirs:
            typ = types.get(col, pa.string())
            value = int(partition[col]) if typ == pa.int64() else partition[col]
            rb = rb.append_column(col, pa.repeat(pa.scalar(value, typ), rb.num_rows))
        return rb

    if not is_csv:
        file_cols = [c for c in wanted if c in names and c not in from_dirs]
        loaders = row_group_loaders(Path(source), file_cols, extra, name, batch_rows)
        if loaders is not None:
            offset = 0
            for rows, load in loaders:
                yield Piece(name, offset, None, False, client, rows, load)
                offset += rows
            return
        sizes = row_group_sizes(Path(source))
        if threads > 1 and sizes is not None and sum(1 for n in sizes if n) > 1:
            batches = big_row_groups(Path(source), sizes, file_cols, name, batch_rows, threads)
    offset = 0
    for rb in batches:
        if rb.num_rows == 0:
            continue
        yield Piece(name, offset, extra(rb), is_csv, client, rb.num_rows)
        offset += rb.num_rows


def validate_piece(
    piece: Piece,
    columns: Columns = DEFAULT_COLUMNS,
    *,
    score_range: tuple[float, float] = (0.0, 1.0),
    pos_label: object = None,
    labels_seen: dict[object, None] | None = None,
) -> Batch:
    """`validate_batch` on one piece of `scan` (read first if need be)."""
    return validate_batch(
        piece.table(),
        piece.name,
        columns.score,
        columns.label,
        piece.client_col,
        offset=piece.offset,
        score_range=score_range,
        pos_label=pos_label,
        labels_seen=labels_seen,
        text_scores=piece.is_csv,
    )


def read_batches(
    source: str | os.PathLike[str],
    columns: Columns = DEFAULT_COLUMNS,
    *,
    score_range: tuple[float, float] = (0.0, 1.0),
    pos_label: object = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[Batch]:
    """Stream validated batches of (score, label[, client]) from Parquet, CSV or '-' (CSV
    stdin), or from every file of a directory or glob (see `scan`).

    Raises `InputError` for an unreadable file, a missing column, a null or NaN score, a score
    outside `score_range`, a label that is not binary, or a source with no rows.
    """
    labels_seen: dict[object, None] = {}
    rows = 0
    for piece in scan(source, columns, batch_rows=batch_rows):
        yield validate_piece(
            piece, columns, score_range=score_range, pos_label=pos_label, labels_seen=labels_seen
        )
        rows += piece.rows
    if rows == 0:
        raise InputError(f"'{source_name(source)}' has no rows: nothing to evaluate.")


def _csv_as_text(
    source: str | os.PathLike[str], name: str
) -> tuple[list[str], Iterator[pa.RecordBatch]]:
    """Every column of a CSV as text, exactly as written (only empty cells are missing).

    The header is read first so every column can be declared text, and nothing is guessed.
    """
    # bounded header, capped decompression (gzip, bz2, zstd), errors as InputError

    if str(source) == STDIN:
        stream, owned = CappedReader(sys.stdin.buffer, name, None), False
    else:
        path = _table_file(source, name)
        stream, owned = open_source(path, name), True
    try:
        try:
            names, rest = read_header(stream, name, stdin=str(source) == STDIN)
        except (OSError, EOFError, pa.ArrowException) as e:  # a bad gzip
            raise InputError(f"cannot read '{name}': {one_line(e)}") from e
        try:
            reader = pacsv.open_csv(
                CappedReader(stream, name, None, pending=rest),
                read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
                convert_options=pacsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()),
                    null_values=[""],
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=False,
                ),
            )
        except pa.ArrowInvalid as e:
            if "Empty CSV file" not in str(e):  # else: a header and nothing else
                raise InputError(f"cannot read '{name}' as CSV: {e}") from e
            reader = iter(())
    except BaseException:
        if owned:
            stream.close()
        raise

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from _guard(reader, name)
        finally:
            if owned:
                stream.close()

    return names, batches()


def read_all_columns(
    source: str | os.PathLike[str],
    *,
    keep_text: bool,
    text: list[str] | tuple[str, ...] = (),
    batch_rows: int = BATCH_ROWS,
) -> tuple[list[str], Iterator[pa.RecordBatch], bool]:
    """(column names, record batches of every column, whether the source is CSV).

    With `keep_text`, CSV columns arrive as the text they were written as, so a table passed
    through to CSV keeps every cell byte for byte; otherwise types are inferred as for
    evaluation (columns named in `text` stay text, to be parsed with row-precise errors), which
    is what a typed output such as Parquet needs.
    """
    name = source_name(source)
    is_csv = str(source) == STDIN or not _is_parquet_path(Path(source), name)
    if is_csv and keep_text:
        names, batches = _csv_as_text(source, name)
        return names, batches, True
    return _record_batches(source, None, list(text), name, batch_rows)


def read_with_scores(
    source: str | os.PathLike[str],
    score_col: str,
    *,
    score_range: tuple[float, float] = (0.0, 1.0),
    keep_text: bool = True,
    batch_rows: int = BATCH_ROWS,
) -> tuple[bool, Iterator[tuple[pa.RecordBatch, np.ndarray]]]:
    """Every column of a table, batch by batch, with its validated scores (labels not needed).

    Returns whether the source is CSV, and the batches; see `read_all_columns` for `keep_text`.
    """
    name = source_name(source)
    names, batches, is_csv = read_all_columns(
        source, keep_text=keep_text, text=[score_col], batch_rows=batch_rows
    )
    if score_col not in names:
        raise InputError(
            f"'{name}' has no column '{score_col}' (it has: {', '.join(names) or 'none'}); "
            f"name the right one with `score_col`.{separator_hint(names, is_csv)}"
        )
    _check_unique(names, [score_col], name)

    def gen() -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
        offset = 0
        lo, hi = score_range
        where = f"'{name}', column '{score_col}'"
        for rb in batches:
            if rb.num_rows == 0:
                continue
            col = single_chunk(rb.column(score_col))
            if is_csv and (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                col = parse_numbers(col, where, offset)
                if not keep_text:  # a typed output gets the score as a number
                    i = rb.schema.get_field_index(score_col)
                    rb = rb.set_column(i, score_col, col)
            scores, _ = parse_scores(col, name, score_col, offset, lo, hi)
            yield rb, scores
            offset += rb.num_rows
        if offset == 0:
            raise InputError(f"'{name}' has no rows: nothing to calibrate.")

    return is_csv, gen()


def _is_parquet_path(path: Path, name: str) -> bool:
    if not path.exists() or path.is_dir():
        return False  # _csv_as_text reports it
    _check_regular(path, name)
    try:
        return is_parquet(path)
    except OSError as e:
        raise InputError(f"cannot read '{name}': {e.strerror or e}.") from e


def separator_hint(names: list[str], is_csv: bool) -> str:
    """A hint for a CSV whose header came out as one column holding another separator (a
    semicolon- or tab-separated export read as comma-separated); "" otherwise.

    >>> separator_hint(["score;label"], True)
    " The header looks ';'-separated: fedeval reads comma-separated CSV (or Parquet)."
    >>> separator_hint(["score", "y"], True)
    ''
    """
    if not is_csv or len(names) != 1:
        return ""
    for sep in (";", "\t", "|"):
        if sep in names[0]:
            return (
                f" The header looks {sep!r}-separated: fedeval reads comma-separated CSV "
                "(or Parquet)."
            )
    return ""
