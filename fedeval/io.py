"""Reading and validating scored tables, streamed in record batches; atomic output files.

Every problem with the input becomes one `InputError` that names the file, the column and, where
one row is to blame, the row (1-based, not counting a CSV header).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import queue
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from fedeval.errors import InputError, UsageError
from fedeval.outputs import make_parents, open_stream, output_target, remove_made

BATCH_ROWS = 1 << 20
STDIN = "-"


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


@dataclass(frozen=True, eq=False)
class Batch:
    """One validated record batch: float scores (the source's width), boolean positives, the
    largest score, optional client ids."""

    scores: np.ndarray
    positive: np.ndarray
    score_max: float
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
    source: str | os.PathLike,
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
    path = Path(source)
    if not path.exists():
        raise InputError(f"cannot read '{name}': no such file.")
    if path.is_dir():
        raise InputError(f"cannot read '{name}': it is a directory, not a table.")
    _check_regular(path, name)
    try:
        parquet = _is_parquet(path)
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
        raise InputError(f"cannot read '{name}' as Parquet: {_one_line(e)}") from e
    cols = names if wanted is None else [c for c in wanted if c in names]
    _check_unique(names, cols, name)
    return names, _guard(pf.iter_batches(batch_size=batch_rows, columns=cols), name), False


def _csv_batches(
    src, wanted: list[str] | None, text: list[str], name: str
) -> tuple[list[str], Iterator[pa.RecordBatch]]:
    from fedeval.limits import open_csv  # bounded header, needed columns only, capped expansion

    try:
        names, reader = open_csv(src, name, wanted, text)
    except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
            raise InputError(f"'{name}' is empty: expected a header row and data rows.") from e
        raise InputError(f"cannot read '{name}' as CSV: {_one_line(e)}") from e
    except OSError as e:
        raise InputError(f"cannot read '{name}': {_one_line(e)}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read the header of '{name}': not UTF-8 text ({e}).") from e
    cols = names if wanted is None else [c for c in wanted if c in names]
    _check_unique(names, cols, name)
    return names, _guard((rb.select(cols) for rb in reader), name)


def _one_line(e: BaseException) -> str:
    """An Arrow message on one line (Arrow's span several, with C++ file names)."""
    return " ".join(str(e).split("\n")[0].split()) or type(e).__name__


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


def _guard(batches, name: str) -> Iterator[pa.RecordBatch]:
    """Turn Arrow's mid-stream decoding errors into InputError naming the file."""
    try:
        yield from batches
    except (pa.ArrowException, OSError) as e:  # OSError: a corrupt Parquet page, a bad gzip
        raise InputError(f"cannot read '{name}': {_one_line(e)}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read '{name}': it is not UTF-8 text ({e}).") from e


GLOB_CHARS = "*?["
"""A source holding one of these (and naming no existing file) is a glob pattern."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a source, with the hive partition values its directories give (key=value)."""

    path: Path
    partition: dict[str, object]


def source_files(source: str | os.PathLike) -> list[SourceFile] | None:
    """The files a source names, in a fixed order (sorted paths): every data file under a
    directory (a Parquet or CSV dataset, hive-partitioned or not; as `pyarrow.dataset` does,
    names starting with '.' or '_' are skipped) or every file a glob matches; None for one file
    or '-'.

    Raises `InputError` when a glob matches nothing or a directory holds no data file.
    """
    if str(source) == STDIN:
        return None
    path = Path(source)
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
        )
        if not files:
            raise InputError(f"cannot read '{source}': it is a directory with no data files in it.")
        return [SourceFile(f, _hive_keys(f.relative_to(path))) for f in files]
    if not path.exists() and any(c in str(source) for c in GLOB_CHARS):
        import glob

        files = sorted(Path(f) for f in glob.glob(str(source), recursive=True))
        files = [f for f in files if f.is_file()]
        if not files:
            raise InputError(f"cannot read '{source}': no file matches the pattern.")
        return [SourceFile(f, {}) for f in files]
    return None


def _hive_keys(relative: Path) -> dict[str, object]:
    """The key=value pairs of a file's directories (hive partitioning), as text; typed across
    all files by `_partition_types`."""
    out: dict[str, object] = {}
    for part in relative.parts[:-1]:
        key, eq, value = part.partition("=")
        if eq and key:
            from urllib.parse import unquote

            out[key] = unquote(value)
    return out


def _partition_types(files: list[SourceFile]) -> dict[str, pa.DataType]:
    """Per partition key: int64 when every file's value is an integer, else string."""
    types: dict[str, pa.DataType] = {}
    for f in files:
        for key, value in f.partition.items():
            is_int = isinstance(value, str) and value.lstrip("-").isdigit()
            if key not in types:
                types[key] = pa.int64() if is_int else pa.string()
            elif not is_int:
                types[key] = pa.string()
    return types


def parquet_rows(source: str | os.PathLike) -> int | None:
    """The rows of a source whose every file is Parquet, from the files' footers (nothing
    decoded); None for CSV, stdin, or a file that cannot be read (the read reports it)."""
    try:
        files = source_files(source)
        paths = [Path(source)] if files is None else [f.path for f in files]
        if str(source) == STDIN or not all(p.is_file() and _is_parquet(p) for p in paths):
            return None
        return sum(pq.ParquetFile(p, pre_buffer=False).metadata.num_rows for p in paths)
    except (InputError, pa.ArrowException, OSError, ValueError):
        return None


@dataclass(frozen=True, eq=False)
class Piece:
    """One raw record batch of a source, before validation: the file it came from (for
    messages), the rows of that file before it, whether its scores arrive as text, and the
    batch itself or (a Parquet row group) how to read it, so that reading can run in threads."""

    name: str
    offset: int
    batch: pa.RecordBatch | pa.Table | None
    is_csv: bool
    client_col: str | None
    rows: int = 0
    load: Callable[[], pa.RecordBatch | pa.Table] | None = None

    def table(self) -> pa.RecordBatch | pa.Table:
        """The piece's columns, read now if they were not read yet."""
        return self.batch if self.load is None else self.load()


def _row_group_sizes(path: Path) -> list[int] | None:
    """The rows of each row group of a Parquet file (None if its footer cannot be read)."""
    try:
        md = pq.ParquetFile(path, pre_buffer=False).metadata
    except (pa.ArrowException, OSError, ValueError):
        return None
    return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


def _row_group_loaders(
    path: Path, cols: list[str], extra, name: str, batch_rows: int
) -> list | None:
    """(rows, loader) per non-empty row group of a Parquet file, each loader opening the file
    on its own (a reader is not shared between threads), so row groups are read in parallel;
    None when a row group holds more than `batch_rows` rows (the file is then streamed in
    batches, so memory stays bounded)."""
    sizes = _row_group_sizes(path)
    if sizes is None or any(n > batch_rows for n in sizes):
        return None  # a broken footer: the streamed path reports it

    def load(i: int) -> pa.Table:
        try:
            t = pq.ParquetFile(path, pre_buffer=False).read_row_group(
                i, columns=cols, use_threads=False
            )
        except (pa.ArrowException, OSError) as e:  # a corrupt page
            raise InputError(f"cannot read '{name}': {_one_line(e)}") from e
        return extra(t)

    return [(n, partial(load, i)) for i, n in enumerate(sizes) if n]


_END = object()
"""Put by a row group's reader after its last batch."""


def _stream_row_group(path: Path, i: int, cols: list[str], batch_rows: int, out, stop) -> None:
    """Read row group i in batches into the queue `out` (bounded: the reader waits while it
    is full), then `_END`; an error is put instead. Stops early once `stop` is set."""

    def put(item) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        batches = pf.iter_batches(
            batch_size=batch_rows, row_groups=[i], columns=cols, use_threads=False
        )
        for rb in batches:
            if not put(rb):
                return
        put(_END)
    except BaseException as e:  # reported by the reading thread, in file order
        put(e)


def _big_row_groups(
    path: Path, sizes: list[int], cols: list[str], name: str, batch_rows: int, ahead: int
) -> Iterator[pa.RecordBatch]:
    """The batches of a Parquet file whose row groups exceed `batch_rows`, in file order, with
    up to `ahead` row groups decoded at once, each in its own thread (a row group's pages
    decode one after another, so one thread per row group is what parallelism there is).
    Each reader holds at most two batches ahead: memory is `ahead` × 3 batches."""
    groups = [i for i, n in enumerate(sizes) if n]
    stop = threading.Event()
    started: list[tuple[threading.Thread, queue.Queue]] = []

    def start(k: int) -> None:
        q: queue.Queue = queue.Queue(maxsize=2)
        t = threading.Thread(
            target=_stream_row_group,
            args=(path, groups[k], cols, batch_rows, q, stop),
            name="fedeval-row-group",
            daemon=True,
        )
        t.start()
        started.append((t, q))

    try:
        for k in range(min(ahead, len(groups))):
            start(k)
        for k in range(len(groups)):
            _, q = started[k]
            while (item := q.get()) is not _END:
                if isinstance(item, pa.ArrowException | OSError):
                    raise InputError(f"cannot read '{name}': {_one_line(item)}") from item
                if isinstance(item, BaseException):
                    raise item
                yield item
            if k + ahead < len(groups):
                start(k + ahead)
    finally:
        stop.set()
        for t, _ in started:
            t.join()


def scan(
    source: str | os.PathLike,
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
    types = _partition_types(files)
    for f in files:
        yield from _scan_file(f.path, f.partition, types, columns, batch_rows, threads)


def _scan_file(
    source, partition: dict, types: dict, columns: Columns, batch_rows: int, threads: int = 1
):
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
                f"name the right one with {option}."
            )
    if columns.client and columns.client not in names:
        raise InputError(
            f"'{name}' has no column '{columns.client}' (it has: {', '.join(names)}); "
            "drop `client_col` to treat every row as its own client."
        )
    client = client_col if client_col is not None and client_col in names else None

    def extra(rb):  # hive partition keys: one value for the whole file
        for col in from_dirs:
            typ = types.get(col, pa.string())
            value = int(partition[col]) if typ == pa.int64() else partition[col]
            rb = rb.append_column(col, pa.repeat(pa.scalar(value, typ), rb.num_rows))
        return rb

    if not is_csv:
        file_cols = [c for c in wanted if c in names and c not in from_dirs]
        loaders = _row_group_loaders(Path(source), file_cols, extra, name, batch_rows)
        if loaders is not None:
            offset = 0
            for rows, load in loaders:
                yield Piece(name, offset, None, False, client, rows, load)
                offset += rows
            return
        sizes = _row_group_sizes(Path(source))
        if threads > 1 and sizes is not None and sum(1 for n in sizes if n) > 1:
            batches = _big_row_groups(Path(source), sizes, file_cols, name, batch_rows, threads)
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
    labels_seen: dict | None = None,
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
    source: str | os.PathLike,
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
    labels_seen: dict = {}
    rows = 0
    for piece in scan(source, columns, batch_rows=batch_rows):
        yield validate_piece(
            piece, columns, score_range=score_range, pos_label=pos_label, labels_seen=labels_seen
        )
        rows += piece.rows
    if rows == 0:
        raise InputError(f"'{source_name(source)}' has no rows: nothing to evaluate.")


def _csv_as_text(source: str | os.PathLike, name: str) -> tuple[list[str], Iterator]:
    """Every column of a CSV as text, exactly as written (only empty cells are missing).

    The header is read first so every column can be declared text, and nothing is guessed.
    """
    # bounded header, capped decompression (gzip, bz2, zstd), errors as InputError
    from fedeval.limits import CappedReader, open_source, read_header

    if str(source) == STDIN:
        stream, owned = CappedReader(sys.stdin.buffer, name, None), False
    else:
        path = Path(source)
        if not path.exists():
            raise InputError(f"cannot read '{name}': no such file.")
        if path.is_dir():
            raise InputError(f"cannot read '{name}': it is a directory, not a table.")
        _check_regular(path, name)
        stream, owned = open_source(path, name), True
    try:
        try:
            names, rest = read_header(stream, name)
        except (OSError, EOFError, pa.ArrowException) as e:  # a bad gzip
            raise InputError(f"cannot read '{name}': {_one_line(e)}") from e
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
    source: str | os.PathLike,
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


def csv_bytes(batch: pa.RecordBatch, *, header: bool) -> bytes:
    """A batch as CSV. Cells are unquoted, so text passes through unchanged, unless a cell holds
    a delimiter, quote or line break, when that batch quotes where needed; the header is quoted
    only where a name needs it (pyarrow would quote every name)."""
    out = io.StringIO()
    if header:
        csv.writer(out, lineterminator="\n").writerow(batch.schema.names)
    nested = [f.name for f in batch.schema if pa.types.is_nested(f.type)]
    if nested:
        raise InputError(
            f"column '{nested[0]}' holds {batch.schema.field(nested[0]).type} values, which CSV "
            "cannot hold; write Parquet (.parquet) instead.",
            column=nested[0],
        )
    for style in ("none", "needed"):
        buf = pa.BufferOutputStream()
        try:
            pacsv.write_csv(
                batch, buf, pacsv.WriteOptions(include_header=False, quoting_style=style)
            )
        except pa.ArrowInvalid:
            continue
        return out.getvalue().encode("utf-8") + buf.getvalue().to_pybytes()
    raise AssertionError("quoting_style='needed' cannot fail")


def read_with_scores(
    source: str | os.PathLike,
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
            "name the right one with `score_col`."
        )
    _check_unique(names, [score_col], name)

    def gen() -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
        offset = 0
        lo, hi = score_range
        where = f"'{name}', column '{score_col}'"
        for rb in batches:
            if rb.num_rows == 0:
                continue
            col = _chunk(rb.column(score_col))
            if is_csv and (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                col = _parse_numbers(col, where, offset)
                if not keep_text:  # a typed output gets the score as a number
                    i = rb.schema.get_field_index(score_col)
                    rb = rb.set_column(i, score_col, col)
            scores, _ = _scores(col, name, score_col, offset, lo, hi)
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
        return _is_parquet(path)
    except OSError as e:
        raise InputError(f"cannot read '{name}': {e.strerror or e}.") from e


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
    labels_seen: dict | None = None,
    text_scores: bool = False,
) -> Batch:
    """Check one batch and convert it; `offset` is the number of rows before it (for messages).

    `text_scores`: scores arrive as text (CSV) and are parsed here; a typed source with a string
    score column is refused instead, as a schema error.
    """
    lo, hi = score_range
    score = _chunk(rb.column(score_col))
    if text_scores and (pa.types.is_string(score.type) or pa.types.is_large_string(score.type)):
        score = _parse_numbers(score, f"'{name}', column '{score_col}'", offset)
    scores, score_max = _scores(score, name, score_col, offset, lo, hi)
    positive = positive_labels(
        _chunk(rb.column(label_col)),
        name,
        label_col,
        offset,
        pos_label,
        {} if labels_seen is None else labels_seen,
    )
    clients = _chunk(rb.column(client_col)) if client_col else None
    if clients is not None and pa.types.is_nested(clients.type):
        raise InputError(
            f"'{name}', column '{client_col}': client ids must be numbers or text, found type "
            f"{clients.type}."
        )
    if clients is not None and clients.null_count:
        row = offset + _first_true(clients.is_null()) + 1
        raise InputError(f"'{name}', column '{client_col}', row {row}: client id is missing.")
    return Batch(scores, positive, score_max, clients)


def _chunk(col) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _first_true(mask) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0])


