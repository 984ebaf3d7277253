"""Every document a party receives as flat path → value fields (JSON, Parquet data and layout,
text with clock times masked, SVG, PNG chunks), and the deterministic leaks between two sets of
runs: a field equal within each side and different between them."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON-like value as path → leaf value (lists indexed, dicts by key)."""
    out: dict[str, Any] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out |= flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list | tuple):
        out[f"{prefix}#len"] = len(obj)
        for i, v in enumerate(obj):
            out |= flatten(v, f"{prefix}[{i}]")
    else:
        out[prefix] = obj
    return out


def all_keys(obj: Any) -> set[str]:
    """Every key of every object nested in a JSON-like value (e.g. to assert that no field
    named `seed` appears anywhere in a private document)."""
    if isinstance(obj, Mapping):
        return set(obj) | {k for v in obj.values() for k in all_keys(v)}
    if isinstance(obj, list | tuple):
        return {k for v in obj for k in all_keys(v)}
    return set()


def parquet_fields(name: str, data: bytes) -> dict[str, Any]:
    """What a Parquet file shows anyone who holds it: its size, schema, row count and every
    column's values (hashed), as path → value."""
    import hashlib

    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    out: dict[str, Any] = {
        f"{name}#bytes": len(data),
        f"{name}#rows": table.num_rows,
        f"{name}#schema": str(table.schema),
    }
    for col in table.column_names:
        values = table.column(col).to_pylist()
        out[f"{name}.{col}"] = hashlib.sha256(repr(values).encode()).hexdigest()
    return out


def directory_fields(directory: str | Path) -> dict[str, Any]:
    """Every file of a report directory as the server receives it: JSON leaves of manifests,
    Parquet fields, the file list."""
    directory = Path(directory)
    out: dict[str, Any] = {"#files": sorted(p.name for p in directory.iterdir())}
    for p in sorted(directory.iterdir()):
        data = p.read_bytes()
        if p.suffix == ".json":
            out |= flatten(json.loads(data), p.name)
        elif p.suffix == ".parquet":
            out |= parquet_fields(p.name, data)
        else:
            out[p.name] = data
    return out


def deterministic_leaks(
    runs_d: list[dict[str, Any]],
    runs_dp: list[dict[str, Any]],
    ignore: Callable[[str], bool] = lambda p: False,
) -> list[str]:
    """Paths whose value is the same in every run on D, the same in every run on D′, and
    differs between D and D′ (or is present on one side only): deterministic functions of the
    data that tell neighbours apart. `ignore` names paths declared public (e.g. participation,
    for the server)."""
    if len(runs_d) < 2 or len(runs_dp) < 2:
        raise ValueError("the scan needs at least two runs on each side")
    keys = set().union(*runs_d, *runs_dp)
    leaks = []
    for path in sorted(keys):
        if ignore(path):
            continue
        vd = [_canon(r.get(path, _MISSING)) for r in runs_d]
        vp = [_canon(r.get(path, _MISSING)) for r in runs_dp]
        if len(set(vd)) == 1 and len(set(vp)) == 1 and vd[0] != vp[0]:
            leaks.append(f"{path}: {vd[0]!s:.60} vs {vp[0]!s:.60}")
    return leaks


_MISSING = "<absent>"


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=repr)


_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


_CLOCK = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{2}:\d{2}:\d{2}"
)
"""Wall-clock times (ISO dates and times of day): when a run happened, not what it read."""


def without_clock(text: str) -> str:
    """`text` with every wall-clock time written TIME (runs on D and on D′ happen at different
    times: a timestamp to the second or minute can look like a field that separates them)."""
    return _CLOCK.sub("TIME", text)


