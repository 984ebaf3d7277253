"""Multiclass input: integer labels 0..c−1 with per-class probability and/or logit columns.

Seed paper 004 (*Private Federated Multiclass Post-hoc Calibration*), section 3: binning works on
the model's class probabilities, scaling on its logits. A table holds `prob_0..prob_{c-1}`
and/or `logit_0..logit_{c-1}` (the prefixes are options), an integer `label` and optionally a
client id column. Every problem becomes one `InputError` naming the file, the column and, where
one row is to blame, the row (1-based, not counting a CSV header), as in `fedeval.tables.read`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import ArrayLike

from fedeval.core.errors import InputError, UsageError
from fedeval.tables.read import read_all_columns, source_name
from fedeval.tables.validate import check_client_ids

PROB_PREFIX = "prob_"
LOGIT_PREFIX = "logit_"
LABEL_COL = "label"

PROB_SUM_TOLERANCE = 1e-3
"""|Σ_j p_j − 1| allowed per row (at least; c·1e-4 for c > 10 classes). Probabilities written
with 4 decimals round by ≤ 5e-5 each, so c·5e-5 is what honest rounding can cost; float32
rounding is far below that. Rows are renormalised after the check."""

APPLY_ROWS = 1 << 16
APPLY_CELLS = 1 << 20
"""Applying a map reads batches of at most APPLY_ROWS rows and calibrates slices of at most
APPLY_CELLS (row, class) values (8 MB per float64 matrix), so memory does not grow with the
table: 2M rows × 10 classes measured 0.98 GB peak with the reader's 1M-row batches."""

LOG_FLOOR = 1e-300
"""Probabilities are floored here before taking logs (a zero probability is a −∞ logit)."""


class InputKind(StrEnum):
    """Which model outputs a calibrator reads: class probabilities or logits."""

    PROBS = "probs"
    LOGITS = "logits"


@dataclass(frozen=True, eq=False)
class MulticlassData:
    """Validated multiclass outputs, row-aligned.

    `probs` (n, c) rows sum to 1; `logits` (n, c) finite; either may be None but not both.
    `labels` (n,) int64 in 0..c−1, or None when labels were not asked for (applying a map).
    `client` (n,) int64 codes 0..n_clients−1 from a client column, else None.
    """

    labels: np.ndarray | None
    probs: np.ndarray | None
    logits: np.ndarray | None
    client: np.ndarray | None = None
    n_clients: int = 0
    source: str = "<arrays>"

    def _scores(self) -> np.ndarray:
        """The probability matrix, else the logit matrix (one of the two is always held)."""
        if self.probs is not None:
            return self.probs
        if self.logits is not None:
            return self.logits
        raise AssertionError("MulticlassData holds neither probabilities nor logits")

    @property
    def rows(self) -> int:
        return len(self._scores())

    @property
    def n_classes(self) -> int:
        classes: int = self._scores().shape[1]
        return classes

    def probabilities(self) -> np.ndarray:
        """Class probabilities: the prob columns, else softmax of the logits."""
        return self.probs if self.probs is not None else softmax(self._scores())

    def log_scores(self) -> np.ndarray:
        """Logits: the logit columns, else log of the probabilities (softmax(log p) = p)."""
        if self.logits is not None:
            return self.logits
        logs: np.ndarray = np.log(np.maximum(self._scores(), LOG_FLOOR))
        return logs

    def take(self, rows: np.ndarray) -> MulticlassData:
        """The same data restricted to `rows` (indices or a mask); clients keep their codes."""

        def sub(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[rows]

        return MulticlassData(
            sub(self.labels),
            sub(self.probs),
            sub(self.logits),
            sub(self.client),
            self.n_clients,
            self.source,
        )


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of logits / temperature in float64, shifted by the row max (no overflow)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    probs: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return probs


def class_columns(names: list[str], prefix: str) -> list[str]:
    """The columns `prefix`0..`prefix`{c−1} among `names`, in class order ([] if none).

    Raises `InputError` if the numbering has gaps (a missing class would shift every later one).
    """
    pattern = re.compile(re.escape(prefix) + r"(\d+)$")
    found = {int(m.group(1)): n for n in names if (m := pattern.match(n))}
    if not found:
        return []
    c = max(found) + 1
    missing = [f"{prefix}{j}" for j in range(c) if j not in found]
    if missing:
        raise InputError(
            f"class columns must be numbered {prefix}0..{prefix}{c - 1} without gaps; "
            f"missing: {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}."
        )
    return [found[j] for j in range(c)]


def _first(mask: pa.Array | np.ndarray) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0])