def _scores(
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
    s = arr.to_numpy(zero_copy_only=False)
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


def _parse_numbers(arr: pa.Array, where: str, offset: int) -> pa.Array:
    if arr.null_count:  # reported as missing by _scores, with its row
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
    arr: pa.Array, name: str, col: str, offset: int, pos_label: object, seen: dict
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
        return pc.equal(arr, target).to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(arr.type):
        return arr.to_numpy(zero_copy_only=False)
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        raise InputError(
            f"{where}: labels must be 0/1 or true/false, found type {arr.type}; "
            "pass `pos_label` VALUE to say which value is the positive class."
        )
    y = arr.to_numpy(zero_copy_only=False)
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
    return y == 1


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w") -> Iterator:
    """Write to a temporary file beside `path` and rename it into place only on success.

    A device or pipe at `path` (`/dev/null`, `/dev/stdout`, a FIFO) is written through, never
    replaced; a symbolic link is followed (the file it names is replaced, the link kept).
    Raises `UsageError` when `path` cannot be written (a directory, no permission).
    """
    where = output_target(path)
    if where.stream:
        with open_stream(where.path, "wb" if "b" in mode else "w") as f:
            yield f
        return
    target = where.path
    try:
        made = make_parents(target)
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}.") from e
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        remove_made(made)
        raise UsageError(f"cannot write '{path}': {e.strerror or e}.") from e
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        remove_made(made)  # a failed write leaves no directory it made behind
        raise


