"""The scored data a simulation holds, reduced as it streams in: leaf counts per class at a
fixed resolution (any coarser height is a sum of them), and, when asked for, the raw scores (for
the exact metrics) and per-example records (for the per-client reference path)."""

from __future__ import annotations

import mmap
import os
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from fedeval.core.axis import ScoreAxis, leaf_lookup, lookup_chunk
from fedeval.core.errors import InputError, UsageError
from fedeval.core.hierarchy import cell_index, coarsen
from fedeval.estimate.exact import SortedScores, pack, widen
from fedeval.estimate.parallel_sort import RELEASE, anonymous_map, merge_sorted_runs
from fedeval.tables.read import DEFAULT_COLUMNS, Columns, scan, source_name, validate_piece
from fedeval.tables.sources import Piece, parquet_rows
from fedeval.tables.validate import Batch, validate_batch


@dataclass(frozen=True, eq=False)
class Examples:
    """Per-example records for the per-client path: unit scores, positives, client codes."""

    unit_scores: np.ndarray
    positive: np.ndarray
    client: np.ndarray  # int64 codes 0..n_clients-1


@dataclass(frozen=True, eq=False)
class ScoredData:
    """Sufficient statistics of a scored, labelled table.

    `fine_counts` has shape (2, 2^resolution): [negatives, positives] per cell of the scores
    mapped to [0, 1] by `axis` (linear on the score range, or warped so declared thresholds fall
    on cell edges).
    """

    fine_counts: np.ndarray
    resolution: int
    rows: int
    n_clients: int
    axis: ScoreAxis
    sorted_scores: SortedScores | None = None
    examples: Examples | None = None
    client_ids: pa.Array | None = None  # the id of each client code, when examples are kept
    dropped: int = 0  # examples left out by a per-client cap (see `cap_examples`)
    grouped: bool = False  # the input names clients (a client column): a schema fact, no count
    _coarser: dict[int, np.ndarray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """`leaf_counts` below the resolution, by height, once summed (read-only; a `replace` of
    the data starts afresh): one set of data makes many releases (a coverage test's hundreds,
    a plan's draws), each summing the 2^resolution cells at the probe's level and the tree's."""

    @property
    def score_range(self) -> tuple[float, float]:
        return self.axis.score_range

    @property
    def positives(self) -> int:
        return int(self._totals()[1])

    @property
    def negatives(self) -> int:
        return int(self._totals()[0])

    def _totals(self) -> np.ndarray:
        """[negatives, positives]: integer counts summed once (`leaf_counts(0)`, exact in any
        order; every release checks both classes), other counts as they are."""
        if self.resolution > 0 and np.issubdtype(self.fine_counts.dtype, np.integer):
            return self.leaf_counts(0)[:, 0]
        return np.array([self.fine_counts[0].sum(), self.fine_counts[1].sum()])

    def leaf_counts(self, height: int) -> np.ndarray:
        """Exact per-class counts of the 2^height leaves, shape (2, 2^height)."""
        if height > self.resolution:
            raise UsageError(
                f"the data were reduced to height {self.resolution}; height {height} needs them "
                f"read again at that resolution."
            )
        if height >= self.resolution:
            return coarsen(self.fine_counts, height)
        kept = self._coarser.get(height)
        if kept is None:
            kept = coarsen(self.fine_counts, height)
            kept.setflags(write=False)
            self._coarser[height] = kept
        return kept.copy()

    def to_unit(self, x: np.ndarray | float) -> np.ndarray:
        """Map scores (or thresholds) from the score range onto [0, 1]."""
        return self.axis.to_unit(x)


@dataclass(frozen=True, eq=False)
class _Part:
    """One batch reduced: its leaf counts and what else the run keeps of it."""

    counts: np.ndarray
    rows: int
    neg: np.ndarray | None
    pos: np.ndarray | None
    keys: np.ndarray | None  # the scores packed with their labels (`pack`), instead of neg/pos
    unit: np.ndarray | None
    labels: np.ndarray | None
    clients: pa.Array | None


MERGE_THREADS = 4
"""Threads from which the kept keys are sorted as runs and merged in the pool: the runs' sort
and the merge's each cost about one sort of all the keys, so with fewer threads one sort in a
thread of its own, while the release is made, ends as early (measured on 2 cores: 10M rows,
the merge took more CPU and no less wall time)."""


class _Accumulator:
    """Batches are reduced one by one (`reduce`, safe to run in threads: numpy releases the
    GIL) and merged in their order (`merge`): leaf counts are integer sums and kept arrays are
    concatenated in file order, so the result is the same bit for bit whatever the threads."""

    def __init__(
        self,
        resolution: int,
        axis: ScoreAxis,
        keep_scores: bool,
        keep_examples: bool,
        rows: int | None = None,
    ):
        self.resolution = resolution
        self.axis = axis
        # Scores already on [0, 1] are their own unit positions: no per-batch map.
        self.identity = axis == ScoreAxis.linear()
        self.keep_scores = keep_scores
        self.keep_examples = keep_examples
        self.counts = np.zeros(2 << resolution, np.int64)
        self.rows = 0
        # Scores on a non-negative range are kept packed with their labels in one buffer (one
        # sort orders them by score and class: `fedeval.estimate.exact.pack`); others, each class
        # apart. `rows`: the source's rows, when known before reading.
        self.packed = keep_scores and axis.lo >= 0
        self.threads = 1  # more: the kept scores are sorted in another thread
        # With MERGE_THREADS threads or more and the rows known, each batch's keys are sorted
        # by the thread that reduced it, into a memory map, and the sorted runs merged in the
        # pool at the end (`merge_sorted_runs`): no serial sort of all the keys. Set by
        # `parallel`.
        self.presort = False
        self.runs: list[int] = []  # where each sorted run starts in `keys`
        self.keys = _Growing(rows or 0)
        # With the rows known, the keys' buffer is a private anonymous map (`_Growing.mapped`),
        # not numpy's allocation: numpy asks for transparent huge pages on large arrays, and
        # where the system then compacts memory to find them (THP defrag `madvise`, a common
        # default) the first touch of 100M keys cost 0.27-0.58 CPU-s against 0.16 in 4 kB pages.
        self.keys.mapped = bool(rows) and RELEASE is not None
        self.neg = _Growing(0 if self.packed else rows or 0)
        self.pos = _Growing(0 if self.packed else rows or 0)
        self.unit: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.clients: list[pa.Array] = []

    def parallel(self, threads: int, rows: int | None) -> None:
        """Use `threads` threads: with the rows known and at least `MERGE_THREADS` of them,
        keys are kept as sorted runs in a map."""
        self.threads = threads
        if threads >= MERGE_THREADS and self.packed and rows and RELEASE is not None:
            self.presort = True
            self.keys.mapped = True
            self.keys.threads = threads

    def reduce(self, b: Batch) -> _Part:
        n_leaves = 1 << self.resolution
        unit = None
        lookup = None
        if not (self.identity or self.keep_examples):
            lookup = leaf_lookup(self.axis, self.resolution, b.scores.dtype.str)
        if lookup is not None:  # a warped or shifted axis: the leaves by one table look-up
            idx = lookup(b.scores, lookup_chunk(self.threads))
        else:
            # Same cells as hierarchy.cell_index, in fewer passes: scaling by 2^h is exact in
            # any float width; on [0, 1] the clamp is needed only when a score sits on the top
            # of the range. Mapped from another range, a score below its top can round to 1
            # (a range far wider than its scores' spacing), so there it is always clamped.
            unit = b.scores if self.identity else self.axis.to_unit(b.scores)
            idx = (unit * n_leaves).astype(np.int32)
            if b.score_max >= self.axis.hi or not self.identity:
                np.minimum(idx, n_leaves - 1, out=idx)
        # The class goes into the index by adding 2^h to the positives (a masked add is slower).
        idx += b.positive.view(np.int8) * np.int32(n_leaves)
        split, ex = self.keep_scores and not self.packed, self.keep_examples
        return _Part(
            np.bincount(idx, minlength=2 * n_leaves),
            len(idx),
            np.compress(~b.positive, b.scores) if split else None,  # (a boolean index is
            np.compress(b.positive, b.scores) if split else None,  # several times slower)
            self._keys(b) if self.packed else None,
            unit if ex else None,
            b.positive if ex else None,
            b.clients,
        )

    def _keys(self, b: Batch) -> np.ndarray:
        """The batch's packed keys; sorted (a run) when the runs are merged at the end."""
        keys = pack(b.scores, b.positive)
        if self.presort:
            keys.sort()
        return keys

    def merge(self, part: _Part) -> None:
        self.counts += part.counts
        self.rows += part.rows
        if part.neg is not None and part.pos is not None:  # kept scores
            self.neg.extend(part.neg)
            self.pos.extend(part.pos)
        if part.keys is not None:
            keys, kept = part.keys, self.keys
            if kept.data is not None and kept.data.dtype != keys.dtype:  # float32, then float64
                if keys.dtype == np.uint32:
                    keys = widen(keys)
                else:
                    kept.data = widen(kept.data[: kept.size])
                    kept.mapped, kept.source = False, None  # a plain array: one sort at the end
            self.runs.append(kept.size)
            kept.extend(keys)
        if part.unit is not None and part.labels is not None:  # kept examples
            self.unit.append(part.unit)
            self.labels.append(part.labels)
        if part.clients is not None:
            self.clients.append(part.clients)

    def add(self, b: Batch) -> None:
        self.merge(self.reduce(b))

    def finish(self) -> ScoredData:
        sorted_scores = None
        if self.packed:
            sorting: Future[np.ndarray | None] | None = None
            if self.keys.data is None:
                keys = np.zeros(0, np.uint32)
            elif self.presort and self.keys.source is not None:
                # the sorted runs merged in the pool while the release is made
                source, keys = self.keys.source, self.keys.unsorted()
                runs = [
                    keys[a:b] for a, b in zip(self.runs, [*self.runs[1:], len(keys)], strict=True)
                ]
                merger = ThreadPoolExecutor(1, "fedeval-sort")
                sorting = merger.submit(merge_sorted_runs, runs, self.threads, source, self.runs)
                merger.shutdown(wait=False)
                del runs
            elif self.threads > 1:  # sorted in another thread while the release is made
                keys = self.keys.unsorted()
                sorter = ThreadPoolExecutor(1, "fedeval-sort")
                sorting = sorter.submit(keys.sort)
                sorter.shutdown(wait=False)  # its thread ends with the sort
            else:
                keys = self.keys.sorted()
            dtype = np.float32 if keys.dtype == np.uint32 else np.float64
            positives = int(self.counts[1 << self.resolution :].sum())
            sorted_scores = SortedScores.from_keys(keys, dtype, positives, sorting)
            sorted_scores.threads = self.threads
        elif self.keep_scores:
            sorted_scores = SortedScores(self.neg.sorted(), self.pos.sorted())
        codes = uniques = None
        if self.clients:
            ids = pa.chunked_array(self.clients)
            if self.keep_examples:
                codes, uniques = _factorize(ids)
                n_clients = len(uniques)
            else:
                n_clients = pc.count_distinct(ids).as_py()
        else:
            n_clients = self.rows  # one example per client: the papers' setting
        examples = None
        if self.keep_examples:
            client = np.arange(self.rows) if codes is None else codes.astype(np.int64)
            examples = Examples(np.concatenate(self.unit), np.concatenate(self.labels), client)
        return ScoredData(
            self.counts.reshape(2, 1 << self.resolution),
            self.resolution,
            self.rows,
            n_clients,
            self.axis,
            sorted_scores,
            examples,
            None if uniques is None else pa.array(uniques),
            grouped=bool(self.clients),
        )


def _factorize(ids: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each id, the distinct ids) numbered in the order of the sorted ids, as
    `pandas.factorize(sort=True)`: a canonical order, so that the roster, the report parts and
    which client each report belongs to do not depend on where a client's first row sits in
    the file (order is data: moving one row must not change what the server receives).
    Integer ids in non-decreasing order (rows grouped by client, sorted) are numbered by
    counting where the id changes: the same codes without a hash table."""
    if pa.types.is_integer(ids.type) and ids.null_count == 0:
        values = ids.to_numpy()
        change = values[1:] != values[:-1]
        if len(values) and bool(np.all(values[1:] >= values[:-1])):
            codes = np.zeros(len(values), np.int64)
            np.cumsum(change, out=codes[1:])
            return codes, values[np.r_[True, change]]
    import pandas as pd  # only the per-client path needs dense client codes

    return pd.factorize(ids.to_pandas(), sort=True)


class _Growing:
    """Scores appended batch by batch into one array, then sorted in place.

    The capacity grows by a quarter by `ndarray.resize`, a realloc: for a large buffer it
    remaps the pages already written without copying them. numpy zero-fills the new quarter,
    so at most a quarter more than the scores is held, never twice the scores as when parts
    are kept and joined. `mapped`: the array is an anonymous memory map (`source`) of the
    known capacity, whose pages a merge can give back as it reads them."""

    def __init__(self, capacity: int = 0) -> None:
        self.data: np.ndarray | None = None
        self.size = 0
        self.capacity = capacity
        self.mapped = False
        self.source: mmap.mmap | None = None
        self.threads = 1  # a map's pages are first touched by this many threads

    def extend(self, a: np.ndarray) -> None:
        if self.data is None:
            # With the source's rows known, room for all of them at once: pages never written
            # are never resident, and no growth step zero-fills or remaps.
            size = max(len(a), self.capacity, 1 << 16)
            if self.mapped:
                self.source = anonymous_map(size * a.dtype.itemsize)
                self.data = np.frombuffer(self.source, a.dtype)
                _touch(self.data, self.threads)
            else:
                self.data = np.empty(size, a.dtype)
        elif np.result_type(self.data, a) != self.data.dtype:  # a wider dtype in a later file
            self.data = self.data[: self.size].astype(np.result_type(self.data, a))
        need = self.size + len(a)
        if need > len(self.data) and self.source is not None:  # more rows than announced
            self.data, self.source, self.mapped = self.data[: self.size].copy(), None, False
        if need > len(self.data):
            self.data.resize(max(need, len(self.data) + len(self.data) // 4), refcheck=False)
        self.data[self.size : need] = a
        self.size = need

    def sorted(self) -> np.ndarray:
        """The scores sorted (in place: the buffer, shrunk to them, is handed over)."""
        out = self.unsorted()
        out.sort()
        return out

    def unsorted(self) -> np.ndarray:
        """The scores in the order appended (the buffer, shrunk to them, is handed over)."""
        if self.data is None:
            return np.zeros(0)
        out, self.data = self.data, None
        if self.source is not None:  # a view of the map: not resized
            return out[: self.size]
        out.resize(self.size, refcheck=False)
        return out


def _touch(buf: np.ndarray, threads: int) -> None:
    """Write one element of each page of a fresh map, a part per thread: the system zero-fills a
    page when it is first written, and the batches' keys are copied in on the calling thread
    (4 GB on the 16-core machine: first touch 1.5 s on one thread, 0.13 s on 16; copying into
    pages already there 0.6 s instead of 1.5 s)."""
    if threads <= 1:
        return
    step = max(mmap.PAGESIZE // buf.itemsize, 1)
    cuts = [len(buf) * k // threads // step * step for k in range(threads)] + [len(buf)]

    def touch(k: int) -> None:
        buf[cuts[k] : cuts[k + 1] : step] = 0

    with ThreadPoolExecutor(threads, "fedeval-touch") as pool:
        list(pool.map(touch, range(threads)))


DEFAULT_RESOLUTION = 16
"""Enough for every height `--height auto` picks."""


def _axis(score_range: tuple[float, float], axis: ScoreAxis | None) -> ScoreAxis:
    lo, hi = (float(x) for x in score_range)
    if axis is None:
        return ScoreAxis.linear(lo, hi)
    if axis.score_range != (lo, hi) and (lo, hi) != (0.0, 1.0):
        raise UsageError(
            f"the axis spans [{axis.lo:g}, {axis.hi:g}] but the score range is [{lo:g}, {hi:g}]."
        )
    return axis


def _accumulate(
    batches: Iterable[Batch],
    resolution: int,
    axis: ScoreAxis,
    keep_scores: bool,
    keep_examples: bool,
) -> ScoredData:
    acc = _Accumulator(resolution, axis, keep_scores, keep_examples)
    for b in batches:
        acc.add(b)
    return acc.finish()


def default_threads() -> int:
    """Every core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _check_threads(threads: int | None) -> int:
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int | np.integer) or threads < 1:
        raise UsageError(f"`threads` must be a positive integer. Found {threads!r}.")
    return int(threads)


