"""Multiclass calibration maps: the calibrator as JSON, loaded defensively, applied to tables.

Schema ``fedeval.calibration-map/2`` with ``"kind": "multiclass"`` (the binary reader in
`fedeval.documents.map_file` refuses this kind, and this reader refuses binary maps). Compatibility
contract: within version 1 fields are never removed, renamed or given a new meaning; new fields
may appear. The fields a reader needs:

- ``method``: "fedbin", "fedbbq" (binning) or "fedtemp" (temperature);
- ``input``: "probs" or "logits" — which columns the map reads (binning applies the softmax to
  logits first; temperature takes the log of probabilities);
- ``classes``: c; ``columns``: the label column and the prob/logit prefixes it was fitted with;
- ``calibrator``: {"temperature": T}, or {"bins": B, "edges": [B + 1 fixed-width edges],
  "values": c lists of B values g_j(m), "alpha": c weights α_j, and optionally "bin_weights":
  c lists of B weights w_j(m) (the DP shrinkage)}: the output for class j on bin m is
  a·g_j(m) + (1 − a)·p_j with a = α_j·w_j(m) (w = 1 when absent), renormalised over classes.

``privacy`` is the section of `fedeval.multiclass.privacy.MulticlassMechanism` (the keys of the
binary releases' section). A map written under DP is made to be shared: it holds the calibrator,
the privacy section and the settings, and no exact value of the simulation (metrics, row and
client counts, the input's name); ``run.seed`` appears only in a seeded (NOT private) run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedeval.core.errors import InputError, UsageError
from fedeval.documents.files import write_document
from fedeval.documents.map_file import (  # one schema, binary or multiclass
    read_map_document,
)
from fedeval.multiclass.binning import BinningCalibrator
from fedeval.multiclass.data import (
    LABEL_COL,
    LOG_FLOOR,
    LOGIT_PREFIX,
    PROB_PREFIX,
    ColumnSpec,
    InputKind,
    iter_unlabelled,
    softmax,
)
from fedeval.multiclass.temperature import T_MAX, T_MIN, TemperatureCalibrator
from fedeval.tables.read import source_name
from fedeval.tables.write import write_batches, writes_parquet

KIND = "multiclass"
OUTPUT_PREFIX = "cal_prob_"
BINNING_METHODS = ("fedbin", "fedbbq")
TEMPERATURE_METHODS = ("fedtemp",)

Calibrator = BinningCalibrator | TemperatureCalibrator


def calibrated_probs(calibrator: Calibrator, kind: InputKind, x: np.ndarray) -> np.ndarray:
    """Calibrated probabilities (n, c) from the matrix of `kind` the calibrator reads."""
    if isinstance(calibrator, TemperatureCalibrator):
        z = x if kind is InputKind.LOGITS else np.log(np.maximum(x, LOG_FLOOR))
        return calibrator(z)
    p = x if kind is InputKind.PROBS else softmax(x)
    return calibrator(p)


def calibrator_fields(calibrator: Calibrator) -> dict[str, Any]:
    """The ``calibrator`` section of a map document."""
    if isinstance(calibrator, TemperatureCalibrator):
        return {"temperature": calibrator.temperature}
    b = calibrator.n_bins
    out = {
        "bins": b,
        "edges": (np.arange(b + 1) / b).tolist(),
        "values": calibrator.values.tolist(),
        "alpha": calibrator.alpha.tolist(),
    }
    if calibrator.bin_weights is not None:
        out["bin_weights"] = calibrator.bin_weights.tolist()
    return out


@dataclass(frozen=True, eq=False)
class MulticlassMap:
    """A multiclass map as read back: the calibrator, what it reads, and the document."""

    calibrator: Calibrator
    input_kind: InputKind
    n_classes: int
    columns: ColumnSpec
    document: dict[str, Any]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return calibrated_probs(self.calibrator, self.input_kind, x)


def map_kind(path: str | os.PathLike[str], *, value: Any = None) -> str:
    """The ``kind`` of a calibration map ("binary" or "multiclass"; "binary" if absent), so a
    caller can pick the loader; `InputError` if the file is not a calibration map at all.
    `value`: the map's JSON already read from `path` (a pipe is read once, `read_json`)."""
    return str(read_map_document(path, value=value).get("kind", "binary"))


