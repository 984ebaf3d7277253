"""Spreading a scored table over simulated clients: the first stage of the staged pipeline.

Schemes:

- ``iid``: a uniformly random assignment with client sizes differing by at most one.
- ``dirichlet``: label skew as in the seed paper *Private Federated Multiclass Post-hoc
  Calibration* (004), appendix A.2 "Modeling heterogeneity", after Yurochkin et al. (2019): for
  each class j draw p_j ~ Dirichlet(β·1_K) over the K clients and give client k a share p_{j,k}
  of the rows of class j. Smaller β, more skew; some clients may hold nothing.
- ``sizes``: labels spread independently of clients, client sizes Zipf-skewed: client of rank r
  (in a random order) expects a share ∝ r^(−s) of the rows.
- ``column``: keep an existing client id column (nothing is assigned; it is only summarised).

Under ``federated`` the release is a sum over clients, so it is blind to the partition: every
scheme gives the same counts and the same metrics. Partitions matter for what a client holds
(group privacy under DP, local calibration under label skew), which `summarise` describes.

Everything is vectorised over rows and clients; randomness comes from an explicit
`numpy.random.Generator`.
"""

from __future__ import annotations

import math
import os
import secrets
import sys
from dataclasses import dataclass
from enum import StrEnum
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import ArrayLike

from fedeval.core.config import one_of
from fedeval.core.errors import InputError, UsageError
from fedeval.protocol.simulate import rng_and_seed
from fedeval.tables.output_format import DataFormat
from fedeval.tables.outputs import compressed
from fedeval.tables.read import BATCH_ROWS, read_all_columns, source_name
from fedeval.tables.sources import STDIN
from fedeval.tables.validate import check_client_ids
from fedeval.tables.validate import positive_labels as positives
from fedeval.tables.write import atomic_output, csv_bytes, table_output


class Scheme(StrEnum):
    IID = "iid"
    DIRICHLET = "dirichlet"
    SIZES = "sizes"
    COLUMN = "column"


DEFAULT_BETA = 0.5
DEFAULT_ZIPF = 1.2
_BETA = "the Dirichlet concentration"
_ZIPF = "the Zipf exponent of client sizes"


@dataclass(frozen=True)
class PartitionSummary:
    """What a partition looks like from the clients' side.

    `label_skew` is the size-weighted mean over clients of |client positive share − global
    positive share|: 0 when every client holds the global mix, `label_skew_max` = 2p(1−p) when
    every client holds one class only (p the global positive share). The seed paper (004,
    appendix A.2, Table 8) measures the same heterogeneity by the classes a client lacks;
    `single_class_share` is that measure for two classes.
    """

    rows: int
    clients: int
    """Clients holding at least one example."""
    empty_clients: int
    min_size: int
    median_size: float
    max_size: int
    """Examples per non-empty client."""
    positive_share: float
    label_skew: float
    single_class_share: float
    """Share of the non-empty clients that hold one class only."""

    @property
    def label_skew_max(self) -> float:
        p = self.positive_share
        return 2.0 * p * (1.0 - p)

    @property
    def label_skew_normalised(self) -> float:
        """`label_skew` / `label_skew_max` in [0, 1] (0 when the data hold one class)."""
        top = self.label_skew_max
        return self.label_skew / top if top > 0 else 0.0


@dataclass(frozen=True)
class PartitionResult:
    """A partition written by `partition_file`: how it was made and what it looks like."""

    scheme: Scheme
    summary: PartitionSummary
    seed: int | None
    """The seed used (drawn when none was given); None for ``column`` (nothing is random)."""
    n_clients: int
    """Clients asked for (``column``: distinct ids in the column)."""
    beta: float | None = None
    zipf: float | None = None

    def describe(self) -> str:
        """The scheme with its parameter and seed, e.g. "dirichlet, β = 0.1, seed 7"."""
        parts = [self.scheme.value]
        if self.beta is not None:
            parts.append(f"β = {self.beta:g}")
        if self.zipf is not None:
            parts.append(f"s = {self.zipf:g}")
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        return ", ".join(parts)