def read_scored(
    source: str | os.PathLike[str],
    columns: Columns = DEFAULT_COLUMNS,
    *,
    score_range: tuple[float, float] = (0.0, 1.0),
    pos_label: object = None,
    keep_scores: bool = True,
    keep_examples: bool = False,
    resolution: int = DEFAULT_RESOLUTION,
    axis: ScoreAxis | None = None,
    threads: int | None = None,
    progress: Callable[[int | None], None] | None = None,
) -> ScoredData:
    """Stream a Parquet/CSV file, '-', a directory of files (hive partitions included) or a
    glob into `ScoredData` with 2^resolution cells per class, in bounded memory unless scores or
    examples are kept. `axis` (default: linear on `score_range`) maps scores onto the cells.

    Batches are validated and histogrammed by `threads` threads (default: every core); the
    result is the same bit for bit for any number. `progress(rows)` is called with the rows
    read so far after each batch, and `progress(None)` once when the read ends (or fails).
    """
    axis = _axis(score_range, axis)
    threads = _check_threads(threads)
    rows = parquet_rows(source) if keep_scores else None
    acc = _Accumulator(resolution, axis, keep_scores, keep_examples, rows)
    acc.parallel(threads, rows)
    pieces = scan(source, columns, threads=threads)
    lo_hi = axis.score_range
    labels_seen: dict[object, None] = {}

    def validate(piece: Piece, seen: dict[object, None] | None) -> Batch:
        return validate_piece(
            piece, columns, score_range=lo_hi, pos_label=pos_label, labels_seen=seen
        )

    def merge(part: _Part) -> None:
        acc.merge(part)
        if progress is not None:
            progress(acc.rows)

    try:
        _read_all(pieces, acc, threads, validate, merge, labels_seen, pos_label is None)
    finally:
        if progress is not None:
            progress(None)
    if acc.rows == 0:
        raise InputError(f"'{source_name(source)}' has no rows: nothing to evaluate.")
    if keep_scores or keep_examples:
        # Arrow's allocator keeps the freed batches' pages for reuse; the exact values'
        # passes allocate through numpy instead, so give them back first (peak memory at
        # 100M rows: 711 → 670 MB).
        release = getattr(pa.default_memory_pool(), "release_unused", None)
        if release is not None:
            release()
    return acc.finish()


