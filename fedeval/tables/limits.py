"""Bounded reading of CSV input: a header of bounded size, only the needed columns, and a cap on
how far a compressed file may expand.

A hostile or broken input must end in an `InputError`, not in memory exhaustion: a CSV with 10^6
columns made pyarrow allocate a builder per column (8.8 GB, then std::bad_alloc); a small zstd
"bomb" expanded to 2.1 GB. Here the header is read first (at most `MAX_HEADER_BYTES`), so the
reader can be told which columns to convert (`include_columns`) and the others are skipped; and a
compressed input may expand at most `MAX_EXPANSION` times its size on disk (but always to
`MIN_DECOMPRESSED_CAP`), far beyond what real tables compress by (CSV: 3–20×).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.csv as pacsv

from fedeval.core.errors import InputError
from fedeval.tables.sniff import SNIFF_BYTES, binary_kind, not_text

MAX_HEADER_BYTES = 1 << 20
"""Longest header line read (1 MiB: some 50,000 column names)."""
MAX_EXPANSION = 1000
"""Most decompressed bytes per compressed byte accepted."""
MIN_DECOMPRESSED_CAP = 1 << 30
"""A compressed input may always expand to this many bytes (1 GiB), whatever its size."""
Source = str | os.PathLike[str] | IO[bytes]
"""A table to read: a path, or a binary stream such as stdin."""
CODECS = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
BLOCK_SIZE = 1 << 24


class CappedReader:
    """A binary stream that raises `InputError` once more than `limit` bytes were read, and
    first gives back `pending` (bytes already read past the header)."""

    def __init__(
        self, stream: IO[bytes] | CappedReader, name: str, limit: int | None, pending: bytes = b""
    ) -> None:
        self._stream = stream
        self._name = name
        self._limit = limit
        self._pending = pending
        self.read_bytes = 0
        self.closed = False

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._pending:
            data = self._pending if n is None or n < 0 else self._pending[:n]
            self._pending = self._pending[len(data) :]
        else:
            data = self._stream.read() if n is None or n < 0 else self._stream.read(n)
        data = bytes(data)
        self.read_bytes += len(data)
        if self._limit is not None and self.read_bytes > self._limit:
            raise InputError(
                f"cannot read '{self._name}': it expands to more than {self._limit:,} bytes "
                f"when decompressed (over {MAX_EXPANSION}× its size), which no real table "
                "does; decompress it yourself if it is genuine.",
                file=self._name,
            )
        return data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            close = getattr(self._stream, "close", None)
            if close is not None:
                close()


def open_source(src: Source, name: str) -> CappedReader:
    """`src` (a path, or a binary stream such as stdin) as a capped stream; a path whose
    extension names a codec is decompressed."""
    if not isinstance(src, str | os.PathLike):
        return CappedReader(src, name, None)
    path = Path(src)
    codec = CODECS.get(path.suffix.lower())
    try:
        stream = pa.input_stream(str(path), compression=codec)
        size = path.stat().st_size
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"cannot read '{name}': {e}", file=name) from e
    limit = max(MIN_DECOMPRESSED_CAP, MAX_EXPANSION * size) if codec else None
    return CappedReader(stream, name, limit)


def read_header(reader: CappedReader, name: str, *, stdin: bool = False) -> tuple[list[str], bytes]:
    """The column names of the CSV on `reader` (its first line, at most MAX_HEADER_BYTES) and
    the bytes read past it. Binary data (gzip, Parquet, … by its magic bytes) is refused with
    what it is and what to do (`stdin`: it came through a pipe), not as "not UTF-8 text"."""
    buf = b""
    while b"\n" not in buf:
        chunk = reader.read(1 << 16)
        if not chunk:
            break
        buf += chunk
        if len(buf) - len(chunk) < SNIFF_BYTES:  # the first bytes just arrived
            kind = binary_kind(buf[:SNIFF_BYTES])
            if kind is not None:
                raise not_text(name, kind, expected="CSV", stdin=stdin)
        if len(buf) > MAX_HEADER_BYTES and b"\n" not in buf[:MAX_HEADER_BYTES]:
            raise InputError(
                f"cannot read '{name}': its header line is longer than {MAX_HEADER_BYTES:,} "
                "bytes (too many columns, or not a CSV file).",
                file=name,
            )
    line, _, rest = buf.partition(b"\n")
    if not line.strip() and not rest.strip():
        raise InputError(f"'{name}' is empty: expected a header row and data rows.", file=name)
    try:
        text = line.decode("utf-8-sig").rstrip("\r")
    except UnicodeDecodeError as e:
        raise InputError(
            f"cannot read the header of '{name}': not UTF-8 text ({e}).", file=name
        ) from None
    try:
        names = next(csv.reader([text]))
    except (csv.Error, StopIteration) as e:
        raise InputError(f"cannot read the header of '{name}': {e}", file=name) from None
    if not names or not any(n.strip() for n in names):
        raise InputError(f"cannot read the header of '{name}': it names no column.", file=name)
    return names, rest


def _native_body(src: Source, stream: CappedReader, rest: bytes) -> Any:
    """An uncompressed file's rows as a native Arrow file placed after the header, so the CSV
    reader reads without a Python stream between (about twice as fast); None for a stream or a
    compressed file (read through the capped stream)."""
    if not isinstance(src, str | os.PathLike) or CODECS.get(Path(src).suffix.lower()):
        return None
    header_bytes = stream.read_bytes - len(rest)
    try:
        body = pa.OSFile(str(src))
        body.seek(header_bytes)
    except (OSError, pa.ArrowException):
        return None
    stream.close()
    return body


def open_csv(
    src: Source, name: str, wanted: list[str] | None, text: list[str]
) -> tuple[list[str], Iterator[pa.RecordBatch]]:
    """(column names, a pyarrow CSV reader of the `wanted` columns that exist (every column if
    `wanted` is None), the bounded stream under it).

    Columns named in `text` are read as text (converted later, row by row if need be)."""
    stream = open_source(src, name)
    try:
        names, rest = read_header(stream, name, stdin=not isinstance(src, str | os.PathLike))
        keep = names if wanted is None else [c for c in wanted if c in names]
        if not rest.strip():
            rest += stream.read(BLOCK_SIZE)
            if not rest.strip():  # a header and nothing else: no rows (the caller says so)
                stream.close()
                return names, iter(())
        body = _native_body(src, stream, rest)
        if body is None:
            body = CappedReader(stream, name, None, pending=rest)
        reader = pacsv.open_csv(
            body,
            read_options=pacsv.ReadOptions(column_names=names, block_size=BLOCK_SIZE),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in text if c in names},
                strings_can_be_null=True,
                include_columns=list(dict.fromkeys(keep)),
            ),
        )
    except BaseException:
        stream.close()
        raise
    return names, reader