def _positive_finite(value: float, option: str, meaning: str) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise UsageError(f"{option} ({meaning}) must be a finite number > 0. Found {value!r}.")
    return float(value)


def _check_n_clients(n_clients: object) -> int:
    if isinstance(n_clients, bool) or not isinstance(n_clients, int | np.integer):
        raise UsageError(f"`clients` must be a whole number ≥ 1. Found {n_clients!r}.")
    if n_clients < 1:
        raise UsageError(f"`clients` must be at least 1. Found {n_clients}.")
    return int(n_clients)


def assign_clients(
    y_positive: np.ndarray,
    n_clients: int,
    scheme: Scheme | str,
    rng: np.random.Generator,
    *,
    beta: float = DEFAULT_BETA,
    zipf: float = DEFAULT_ZIPF,
) -> np.ndarray:
    """A client index in 0..n_clients−1 for every row (int64, the shape of `y_positive`).

    `y_positive` is the class of each row (bool for binary; any class codes work for
    ``dirichlet``). `beta` is used by ``dirichlet`` only, `zipf` by ``sizes`` only.

    - ``iid``: a random permutation of the rows dealt round-robin, so sizes differ by at most
      one and every client is non-empty (needs n_clients ≤ rows).
    - ``dirichlet``: seed paper 004, appendix A.2 — per class j, p_j ~ Dirichlet(β·1_K),
      client counts ~ Multinomial(n_j, p_j), dealt to the class's rows in random order.
    - ``sizes``: client of rank r in a random order gets weight r^(−s); client counts ~
      Multinomial(n, weights / sum), dealt to the rows in random order (labels iid).

    Raises `UsageError` for n_clients < 1 or more clients than rows, β or s not finite and
    > 0, or ``column`` (nothing to assign).
    """
    scheme = one_of(Scheme, scheme, "scheme")
    k = _check_n_clients(n_clients)
    y = np.asarray(y_positive)
    if y.ndim != 1:
        raise UsageError(f"y_positive must be 1-D. Found shape {y.shape}.")
    n = len(y)
    if scheme is Scheme.COLUMN:
        raise UsageError("`scheme` column keeps an existing client column; nothing to assign.")
    if k > n:  # iid would leave clients empty; the others' draws would only add empty ones
        raise UsageError(
            f"there are {n:,} rows for {k:,} clients; ask for at most {n:,} `clients`."
        )
    client = np.empty(n, np.int64)
    if scheme is Scheme.IID:
        client[rng.permutation(n)] = np.arange(n, dtype=np.int64) % k
    elif scheme is Scheme.DIRICHLET:
        alpha = np.full(k, _positive_finite(beta, "`beta`", _BETA))
        for c in np.unique(y):  # one pass per class
            rows = np.flatnonzero(y == c)
            counts = _multinomial(rng, len(rows), rng.dirichlet(alpha))
            client[rng.permutation(rows)] = np.repeat(np.arange(k, dtype=np.int64), counts)
    elif scheme is Scheme.SIZES:
        s = _positive_finite(zipf, "`zipf`", _ZIPF)
        weights = (rng.permutation(k) + 1.0) ** -s
        counts = rng.multinomial(n, weights / weights.sum())
        client[rng.permutation(n)] = np.repeat(np.arange(k, dtype=np.int64), counts)
    return client


def _multinomial(rng: np.random.Generator, n: int, p: np.ndarray) -> np.ndarray:
    """Counts of `n` draws over the categories of `p`. numpy refuses weights whose partial sums
    pass 1 by rounding (a Dirichlet draw over 10^5 clients can); those are drawn by inverse CDF
    instead, the same distribution."""
    try:
        return rng.multinomial(n, p)
    except ValueError:
        cdf = np.cumsum(p)
        pick = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        return np.bincount(np.minimum(pick, len(p) - 1), minlength=len(p))


