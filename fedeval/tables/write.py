"""Writing tables: CSV bytes of a batch, atomic output files (a temporary beside the target,
renamed into place), Parquet or CSV from record batches."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from fedeval.core.errors import InputError, UsageError
from fedeval.tables.output_format import DataFormat, OutputSpec, output_spec
from fedeval.tables.outputs import (
    compressed,
    make_parents,
    open_stream,
    output_target,
    remove_made,
)
from fedeval.tables.sources import (
    STDIN,
)


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
        data: bytes = out.getvalue().encode("utf-8") + buf.getvalue().to_pybytes()
        return data
    raise AssertionError("quoting_style='needed' cannot fail")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
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


def table_output(output: str | os.PathLike[str] | None) -> OutputSpec:
    """How `write_batches` writes `output`: Parquet or CSV (compressed as the name says), by
    the one rule of `fedeval.tables.output_format`; `UsageError` for a name asking for another
    format (.json, .xlsx, .parquet.gz). CSV for stdout and for names without a format."""
    return output_spec(output, writes=(DataFormat.CSV, DataFormat.PARQUET))


def writes_parquet(output: str | os.PathLike[str] | None) -> bool:
    """Whether `write_batches` writes Parquet to `output` (.parquet/.pq) rather than CSV."""
    return table_output(output).format is DataFormat.PARQUET


def write_batches(batches: Iterable[pa.RecordBatch], output: str | os.PathLike[str] | None) -> int:
    """Stream record batches to `output`: Parquet for .parquet/.pq, CSV otherwise (compressed
    for .gz, .zst, .bz2; both atomically: a failure leaves no file), CSV on stdout for None or
    '-' (`table_output`). Returns the rows."""
    spec = table_output(output)
    parquet = spec.format is DataFormat.PARQUET

    def write(sink: IO[bytes]) -> int:
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

    with atomic_output(output, "wb") as f, compressed(f, spec.compression) as sink:
        return write(sink)
