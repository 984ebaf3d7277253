"""Client report files: what `encode` writes and `aggregate` reads, schema ``fedeval.reports/1``.

A report directory holds one cohort (the clients that mask with each other):

- ``manifest.json``: the privacy configuration, population, score range, the cohort size, the
  secure-aggregation parameters, and every data file with its row count and SHA-256;
- ``roster.parquet``: column ``client``, the cohort's client ids; a client's position is its
  index in the cohort (the masking graph and the reports use the index);
- ``part-NNNNN.parquet``: the reports. Under ``federated`` and ``distdp`` one row per client:
  ``client`` (uint32 index) and ``report`` (fixed-size list of uint32: the client's count of every
  released node, in `fedeval.release` layout, then its number of examples, all masked mod 2^32).
  Under ``localdp`` one row per example: ``client``, ``level`` (uint8 index of the released level
  it reports) and ``bits`` (its OUE bits over label × cell of that level, packed big-endian);
  local-DP reports are private on their own and are not masked;
- ``recovery.parquet`` (only after dropouts): columns ``first``, ``second`` (uint32 indices of
  an ordered pair with exactly one end dropped) and ``seed`` (uint64), revealed by the survivors.

Compatibility contract: within version 1 fields are never removed, renamed or re-meant; new
fields may appear. A reader refuses a newer version.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa

SCHEMA_PREFIX = "fedeval.reports/"
VERSION = 1
SCHEMA = f"{SCHEMA_PREFIX}{VERSION}"
MANIFEST = "manifest.json"
ROSTER = "roster.parquet"
RECOVERY = "recovery.parquet"


def part_name(i: int) -> str:
    return f"part-{i:05d}.parquet"


def masked_schema(length: int) -> pa.Schema:
    """Rows of a masked (federated or distdp) part."""
    return pa.schema([("client", pa.uint32()), ("report", pa.list_(pa.uint32(), length))])


LOCAL_SCHEMA = pa.schema([("client", pa.uint32()), ("level", pa.uint8()), ("bits", pa.binary())])
RECOVERY_SCHEMA = pa.schema(
    [("first", pa.uint32()), ("second", pa.uint32()), ("seed", pa.uint64())]
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_entry(path: Path, rows: int, data: bytes) -> dict:
    return {"file": path.name, "rows": rows, "bytes": len(data), "sha256": sha256(data)}


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as Parquet bytes (hashed before they reach the disk, so the manifest is exact).

    Plain and uncompressed: masked reports are uniform random words, which neither dictionaries
    nor codecs shrink (they cost time and, for dictionaries, space)."""
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="none", use_dictionary=False, write_statistics=False)
    return sink.getvalue().to_pybytes()


def write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
