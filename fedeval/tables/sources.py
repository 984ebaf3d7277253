"""Where input rows come from: a file, a directory or glob of Parquet files (hive partitions
typed), or stdin; Parquet row groups streamed on a reader thread when they are large."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fedeval.core.errors import InputError

STDIN = "-"


def is_parquet(path: Path) -> bool:
    if path.suffix.lower() in {".parquet", ".pq"}:
        return True
    if path.suffix.lower() in {".csv", ".gz", ".txt", ".tsv"}:
        return False
    with path.open("rb") as f:
        return f.read(4) == b"PAR1"


def one_line(e: BaseException) -> str:
    """An Arrow message on one line (Arrow's span several, with C++ file names)."""
    return " ".join(str(e).split("\n")[0].split()) or type(e).__name__


GLOB_CHARS = "*?["
"""A source holding one of these (and naming no existing file) is a glob pattern."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a source, with the hive partition values its directories give (key=value)."""

    path: Path
    partition: dict[str, str]


def source_files(source: str | os.PathLike[str]) -> list[SourceFile] | None:
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


def _hive_keys(relative: Path) -> dict[str, str]:
    """The key=value pairs of a file's directories (hive partitioning), as text; typed across
    all files by `partition_types`."""
    out: dict[str, str] = {}
    for part in relative.parts[:-1]:
        key, eq, value = part.partition("=")
        if eq and key:
            from urllib.parse import unquote

            out[key] = unquote(value)
    return out


def partition_types(files: list[SourceFile]) -> dict[str, pa.DataType]:
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


def parquet_rows(source: str | os.PathLike[str]) -> int | None:
    """The rows of a source whose every file is Parquet, from the files' footers (nothing
    decoded); None for CSV, stdin, or a file that cannot be read (the read reports it)."""
    try:
        files = source_files(source)
        paths = [Path(source)] if files is None else [f.path for f in files]
        if str(source) == STDIN or not all(p.is_file() and is_parquet(p) for p in paths):
            return None
        rows: int = sum(pq.ParquetFile(p, pre_buffer=False).metadata.num_rows for p in paths)
        return rows
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


def row_group_sizes(path: Path) -> list[int] | None:
    """The rows of each row group of a Parquet file (None if its footer cannot be read)."""
    try:
        md = pq.ParquetFile(path, pre_buffer=False).metadata
    except (pa.ArrowException, OSError, ValueError):
        return None
    return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


def row_group_loaders(
    path: Path,
    cols: list[str],
    extra: Callable[[pa.Table], pa.Table],
    name: str,
    batch_rows: int,
) -> list[tuple[int, Callable[[], pa.Table]]] | None:
    """(rows, loader) per non-empty row group of a Parquet file, each loader opening the file
    on its own (a reader is not shared between threads), so row groups are read in parallel;
    None when a row group holds more than `batch_rows` rows (the file is then streamed in
    batches, so memory stays bounded)."""
    sizes = row_group_sizes(path)
    if sizes is None or any(n > batch_rows for n in sizes):
        return None  # a broken footer: the streamed path reports it

    def load(i: int) -> pa.Table:
        try:
            t = pq.ParquetFile(path, pre_buffer=False).read_row_group(
                i, columns=cols, use_threads=False
            )
        except (pa.ArrowException, OSError) as e:  # a corrupt page
            raise InputError(f"cannot read '{name}': {one_line(e)}") from e
        return extra(t)

    return [(n, partial(load, i)) for i, n in enumerate(sizes) if n]


_END = object()
"""Put by a row group's reader after its last batch."""


def _stream_row_group(
    path: Path,
    i: int,
    cols: list[str],
    batch_rows: int,
    out: queue.Queue[object],
    stop: threading.Event,
) -> None:
    """Read row group i in batches into the queue `out` (bounded: the reader waits while it
    is full), then `_END`; an error is put instead. Stops early once `stop` is set."""

    def put(item: object) -> bool:
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


def big_row_groups(
    path: Path, sizes: list[int], cols: list[str], name: str, batch_rows: int, ahead: int
) -> Iterator[pa.RecordBatch]:
    """The batches of a Parquet file whose row groups exceed `batch_rows`, in file order, with
    up to `ahead` row groups decoded at once, each in its own thread (a row group's pages
    decode one after another, so one thread per row group is what parallelism there is).
    Each reader holds at most two batches ahead: memory is `ahead` × 3 batches."""
    groups = [i for i, n in enumerate(sizes) if n]
    stop = threading.Event()
    started: list[tuple[threading.Thread, queue.Queue[object]]] = []

    def start(k: int) -> None:
        q: queue.Queue[object] = queue.Queue(maxsize=2)
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
                    raise InputError(f"cannot read '{name}': {one_line(item)}") from item
                if isinstance(item, BaseException):
                    raise item
                yield item
            if k + ahead < len(groups):
                start(k + ahead)
    finally:
        stop.set()
        for t, _ in started:
            t.join()
