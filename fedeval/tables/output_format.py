"""What an output file's name asks for: one rule for every command that writes data.

The name's suffix picks the format and the compression, the same way everywhere:

- ``.parquet`` or ``.pq``: Parquet (it compresses its own columns, so never ``.parquet.gz``);
- ``.csv``, optionally followed by ``.gz``, ``.bz2`` or ``.zst``: CSV, compressed by that codec
  (a bare ``x.gz`` is compressed CSV too);
- ``.json``: a JSON document (written as is: the readers of reports, maps and releases read
  plain JSON);
- any other name (``report.out``, no suffix, ``/dev/stdout``, ``-``): the command's own format.

A command that cannot write what the name asks for (a report named ``.parquet``, a table named
``.json``, a spreadsheet) refuses before any work, with one line that says what it writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePath

import pyarrow as pa

from fedeval.core.errors import UsageError


class DataFormat(StrEnum):
    PARQUET = "parquet"
    CSV = "csv"
    JSON = "json"


_FORMAT_OF = {
    ".parquet": DataFormat.PARQUET,
    ".pq": DataFormat.PARQUET,
    ".csv": DataFormat.CSV,
    ".json": DataFormat.JSON,
}
CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
"""Suffix → the codec (as `pyarrow.CompressedOutputStream` names it) a CSV is compressed with."""

FOREIGN = frozenset(
    {
        ".tsv",
        ".xlsx",
        ".xls",
        ".ods",
        ".feather",
        ".arrow",
        ".ipc",
        ".orc",
        ".avro",
        ".jsonl",
        ".ndjson",
        ".yaml",
        ".yml",
        ".xml",
        ".html",
        ".zip",
        ".xz",
        ".lz4",
        ".7z",
        ".png",
        ".svg",
        ".pdf",
    }
)
"""Suffixes of formats fedeval does not write: refused rather than filled with another format."""

_KIND = {DataFormat.PARQUET: "Parquet", DataFormat.CSV: "CSV", DataFormat.JSON: "JSON"}
_NAMES = {
    DataFormat.PARQUET: "Parquet (.parquet, .pq)",
    DataFormat.CSV: "CSV (.csv, .csv.gz, .csv.bz2, .csv.zst)",
    DataFormat.JSON: "JSON (.json)",
}


@dataclass(frozen=True)
class OutputSpec:
    """The format an output is written in, and the codec a CSV is compressed with (or None)."""

    format: DataFormat
    compression: str | None = None


def spec_from_name(path: str | os.PathLike[str] | None) -> OutputSpec | None:
    """What the name asks for; None when it names no format (the command's own is used).
    Raises `UsageError` for a suffix no fedeval command writes.

    >>> spec_from_name("x.csv.gz")
    OutputSpec(format=<DataFormat.CSV: 'csv'>, compression='gzip')
    >>> spec_from_name("report.out") is None
    True
    """
    if path is None or str(path) == "-":
        return None
    suffixes = [s.lower() for s in PurePath(str(path)).suffixes]
    codec = CODECS.get(suffixes[-1]) if suffixes else None
    base = suffixes[:-1] if codec else suffixes
    last = base[-1] if base else None
    if last in FOREIGN:
        raise UsageError(
            f"`output` '{path}': fedeval does not write {last} files. Name the output .csv, "
            ".csv.gz, .parquet or .json (as the command writes).",
            file=str(path),
        )
    fmt = _FORMAT_OF.get(last or "")
    if codec is None:
        return None if fmt is None else OutputSpec(fmt)
    if fmt is None or fmt is DataFormat.CSV:
        return OutputSpec(DataFormat.CSV, codec)
    what = (
        "Parquet compresses its own columns"
        if fmt is DataFormat.PARQUET
        else "JSON documents are written uncompressed, as their readers read them"
    )
    raise UsageError(
        f"`output` '{path}': {what}; drop the {suffixes[-1]} (e.g. '{_strip(path)}').",
        file=str(path),
    )


def _strip(path: str | os.PathLike[str]) -> str:
    text = str(path)
    return text[: text.rfind(".")]


def output_spec(
    path: str | os.PathLike[str] | None,
    *,
    writes: tuple[DataFormat, ...],
    default: DataFormat | None = None,
    what: str = "this command",
) -> OutputSpec:
    """The format and compression to write `path` in: the name's (`spec_from_name`) if it is
    one of `writes`, else `default` (the first of `writes` when not given) for a name that asks
    for no format. `UsageError` (exit 2, before any work) when the name asks for a format the
    command does not write; `what` names what the command writes in that message.

    >>> output_spec("r.json", writes=(DataFormat.JSON,))
    OutputSpec(format=<DataFormat.JSON: 'json'>, compression=None)
    >>> output_spec("t.csv.zst", writes=(DataFormat.PARQUET, DataFormat.CSV)).compression
    'zstd'
    """
    asked = spec_from_name(path)
    if asked is None:
        return OutputSpec(default or writes[0])
    if asked.format not in writes:
        can = " or ".join(_NAMES[f] for f in writes)
        raise UsageError(
            f"`output` '{path}' names a {_KIND[asked.format]} file, but {what} writes {can}; "
            "name the output accordingly.",
            file=str(path),
        )
    return asked


def encoded_text(text: str, compression: str | None) -> bytes:
    """`text` as the bytes of the file: UTF-8, compressed with `compression` if given."""
    data = text.encode("utf-8")
    if compression is None:
        return data
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, compression) as out:
        out.write(data)
    return bytes(sink.getvalue().to_pybytes())
