"""Client report files: what `encode` writes and `aggregate` reads, schema ``fedeval.reports/2``.

A report directory holds one cohort (the clients that mask with each other):

- ``manifest.json``: the privacy claim (the mechanism's section), population, score range, the
  cohort size, the secure-aggregation parameters, and every data file with its row count and
  SHA-256; sealed with a SHA-256 digest of its canonical content (optionally Ed25519-signed);
- ``roster.parquet``: column ``client``, the cohort's client ids; a client's position is its
  index in the cohort (the masking graph and the reports use the index);
- ``part-NNNNN.parquet``: the reports. Under ``federated`` and ``distdp`` one row per client:
  ``client`` (uint32 index) and ``report`` (fixed-size list of uint32: the client's count of every
  released node, in `fedeval.core.release` layout, masked mod 2^32; no example count). Under
  ``localdp`` one row per report: ``client``, ``level`` (uint8 index of the released level it
  reports) and ``bits`` (its OUE bits over label × cell of that level, packed big-endian); one
  report per example, or exactly L per client under unit client; local-DP reports are private on
  their own and are not masked;
- ``recovery.parquet`` (only after dropouts): columns ``first``, ``second`` (uint32 indices of
  an ordered pair with exactly one end dropped) and ``key`` (the pair's 32-byte mask key),
  revealed by the survivors.

Compatibility contract: within version 2 fields are never removed, renamed or re-meant; new
fields may appear. A reader refuses a newer version, and version 1 (whose reports carried each
client's exact number of examples and whose masks were not cryptographic).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

SCHEMA_PREFIX = "fedeval.reports/"
VERSION = 2
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
    [("first", pa.uint32()), ("second", pa.uint32()), ("key", pa.binary(32))]
)


def key_array(keys: np.ndarray) -> pa.FixedSizeBinaryArray:
    """(m, 32) uint8 mask keys as a fixed-size binary column."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8)
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(32), len(keys), [None, pa.py_buffer(keys.tobytes())]
    )


def key_matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A fixed-size binary column of keys back as an (m, 32) uint8 matrix."""
    arr = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    data = np.frombuffer(arr.buffers()[1], np.uint8)
    return data[arr.offset * 32 : (arr.offset + len(arr)) * 32].reshape(len(arr), 32).copy()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_entry(path: Path, rows: int, data: bytes) -> dict[str, Any]:
    return {"file": path.name, "rows": rows, "bytes": len(data), "sha256": sha256(data)}


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as Parquet bytes (hashed before they reach the disk, so the manifest is exact).

    Plain and uncompressed: masked reports are uniform random words, which neither dictionaries
    nor codecs shrink (they cost time and, for dictionaries, space)."""
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="none", use_dictionary=False, write_statistics=False)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