def load_multiclass_map(path: str | os.PathLike[str], *, value: Any = None) -> MulticlassMap:
    """Read and check a multiclass map; `InputError` names the file and the field at fault.
    `value`: the map's JSON already read from `path` (a pipe is read once, `read_json`)."""
    name = "<stdin>" if str(path) == "-" else str(path)
    doc = read_map_document(
        path, value=value, hint="fedeval calibrate FILE --multiclass -o map.json"
    )
    kind = doc.get("kind", "binary")
    if kind != KIND:
        raise InputError(
            f"'{name}' is a '{kind}' calibration map, not a multiclass one; it calibrates one "
            "score column (apply it with `score_col`)."
        )

    def bad(key: str, why: str) -> InputError:
        return InputError(f"'{name}' is not a valid multiclass map: field '{key}' {why}.")

    def field(container: dict[str, Any], key: str, where: str = "") -> Any:
        if key not in container:
            raise bad(f"{where}{key}", "is missing")
        return container[key]

    method = field(doc, "method")
    if method not in BINNING_METHODS + TEMPERATURE_METHODS:
        raise bad("method", f"must be one of {', '.join(BINNING_METHODS + TEMPERATURE_METHODS)}")
    try:
        input_kind = InputKind(field(doc, "input"))
    except ValueError:
        raise bad("input", "must be 'probs' or 'logits'") from None
    c = field(doc, "classes")
    if isinstance(c, bool) or not isinstance(c, int) or c < 2:
        raise bad("classes", "must be a whole number ≥ 2")
    cols = doc.get("columns") or {}
    if not isinstance(cols, dict) or not all(isinstance(v, str) for v in cols.values()):
        raise bad("columns", "must map names to column names")
    spec = ColumnSpec(
        label=cols.get("label", LABEL_COL),
        prob_prefix=cols.get("prob_prefix", PROB_PREFIX),
        logit_prefix=cols.get("logit_prefix", LOGIT_PREFIX),
    )
    cal = field(doc, "calibrator")
    if not isinstance(cal, dict):
        raise bad("calibrator", "must be an object")
    if method in TEMPERATURE_METHODS:
        t = field(cal, "temperature", "calibrator.")
        if isinstance(t, bool) or not isinstance(t, int | float) or not T_MIN <= t <= T_MAX:
            raise bad("calibrator.temperature", f"must be a number in [{T_MIN:g}, {T_MAX:g}]")
        calibrator: Calibrator = TemperatureCalibrator(float(t), method)
    else:

        def numbers(key: str, shape: tuple[int, ...], what: str) -> np.ndarray:
            try:
                arr = np.asarray(field(cal, key, "calibrator."), dtype=np.float64)
            except (TypeError, ValueError):
                arr = None
            if arr is None or arr.shape != shape or not np.all(np.isfinite(arr)):
                raise bad(f"calibrator.{key}", f"must be {what}")
            return arr

        b = field(cal, "bins", "calibrator.")
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise bad("calibrator.bins", "must be a whole number ≥ 1")
        values = numbers("values", (c, b), f"{c} lists of {b} numbers")
        alpha = numbers("alpha", (c,), f"{c} numbers")
        if not np.all((values >= 0) & (values <= 1)):
            raise bad("calibrator.values", "must hold probabilities in [0, 1]")
        if alpha.shape != (c,) or not np.all((alpha >= 0) & (alpha <= 1)):
            raise bad("calibrator.alpha", f"must be {c} weights in [0, 1]")
        bin_weights = None
        if "bin_weights" in cal:
            bin_weights = numbers("bin_weights", (c, b), f"{c} lists of {b} numbers")
            if not np.all((bin_weights >= 0) & (bin_weights <= 1)):
                raise bad("calibrator.bin_weights", "must hold weights in [0, 1]")
        calibrator = BinningCalibrator(values, alpha, method, bin_weights)
    return MulticlassMap(calibrator, input_kind, c, spec, doc)