def summarise(
    client: ArrayLike, y_positive: ArrayLike, *, n_clients: int | None = None
) -> PartitionSummary:
    """Describe a partition: clients, examples per client, label skew (seed paper 004, A.2).

    `client` holds client codes 0..n_clients−1 when `n_clients` is given (so clients that got
    nothing are counted as empty), else any ids (every distinct id is one client).
    """
    y = np.asarray(y_positive, dtype=bool)
    c = np.asarray(client)
    if c.shape != y.shape or y.ndim != 1 or len(y) == 0:
        raise UsageError(
            f"client and y_positive must be 1-D, non-empty and of equal length. Found shapes "
            f"{c.shape} and {y.shape}."
        )
    if n_clients is None:
        _, codes = np.unique(c, return_inverse=True)
        k = int(codes.max()) + 1
    else:
        k = _check_n_clients(n_clients)
        codes = c.astype(np.int64, copy=False)
        if c.dtype.kind not in "iu" or codes.min() < 0 or codes.max() >= k:
            raise UsageError(f"client codes must be integers in 0..{k - 1}.")
    sizes = np.bincount(codes, minlength=k)
    pos = np.bincount(codes[y], minlength=k)
    held = sizes > 0
    size, share = sizes[held], pos[held] / sizes[held]
    n = len(y)
    p = float(y.mean())
    return PartitionSummary(
        rows=n,
        clients=int(held.sum()),
        empty_clients=int(k - held.sum()),
        min_size=int(size.min()),
        median_size=float(np.median(size)),
        max_size=int(size.max()),
        positive_share=p,
        label_skew=float(np.abs(share - p) @ size / n),
        single_class_share=float(np.mean((share == 0) | (share == 1))),
    )


# --- files -------------------------------------------------------------------------------------


