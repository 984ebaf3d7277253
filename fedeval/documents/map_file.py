"""Calibration map files: a versioned JSON document, written atomically, read defensively.

Schema ``fedeval.calibration-map/2`` (version 2: the privacy section is the mechanism's full claim,
a map written under DP holds no exact value, and the document is sealed with a SHA-256 digest of
its canonical content). Compatibility contract: within a version fields are never removed,
renamed or given a new meaning; new fields may appear. A reader refuses a newer major version
rather than guess what it means, and still reads version 1 maps (unsealed).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedeval.core.errors import InputError
from fedeval.documents.files import load_document, write_document

SCHEMA_PREFIX = "fedeval.calibration-map/"
VERSION = 2
SCHEMA = f"{SCHEMA_PREFIX}{VERSION}"


@dataclass(frozen=True, eq=False)
class MapFile:
    """A binary calibration map as read back: a step function in the scores' own units."""

    edges: np.ndarray  # K + 1, in score units, edges[0] = lo, edges[-1] = hi
    values: np.ndarray  # K, non-decreasing, in [0, 1]
    score_range: tuple[float, float]
    method: str
    document: dict[str, Any]

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.edges, scores, side="right") - 1
        return self.values[np.clip(i, 0, len(self.values) - 1)]


def read_map_document(
    path: str | os.PathLike[str],
    *,
    value: Any = None,
    hint: str = "fedeval calibrate FILE -o map.json",
) -> dict[str, Any]:
    """A calibration map's document (binary or multiclass), its schema and any seal checked.
    `value`: the map's JSON already read from `path` (a pipe is read once, `read_json`)."""
    return load_document(
        path,
        prefix=SCHEMA_PREFIX,
        version=VERSION,
        noun="map",
        kind="a calibration map",
        require_integrity=False,  # a hand-written map is welcome; a seal, if any, must hold
        hint=f"Make one with `{hint}`.",
        value=value,
    )


def load_map(path: str | os.PathLike[str], *, value: Any = None) -> MapFile:
    """Read and check a calibration map; `InputError` names the file and what is wrong.
    `value`: the map's JSON already read from `path` (a pipe is read once, `read_json`)."""
    name = "<stdin>" if str(path) == "-" else str(path)
    doc = read_map_document(path, value=value)
    if doc.get("kind", "binary") != "binary":
        raise InputError(f"'{name}': a '{doc.get('kind')}' map cannot be applied to binary scores.")

    def field(key: str) -> Any:
        if key not in doc:
            raise InputError(f"'{name}' is not a valid calibration map: field '{key}' is missing.")
        return doc[key]

    raw_edges, raw_values, raw_range = field("edges"), field("values"), field("score_range")
    try:
        edges = np.asarray(raw_edges, dtype=np.float64)
        values = np.asarray(raw_values, dtype=np.float64)
        lo, hi = (float(x) for x in raw_range)
    except (TypeError, ValueError):
        raise InputError(
            f"'{name}' is not a valid calibration map: 'edges', 'values' and 'score_range' must "
            "hold numbers."
        ) from None
    problems = []
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        problems.append("'score_range' must be two finite numbers lo < hi")
    if edges.ndim != 1 or values.ndim != 1 or len(values) < 1 or len(edges) != len(values) + 1:
        problems.append("'edges' must have one more entry than 'values'")
    elif not (np.all(np.isfinite(edges)) and np.all(np.diff(edges) >= 0)):
        problems.append("'edges' must be finite and non-decreasing")
    elif not (np.all((values >= 0) & (values <= 1)) and np.all(np.diff(values) >= 0)):
        problems.append("'values' must be non-decreasing probabilities in [0, 1]")
    if problems:
        raise InputError(f"'{name}' is not a valid calibration map: {'; '.join(problems)}.")
    return MapFile(edges, values, (lo, hi), str(doc.get("method", "")), doc)


write_json = write_document
"""Write a map (or any document) atomically."""
