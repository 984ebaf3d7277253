"""Multiclass post-hoc calibration under federation and user-level DP (seed paper 004).

Modules follow the data flow: `data` (read and validate) → `federation` (clients, rounds) →
`binning` / `temperature` (FedBin, FedBBQ, FedTemp) with `privacy` (clipping, Gaussian noise,
zCDP accounting) → `metrics` (cwECE, top-label ECE, accuracy) → `maps` (map documents) → `api`.
"""

from fedeval.multiclass.api import (
    calibrate_multiclass,
    calibrate_multiclass_data,
    calibrate_multiclass_file,
)
from fedeval.multiclass.maps import (
    MulticlassMap,
    apply_multiclass_map_file,
    load_multiclass_map,
    map_kind,
    shareable_map,
    write_map,
)
from fedeval.multiclass.result import Method, MulticlassResult, multiclass_map_dict
from fedeval.multiclass.views import render_multiclass_table
from fedeval.privacy.gaussian import MulticlassMechanism

__all__ = [
    "Method",
    "MulticlassMap",
    "MulticlassMechanism",
    "MulticlassResult",
    "apply_multiclass_map_file",
    "calibrate_multiclass",
    "calibrate_multiclass_data",
    "calibrate_multiclass_file",
    "load_multiclass_map",
    "map_kind",
    "multiclass_map_dict",
    "render_multiclass_table",
    "shareable_map",
    "write_map",
]