def writes_parquet(output: str | os.PathLike | None) -> bool:
    """Whether `write_batches` writes Parquet to `output` (.parquet/.pq) rather than CSV."""
    return (
        output is not None
        and str(output) != STDIN
        and str(output).lower().endswith((".parquet", ".pq"))
    )


def write_batches(batches: Iterable[pa.RecordBatch], output: str | os.PathLike | None) -> int:
    """Stream record batches to `output`: Parquet for .parquet/.pq, CSV otherwise (compressed
    for .gz, .zst, .bz2; both atomically: a failure leaves no file), CSV on stdout for None or
    '-'. Returns the rows."""
    parquet = writes_parquet(output)

    def write(sink) -> int:
        writer = None
        rows = 0
        try:
            for rb in batches:
                if parquet:
                    if writer is None:
                        writer = pq.ParquetWriter(sink, rb.schema)
                    writer.write_batch(rb)
                else:
                    sink.write(csv_bytes(rb, header=rows == 0))
                rows += rb.num_rows
        finally:
            if writer is not None:
                writer.close()
        return rows

    if output is None or str(output) == STDIN:
        return write(sys.stdout.buffer)
    from fedeval.outputs import compressed, compression_of  # CSV as out.csv.gz / .zst

    codec = None if parquet else compression_of(output)
    with atomic_output(output, "wb") as f, compressed(f, codec) as sink:
        return write(sink)