def _numbers(arr: pa.Array, name: str, col: str, offset: int, what: str) -> np.ndarray:
    """A column as float64: text (CSV) parsed, nulls and non-numbers reported with their row."""
    where = f"'{name}', column '{col}'"
    if arr.null_count:
        raise InputError(f"{where}, row {offset + _first(arr.is_null()) + 1}: {what} is missing.")
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        trimmed = pc.utf8_trim_whitespace(arr)
        try:
            arr = pc.cast(trimmed, pa.float64())
        except pa.ArrowInvalid:
            for i, v in enumerate(trimmed.to_pylist()):
                try:
                    float(v)
                except ValueError:
                    raise InputError(
                        f"{where}, row {offset + i + 1}: {what} {v!r} is not a number."
                    ) from None
            raise
    if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)):
        raise InputError(f"{where}: {what}s must be numbers, found type {arr.type}.")
    values: np.ndarray = arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return values


def _matrix(rb: pa.RecordBatch, cols: list[str], name: str, offset: int, what: str) -> np.ndarray:
    out = np.empty((rb.num_rows, len(cols)), np.float64)
    for j, col in enumerate(cols):
        out[:, j] = _numbers(_chunk(rb.column(col)), name, col, offset, what)
    return out


def _chunk(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _check_finite(x: np.ndarray, what: str, name: str, cols: list[str], offset: int) -> None:
    """Raise `InputError` naming the first NaN or infinite cell of `x` (a `what`), its column
    and row."""
    bad = ~np.isfinite(x)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(
            f"'{name}', column '{cols[j]}', row {offset + i + 1}: {what} is "
            f"{'NaN' if np.isnan(x[i, j]) else 'infinite'}."
        )


def check_probs(p: np.ndarray, name: str, cols: list[str], offset: int = 0) -> np.ndarray:
    """Rows of finite probabilities in [0, 1] summing to 1 (within tolerance), renormalised.

    Raises `InputError` naming the first bad cell's column and row.
    """
    _check_finite(p, "probability", name, cols, offset)
    bad = (p < 0) | (p > 1)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(
            f"'{name}', column '{cols[j]}', row {offset + i + 1}: probability "
            f"{float(p[i, j])!r} is outside [0, 1]; if these are logits, name them with the logit "
            "prefix instead."
        )
    tol = max(PROB_SUM_TOLERANCE, 1e-4 * p.shape[1])
    total = p.sum(axis=1)
    bad = np.abs(total - 1.0) > tol
    if bad.any():
        i = _first(bad)
        raise InputError(
            f"'{name}', columns '{cols[0]}'..'{cols[-1]}', row {offset + i + 1}: probabilities "
            f"sum to {total[i]:.6g}, not 1 (tolerance {tol:g}); every class needs its column."
        )
    renormalised: np.ndarray = p / total[:, None]
    return renormalised


def check_logits(z: np.ndarray, name: str, cols: list[str], offset: int = 0) -> np.ndarray:
    """Finite logits; raises `InputError` naming the first bad cell's column and row."""
    _check_finite(z, "logit", name, cols, offset)
    return z


def check_labels(
    arr: pa.Array | np.ndarray, name: str, col: str, n_classes: int, offset: int = 0
) -> np.ndarray:
    """Integer class indices in 0..n_classes−1 (int64); floats must be whole numbers."""
    where = f"'{name}', column '{col}'"
    if isinstance(arr, pa.Array):
        if arr.null_count:
            raise InputError(
                f"{where}, row {offset + _first(arr.is_null()) + 1}: label is missing."
            )
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            y = _numbers(arr, name, col, offset, "label")
        elif pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
            y = arr.to_numpy(zero_copy_only=False)
        else:
            raise InputError(
                f"{where}: labels must be integer class indices 0..{n_classes - 1}, found type "
                f"{arr.type}."
            )
    else:
        y = np.asarray(arr)
        if y.dtype.kind not in "iuf":
            raise InputError(
                f"{where}: labels must be integer class indices 0..{n_classes - 1}, found dtype "
                f"{y.dtype}."
            )
    if y.dtype.kind == "f":
        bad = ~(np.isfinite(y) & (y == np.round(y)))
        if bad.any():
            i = _first(bad)
            raise InputError(
                f"{where}, row {offset + i + 1}: label {y[i].item()!r} is not a whole number; "
                f"labels are class indices 0..{n_classes - 1}."
            )
    bad = (y < 0) | (y >= n_classes)
    if bad.any():
        i = _first(bad)
        raise InputError(
            f"{where}, row {offset + i + 1}: label {y[i].item()!r} is not a class index in "
            f"0..{n_classes - 1} (there are {n_classes} class columns)."
        )
    return y.astype(np.int64)


@dataclass(frozen=True)
class ColumnSpec:
    """Which columns hold what in a multiclass table."""

    label: str = LABEL_COL
    prob_prefix: str = PROB_PREFIX
    logit_prefix: str = LOGIT_PREFIX
    client: str | None = None


def resolve_columns(
    names: list[str], name: str, spec: ColumnSpec, need: InputKind | None
) -> tuple[list[str], list[str]]:
    """(prob columns, logit columns) present; `need` says which kind must be there (None: one).

    Raises `InputError` naming the file when a needed kind is absent or the class counts differ.
    """
    try:
        probs = class_columns(names, spec.prob_prefix)
        logits = class_columns(names, spec.logit_prefix)
    except InputError as e:
        raise InputError(f"'{name}': {e}") from None
    have = ", ".join(names) or "none"
    if need is InputKind.PROBS and not probs:
        raise InputError(
            f"'{name}' has no probability columns '{spec.prob_prefix}0', '{spec.prob_prefix}1', "
            f"… (it has: {have}); name their prefix with the prob prefix option."
        )
    if need is InputKind.LOGITS and not logits:
        raise InputError(
            f"'{name}' has no logit columns '{spec.logit_prefix}0', '{spec.logit_prefix}1', … "
            f"(it has: {have}); name their prefix with the logit prefix option."
        )
    if not probs and not logits:
        raise InputError(
            f"'{name}' has neither probability columns '{spec.prob_prefix}0', … nor logit "
            f"columns '{spec.logit_prefix}0', … (it has: {have}); name their prefixes with the "
            "prob/logit prefix options."
        )
    if probs and logits and len(probs) != len(logits):
        raise InputError(
            f"'{name}' has {len(probs)} '{spec.prob_prefix}*' columns but {len(logits)} "
            f"'{spec.logit_prefix}*' columns; both must cover the same classes."
        )
    for cols in (probs, logits):
        if cols and len(cols) < 2:
            raise InputError(f"'{name}': column '{cols[0]}' alone is one class; need at least 2.")
    return probs, logits


def parse_batch(
    rb: pa.RecordBatch,
    name: str,
    spec: ColumnSpec,
    prob_cols: list[str],
    logit_cols: list[str],
    *,
    offset: int,
    labels: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(labels, probs, logits) of one batch, validated; `offset` = rows before it."""
    p = z = y = None
    if prob_cols:
        p = check_probs(
            _matrix(rb, prob_cols, name, offset, "probability"), name, prob_cols, offset
        )
    if logit_cols:
        z = check_logits(_matrix(rb, logit_cols, name, offset, "logit"), name, logit_cols, offset)
    if labels:
        c = len(prob_cols or logit_cols)
        y = check_labels(_chunk(rb.column(spec.label)), name, spec.label, c, offset)
    return y, p, z


def read_multiclass(
    source: str | os.PathLike[str],
    spec: ColumnSpec = ColumnSpec(),
    *,
    need: InputKind | None = None,
) -> MulticlassData:
    """Read and validate a whole multiclass table (Parquet, CSV, or '-' for CSV on stdin).

    Every prob/logit column present is read (both kinds if both are there); `need` makes one
    kind required. A client column is read when `spec.client` names one.
    """

    name = source_name(source)
    # CSV cells arrive as text so that a bad value is reported with its row.
    names, batches, _ = read_all_columns(source, keep_text=True)
    prob_cols, logit_cols = resolve_columns(names, name, spec, need)
    if spec.label not in names:
        raise InputError(
            f"'{name}' has no column '{spec.label}' (it has: {', '.join(names)}); name the right "
            "one with the label column option."
        )
    if spec.client is not None and spec.client not in names:
        raise InputError(
            f"'{name}' has no column '{spec.client}' (it has: {', '.join(names)}); drop the "
            "client column option to assign clients instead."
        )
    ys: list[np.ndarray] = []
    ps: list[np.ndarray] = []
    zs: list[np.ndarray] = []
    ids: list[pa.Array] = []
    offset = 0
    for rb in batches:
        if rb.num_rows == 0:
            continue
        y, p, z = parse_batch(rb, name, spec, prob_cols, logit_cols, offset=offset, labels=True)
        # labels=True always yields labels; p and z are there exactly when their columns are.
        for parts, part in ((ys, y), (ps, p), (zs, z)):
            if part is not None:
                parts.append(part)
        if spec.client is not None:
            col = _chunk(rb.column(spec.client))
            check_client_ids(col, name, spec.client, offset)
            ids.append(col)
        offset += rb.num_rows
    if offset == 0:
        raise InputError(f"'{name}' has no rows: nothing to calibrate.")
    client, k = None, 0
    if ids:
        enc = pc.dictionary_encode(pa.chunked_array(ids).cast(pa.string())).combine_chunks()
        client = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        k = len(enc.dictionary)
    return MulticlassData(
        np.concatenate(ys),
        np.concatenate(ps) if prob_cols else None,
        np.concatenate(zs) if logit_cols else None,
        client,
        k,
        name,
    )


def multiclass_from_arrays(
    y_true: ArrayLike,
    *,
    probs: ArrayLike | None = None,
    logits: ArrayLike | None = None,
    client_ids: ArrayLike | None = None,
    name: str = "<arrays>",
) -> MulticlassData:
    """Validate in-memory arrays: labels (n,), probs and/or logits (n, c), optional client ids."""
    if probs is None and logits is None:
        raise UsageError("pass `probs` (n, c) or `logits` (n, c), or both.")
    p = z = None
    shapes = []
    if probs is not None:
        p = np.asarray(probs, dtype=np.float64)
        shapes.append(p.shape)
    if logits is not None:
        z = np.asarray(logits, dtype=np.float64)
        shapes.append(z.shape)
    if any(len(s) != 2 or s[1] < 2 or s[0] == 0 for s in shapes) or len(set(shapes)) > 1:
        raise UsageError(
            f"`probs` and `logits` must be non-empty (n, c) arrays with c ≥ 2 of one shape. "
            f"Found {shapes}."
        )
    n, c = shapes[0]
    if p is not None:
        p = check_probs(p, name, [f"prob_{j}" for j in range(c)])
    if z is not None:
        z = check_logits(z, name, [f"logit_{j}" for j in range(c)])
    y = np.asarray(y_true)
    if y.shape != (n,):
        raise UsageError(f"`y_true` must have shape ({n},). Found {y.shape}.")
    y = check_labels(y, name, "y_true", c)
    client, k = None, 0
    if client_ids is not None:
        ids = np.asarray(client_ids)
        if ids.shape != (n,):
            raise UsageError(f"`client_ids` must have shape ({n},). Found {ids.shape}.")
        _, client = np.unique(ids, return_inverse=True)
        client = client.astype(np.int64)
        k = int(client.max()) + 1
    return MulticlassData(y, p, z, client, k, name)


def iter_unlabelled(
    source: str | os.PathLike[str], spec: ColumnSpec, kind: InputKind, *, keep_text: bool
) -> tuple[list[str], Iterator[tuple[pa.RecordBatch, np.ndarray]]]:
    """(column names, batches with the validated (n, c) matrix of `kind`) for applying a map.

    `keep_text`: CSV columns pass through as written (for CSV output); otherwise types are
    inferred (for Parquet output). Labels are not read.
    """

    name = source_name(source)
    names, batches, _ = read_all_columns(source, keep_text=keep_text, batch_rows=APPLY_ROWS)
    prob_cols, logit_cols = resolve_columns(names, name, spec, kind)
    cols = prob_cols if kind is InputKind.PROBS else logit_cols
    step = max(1, APPLY_CELLS // len(cols))

    def gen() -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
        offset = 0
        for batch in batches:
            # Slices of at most APPLY_CELLS values: the (rows, c) matrices and their softmax
            # temporaries stay a few MB whatever the reader's batch size (a CSV block).
            for start in range(0, batch.num_rows, step):
                rb = batch.slice(start, step)
                if kind is InputKind.PROBS:
                    _, m, _ = parse_batch(rb, name, spec, cols, [], offset=offset, labels=False)
                else:
                    _, _, m = parse_batch(rb, name, spec, [], cols, offset=offset, labels=False)
                if m is None:  # parse_batch returns the matrix of the columns it is given
                    raise AssertionError("no score matrix parsed")
                yield rb, m
                offset += rb.num_rows
        if offset == 0:
            raise InputError(f"'{name}' has no rows: nothing to calibrate.")

    return names, gen()