def _typed_labels(arr: pa.Array) -> pa.Array:
    """CSV labels read as text, typed much as the CSV reader of `fedeval.tables.read.read_batches`
    infers
    them (int, else float, else bool), so they validate the same way; other text stays text
    (then --pos-label says which value is positive)."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return arr
    trimmed = pc.utf8_trim_whitespace(arr)
    for target in (pa.int64(), pa.float64(), pa.bool_()):
        try:
            return pc.cast(trimmed, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return arr


def _client_codes(ids: pa.ChunkedArray, name: str, col: str) -> tuple[np.ndarray, int]:
    check_client_ids(ids, name, col)
    enc = pc.dictionary_encode(ids).combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(enc.dictionary)


def partition_file(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    scheme: Scheme | str,
    n_clients: int | None = None,
    seed: int | np.random.Generator | None = None,
    beta: float | None = None,
    zipf: float | None = None,
    label_col: str = "label",
    pos_label: object = None,
    client_col: str = "client",
) -> PartitionResult:
    """Read `source` (Parquet, CSV or '-'), add a client column, write it to `output`.

    Every column is kept. `output` ending in .parquet/.pq writes Parquet, .csv.gz/.bz2/.zst
    compressed CSV, any other name CSV (all atomically: a failure leaves no file; a name asking
    for another format is refused before anything is read); None or '-' writes CSV to stdout.
    CSV to CSV keeps every cell byte for byte; CSV to Parquet infers column types as the readers
    do.
    Labels are validated as binary, as everywhere else (`pos_label` for other codings).

    ``column`` keeps the existing `client_col` (it must be there, with no missing ids) and takes
    no `n_clients`, `beta` or `zipf`; the other schemes need `n_clients` and refuse to overwrite
    an existing `client_col`. `beta` goes with ``dirichlet`` only, `zipf` with ``sizes`` only.
    """

    scheme = one_of(Scheme, scheme, "scheme")
    if beta is not None and scheme is not Scheme.DIRICHLET:
        raise UsageError("`beta` (the Dirichlet concentration) goes with `scheme` dirichlet only.")
    if zipf is not None and scheme is not Scheme.SIZES:
        raise UsageError(
            "`zipf` (the Zipf exponent of client sizes) goes with `scheme` sizes only."
        )
    if scheme is Scheme.COLUMN:
        if n_clients is not None:
            raise UsageError(
                f"`scheme` column keeps the clients of column '{client_col}'; drop `clients`."
            )
    elif n_clients is None:
        raise UsageError(f"`scheme` {scheme.value} needs the number of clients: pass `clients` K.")
    else:
        n_clients = _check_n_clients(n_clients)
    n_assign = n_clients or 0  # a number ≥ 1 for every scheme but column (checked just above)
    beta = _positive_finite(DEFAULT_BETA if beta is None else beta, "`beta`", _BETA)
    zipf = _positive_finite(DEFAULT_ZIPF if zipf is None else zipf, "`zipf`", _ZIPF)

    name = source_name(source)
    to_stdout = output is None or str(output) == STDIN
    spec = table_output(output)
    parquet = spec.format is DataFormat.PARQUET
    text = [client_col] if scheme is Scheme.COLUMN else []
    names, batches, is_csv = read_all_columns(source, keep_text=not parquet, text=text)
    if label_col not in names:
        raise InputError(
            f"'{name}' has no column '{label_col}' (it has: {', '.join(names) or 'none'}); "
            "name the right one with `label_col`."
        )
    if scheme is Scheme.COLUMN and client_col not in names:
        raise InputError(
            f"'{name}' has no column '{client_col}' (it has: {', '.join(names)}); `scheme` "
            "column keeps an existing client column: name it with `client_col`, or choose "
            "another scheme."
        )
    if scheme is not Scheme.COLUMN and client_col in names:
        raise UsageError(
            f"'{name}' already has a column '{client_col}'; pass `scheme` column to keep it, or "
            "name the new column with `client_col`."
        )
    # The whole table: a partition deals rows out globally (and the output may be the input).
    held = [rb for rb in batches if rb.num_rows]
    if not held:
        raise InputError(f"'{name}' has no rows: nothing to partition.")
    table = pa.Table.from_batches(held)
    labels = table.column(label_col).combine_chunks()
    if is_csv:
        labels = _typed_labels(labels)
    y = positives(labels, name, label_col, 0, pos_label, {})

    seed_used = None
    if scheme is Scheme.COLUMN:
        codes, k = _client_codes(table.column(client_col), name, client_col)
    else:
        # Assigning clients protects nothing (it shapes a simulation), so an unseeded run draws
        # a seed and reports it: the partition can always be made again.
        if seed is None:
            seed = secrets.randbits(63)
        rng, seed_used = rng_and_seed(seed)
        k = n_assign
        codes = assign_clients(y, k, scheme, rng, beta=beta, zipf=zipf)
        table = table.append_column(client_col, pa.array(codes, pa.int64()))
    summary = summarise(codes, y, n_clients=k)

    if output is None or to_stdout:
        _write(table, sys.stdout.buffer, parquet=False)
    else:
        with atomic_output(output, "wb") as f, compressed(f, spec.compression) as sink:
            _write(table, sink, parquet=parquet)
    return PartitionResult(
        scheme,
        summary,
        seed_used,
        k,
        beta if scheme is Scheme.DIRICHLET else None,
        zipf if scheme is Scheme.SIZES else None,
    )


def _write(table: pa.Table, sink: IO[bytes], *, parquet: bool) -> None:

    if parquet:
        import pyarrow.parquet as pq

        pq.write_table(table, sink)
        return
    for i, rb in enumerate(table.to_batches(max_chunksize=BATCH_ROWS)):
        sink.write(csv_bytes(rb, header=i == 0))
