"""Protocol payloads as Flower records: numpy arrays in an ArrayRecord, the rest (numbers,
strings, bytes) in a ConfigRecord, and back."""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedeval.flower.job import Payload

ARRAYS, CONFIG = "arrays", "config"


def to_record(payload: Payload) -> RecordDict:
    """A payload as a RecordDict (arrays kept with their dtype and shape)."""
    arrays = {k: Array(np.ascontiguousarray(v)) for k, v in payload.items() if _is_array(v)}
    config = {k: v for k, v in payload.items() if not _is_array(v)}
    content = RecordDict({CONFIG: ConfigRecord(config)})
    if arrays:
        content[ARRAYS] = ArrayRecord(arrays)
    return content


def from_record(content: RecordDict) -> Payload:
    """The payload a RecordDict carries (the inverse of `to_record`)."""
    out: Payload = {}
    if CONFIG in content.config_records:
        out.update(dict(content.config_records[CONFIG]))
    if ARRAYS in content.array_records:
        out.update({k: a.numpy() for k, a in content.array_records[ARRAYS].items()})
    return out


def _is_array(v: object) -> bool:
    return isinstance(v, np.ndarray)