def _read_all(
    pieces: Iterable[Piece],
    acc: _Accumulator,
    threads: int,
    validate: Callable[[Piece, dict[object, None] | None], Batch],
    merge: Callable[[_Part], None],
    labels_seen: dict[object, None],
    parallel_checks: bool,
) -> None:
    if threads == 1:
        for piece in pieces:
            merge(acc.reduce(validate(piece, labels_seen)))
    else:
        # With --pos-label the labels seen so far decide what is a third value, so validation
        # stays in file order on this thread; otherwise each batch is validated in its task.
        # Results are merged in submission order, so the first bad row in file order is the
        # one reported, and at most 2 × threads batches are in flight (bounded memory).
        pool = ThreadPoolExecutor(threads, thread_name_prefix="fedeval-read")
        pending: deque[Future[_Part]] = deque()
        try:
            for piece in pieces:
                if parallel_checks:
                    pending.append(pool.submit(lambda p: acc.reduce(validate(p, None)), piece))
                else:
                    pending.append(pool.submit(acc.reduce, validate(piece, labels_seen)))
                while len(pending) >= 2 * threads:
                    merge(pending.popleft().result())
            while pending:
                merge(pending.popleft().result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def cap_examples(data: ScoredData, max_examples: int, rng: np.random.Generator) -> ScoredData:
    """Keep at most `max_examples` examples per client, chosen uniformly at random without
    replacement: the contribution bound that unit-client privacy rests on.

    The exact values (`sorted_scores`) keep every example: they are what the user wants to know,
    so the cap's bias shows in the error. Needs per-example records.
    """
    ex = data.examples
    if ex is None:
        raise UsageError("capping examples per client needs per-example data (keep_examples=True).")
    n = len(ex.client)
    shuffled = rng.permutation(n)
    order = shuffled[np.argsort(ex.client[shuffled], kind="stable")]
    client_sorted = ex.client[order]
    starts = np.flatnonzero(np.r_[True, client_sorted[1:] != client_sorted[:-1]])
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    keep = np.sort(order[rank < max_examples])
    if len(keep) == n:
        return data
    unit = ex.unit_scores[keep]
    positive = ex.positive[keep]
    n_leaves = 1 << data.resolution
    cells = cell_index(unit, data.resolution)
    counts = np.bincount(cells + n_leaves * positive, minlength=2 * n_leaves)
    return ScoredData(
        counts.reshape(2, n_leaves),
        data.resolution,
        len(keep),
        data.n_clients,
        data.axis,
        data.sorted_scores,
        Examples(unit, positive, ex.client[keep]),
        data.client_ids,
        data.dropped + n - len(keep),
        data.grouped,
    )


def scored_from_arrays(
    y_true: npt.ArrayLike,
    y_score: npt.ArrayLike,
    *,
    client_ids: npt.ArrayLike | None = None,
    pos_label: object = None,
    score_range: tuple[float, float] = (0.0, 1.0),
    keep_scores: bool = True,
    keep_examples: bool = False,
    resolution: int = DEFAULT_RESOLUTION,
    axis: ScoreAxis | None = None,
) -> ScoredData:
    """Validate in-memory arrays exactly as a file would be, and reduce them."""
    axis = _axis(score_range, axis)
    y_score, y_true = np.asarray(y_score), np.asarray(y_true)
    if y_score.ndim != 1 or y_true.shape != y_score.shape:
        raise InputError(
            f"y_true and y_score must be 1-D and of equal length. Found shapes {y_true.shape} "
            f"and {y_score.shape}."
        )
    if client_ids is not None and np.shape(client_ids) != y_score.shape:
        raise InputError(
            f"client_ids must have shape {y_score.shape}. Found {np.shape(client_ids)}."
        )
    cols = {"score": pa.array(y_score), "label": pa.array(y_true)}
    if client_ids is not None:
        cols["client"] = pa.array(np.asarray(client_ids))
    rb = pa.record_batch(cols)
    if rb.num_rows == 0:
        raise InputError("y_true and y_score are empty: nothing to evaluate.")
    batch = validate_batch(
        rb,
        "<arrays>",
        "score",
        "label",
        "client" if client_ids is not None else None,
        score_range=axis.score_range,
        pos_label=pos_label,
    )
    return _accumulate([batch], resolution, axis, keep_scores, keep_examples)