def text_fields(name: str, text: str, replace: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A text a party reads (stderr, a table, a CSV) as path → value, keyed by content rather
    than position: each line's template (its numbers masked as #, wall-clock times as TIME,
    `replace`'s keys, e.g. a run's own directory, by their values) is a path whose value is the
    line's numbers one by one, so a noisy line that shifts every later line does not make them
    all look different, and an exact count inside an otherwise noisy line still stands alone.
    The number of lines and of each template are fields too (a line present on one side only
    separates)."""
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    lines = without_clock(text).splitlines()
    out: dict[str, Any] = {f"{name}#lines": len(lines)}
    seen: dict[str, int] = {}
    for line in lines:
        template = " ".join(_NUMBER.sub("#", line).split())  # column widths follow the numbers
        k = seen.get(template, 0)
        seen[template] = k + 1
        key = f"{name}:{template}" + (f"[{k}]" if k else "")
        out[key] = "line"
        for j, number in enumerate(_NUMBER.findall(line)):
            out[f"{key}@{j}"] = number
    for template, count in seen.items():
        out[f"{name}:{template}#count"] = count
    return out


def svg_fields(name: str, data: bytes) -> dict[str, Any]:
    """An SVG figure as path → value: its metadata and every text it draws (titles, labels,
    legends, annotations; fedeval writes text as text), each as `text_fields` reads a line,
    and the number of drawn elements of each kind."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(data)
    texts: list[str] = []
    kinds: dict[str, int] = {}
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        kinds[tag] = kinds.get(tag, 0) + 1
        if tag in ("text", "tspan", "title", "desc", "date", "description"):
            texts.append(" ".join("".join(el.itertext()).split()))
    out = text_fields(f"{name}.text", "\n".join(t for t in texts if t))
    out |= {f"{name}#{tag}": count for tag, count in sorted(kinds.items())}
    return out


def png_fields(name: str, data: bytes) -> dict[str, Any]:
    """A PNG figure as path → value: its size in pixels and every chunk other than the image
    data (text chunks such as Software or a title, the resolution), which is where a figure
    could state a number without drawing it."""
    import struct
    import zlib

    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return {f"{name}#png": False}
    out: dict[str, Any] = {}
    pos, seen = 8, dict[str, int]()
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        tag = kind.decode("latin-1")
        if tag == "IDAT":
            continue
        k = seen.get(tag, 0)
        seen[tag] = k + 1
        if tag == "zTXt":  # keyword, 0, method, compressed Latin-1 text
            key, _, rest = body.partition(b"\0")
            body = key + b"\0" + zlib.decompress(rest[1:])
        elif tag == "iTXt":  # keyword, 0, flag, method, language, 0, keyword, 0, UTF-8 text
            key, _, rest = body.partition(b"\0")
            head, text = rest[:2], rest[2:].split(b"\0", 2)[-1]
            text = zlib.decompress(text) if head[0] else text
            out[f"{name}.{tag}[{k}]"] = (
                key.decode("latin-1") + "=" + text.decode("utf-8", "replace")
            )
            continue
        out[f"{name}.{tag}[{k}]"] = body.decode("latin-1")
    return out


def parquet_layout_fields(name: str, data: bytes) -> dict[str, Any]:
    """What a Parquet file's bytes show beyond its decoded columns: row groups and their rows
    and sizes, each column chunk's size, encodings and statistics, and the key-value metadata
    of the file and schema. A size or layout that depends on the data tells it to whoever holds
    the file, even when every value is noise."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    out: dict[str, Any] = {
        f"{name}#row_groups": meta.num_row_groups,
        f"{name}#created_by": meta.created_by,
        f"{name}#metadata": repr(meta.metadata),
    }
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        out[f"{name}.rg[{g}]#rows"] = rg.num_rows
        out[f"{name}.rg[{g}]#bytes"] = rg.total_byte_size
        for c in range(rg.num_columns):
            col = rg.column(c)
            where = f"{name}.rg[{g}].{col.path_in_schema}"
            out[f"{where}#bytes"] = col.total_compressed_size
            out[f"{where}#encodings"] = repr(col.encodings)
            out[f"{where}#statistics"] = repr(col.statistics.to_dict()) if col.statistics else None
    return out