SHAREABLE_KEYS = (
    "schema",
    "fedeval_version",
    "kind",
    "simulation",
    "exact_values",
    "method",
    "method_name",
    "weighted",
    "input",
    "classes",
    "columns",
    "output_prefix",
    "pooled",
    "order_preserving",
    "calibrator",
    "safeguard",
    "privacy",
    "federation",
    "run",
)
"""What a DP map keeps: the calibrator, how to read it, the privacy section and the settings."""
SHAREABLE_FEDERATION = (
    "partition",
    "beta",
    "rounds",
    "participation",
    "sampling",
    "clip",
    "server_lr",
)
"""The protocol's settings; the number of clients K is left out (a count of the data when it
comes from a client column)."""
SHAREABLE_RUN = ("path", "reproducible_simulation", "seed")


def shareable_map(doc: dict[str, Any]) -> dict[str, Any]:
    """The map fit to hand on: under DP only the listed fields (no exact metric, no count of
    rows, clients or classes' examples, no source name), so that what remains is post-processing
    of the noisy release; ``"exact_values": false``. Without DP, `doc` itself."""
    privacy = doc.get("privacy")
    if isinstance(privacy, dict) and privacy.get("model") == "federated":
        return doc
    out = {k: doc[k] for k in SHAREABLE_KEYS if k in doc}
    out["exact_values"] = False
    for key, keep in (("federation", SHAREABLE_FEDERATION), ("run", SHAREABLE_RUN)):
        if isinstance(out.get(key), dict):
            out[key] = {k: v for k, v in out[key].items() if k in keep}
    return out


def write_map(doc: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write a map document atomically (temp file, then rename); under DP its shareable form
    (`shareable_map`: no exact value of the simulation)."""
    write_document(shareable_map(doc), path)


def apply_multiclass_map_file(
    map_path: str | os.PathLike[str] | MulticlassMap,
    source: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    prob_prefix: str | None = None,
    logit_prefix: str | None = None,
    output_prefix: str = OUTPUT_PREFIX,
) -> int:
    """Add calibrated `cal_prob_0..cal_prob_{c-1}` columns (rows sum to 1) to every row of
    `source`; returns the row count.

    Streams record batches. The map says whether it reads probabilities or logits, and with
    which column prefix (override with `prob_prefix` / `logit_prefix`). `output` ending in
    .parquet/.pq writes Parquet, any other name CSV (both atomically: a failure leaves no file);
    None or '-' writes CSV to stdout.
    """
    import pyarrow as pa

    cmap = map_path if isinstance(map_path, MulticlassMap) else load_multiclass_map(map_path)
    map_name = "the map" if isinstance(map_path, MulticlassMap) else f"the map '{map_path}'"
    spec = ColumnSpec(
        label=cmap.columns.label,
        prob_prefix=cmap.columns.prob_prefix if prob_prefix is None else prob_prefix,
        logit_prefix=cmap.columns.logit_prefix if logit_prefix is None else logit_prefix,
    )
    parquet = writes_parquet(output)
    name = source_name(source)
    # CSV out keeps every cell's text; Parquet out needs the columns typed.
    names, batches = iter_unlabelled(source, spec, cmap.input_kind, keep_text=not parquet)
    out_cols = [f"{output_prefix}{j}" for j in range(cmap.n_classes)]
    clash = [col for col in out_cols if col in names]
    if clash:
        raise UsageError(
            f"'{name}' already has a column '{clash[0]}'; choose another output prefix."
        )

    def calibrated() -> Iterator[pa.RecordBatch]:
        for rb, x in batches:
            if x.shape[1] != cmap.n_classes:
                probs = cmap.input_kind is InputKind.PROBS
                prefix = spec.prob_prefix if probs else spec.logit_prefix
                raise InputError(
                    f"'{name}' has {x.shape[1]} '{prefix}*' columns but {map_name} "
                    f"calibrates {cmap.n_classes} classes."
                )
            cal = cmap(x)
            out = rb
            for j, col in enumerate(out_cols):
                out = out.append_column(col, pa.array(cal[:, j], pa.float64()))
            yield out

    return write_batches(calibrated(), output)
