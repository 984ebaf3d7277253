"""The distinct scores from the top, a block at a time, with the counts at and above each:
what `fedeval.estimate.diagnostics.exact_diagnostics` sums. Made one block after another
(`rows_from_top`), or as tasks each block of which needs only the counts above it
(`row_tasks`: the packed keys' positives counted per block first), to run in a pool; with the
executors that run them (`Inline`: on the calling thread; `ahead`: results in order, a bounded
number running)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any, ParamSpec, TypeVar

import numpy as np

from fedeval.estimate.exact import SortedScores

P = ParamSpec("P")
T = TypeVar("T")

Block = tuple[
    np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]
"""(scores, where, TP, FP, positives, negatives, TP + FP): `rows_from_top`' block."""


def rows_from_top(s: SortedScores, block: int) -> Iterator[tuple[Block, float, float]]:
    """The distinct scores from the top, about `block` at a time: (scores, where, TP, FP,
    positives, negatives, TP + FP), descending, the counts at each distinct score as float64
    (integers below 2^53 stay exact through the sums, in SIMD loops); the distinct scores are
    `scores[where]` (`where` None: all of them), read only where a point is kept. Each block
    comes with (TP, FP) above it.

    Packed keys are read from the top: TP is the running count of their labels (one
    cumulative sum), FP the rank less TP, and a run of equal scores is read at its end."""
    tp0 = fp0 = 0.0
    if s.keys is None:
        for d in s.distinct_blocks(block, descending=True):
            dp = d.positives[::-1].astype(np.float64)
            dn = d.negatives[::-1].astype(np.float64)
            tp = np.cumsum(dp)
            tp += tp0
            fp = np.cumsum(dn)
            fp += fp0
            yield (d.values[::-1], None, tp, fp, dp, dn, tp + fp), tp0, fp0
            tp0, fp0 = float(tp[-1]), float(fp[-1])
        return
    for lo, hi in s.key_ranges(block, descending=True):
        rows = _key_block(s, lo, hi, tp0, fp0)
        yield rows, tp0, fp0
        tp0, fp0 = float(rows[2][-1]), float(rows[3][-1])


def _key_block(s: SortedScores, lo: int, hi: int, tp0: float, fp0: float) -> Block:
    """`rows_from_top`' block of the packed keys [lo, hi), with (tp0, fp0) the counts above it.

    Read off the runs of equal keys, not key by key: a score's keys are 2v (its negatives)
    then 2v + 1 (its positives), so each distinct score is one or two runs of equal keys, and
    its counts are those runs' lengths. Two passes over the keys (where a key differs from the
    one before, and where those are), then work in the distinct scores alone; where every key
    differs, their labels are the counts. The counts are integers below 2^53, summed in
    float64 exactly, so the same arrays as a running count over every key."""
    assert s.keys is not None
    keys = s.keys[lo:hi]
    m = len(keys)
    # A key differs from the one before at about this share of every RUN_SAMPLE-th key.
    sample = np.not_equal(keys[1::RUN_SAMPLE], keys[: m - 1 : RUN_SAMPLE])
    if np.count_nonzero(sample) * DENSE_RUNS > len(sample):
        return _dense_block(s, lo, hi, tp0, fp0)
    new = np.empty(m, bool)  # a run of equal keys starts here
    new[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    if new.all():  # every key once: its label is its score's positives, or one of them
        value, pos = keys, np.bitwise_and(keys, 1)
        length = None
    else:
        starts = np.flatnonzero(new)
        value = keys[starts]
        length = np.empty(len(starts), np.int64)
        np.subtract(starts[1:], starts[:-1], out=length[:-1])
        length[-1] = m - starts[-1]
        pos = np.bitwise_and(value, 1) * length
    del new
    score = np.right_shift(value, 1)
    # A run of positives right after its score's negatives: its count joins theirs.
    pair = np.flatnonzero(score[1:] == score[:-1])
    dp = pos[::-1].astype(np.float64)
    dn = (1.0 - dp) if length is None else (length[::-1] - dp)
    if len(pair):
        top = len(score) - 1 - pair  # the negatives' run, from the top: the positives' is above it
        dp[top] = dp[top - 1]
        keep = np.ones(len(score), bool)
        keep[top - 1] = False
        dp, dn, score = dp[keep], dn[keep], score[::-1][keep]
    else:
        score = score[::-1]
    tp = np.cumsum(dp)
    tp += tp0
    fp = np.cumsum(dn)
    fp += fp0
    return score.view(s.dtype), None, tp, fp, dp, dn, tp + fp


DENSE_RUNS, RUN_SAMPLE = 16, 16
"""`_key_block` reads a block key by key (`_dense_block`) where more than one key in DENSE_RUNS
starts a run of equal keys (read off every RUN_SAMPLE-th key): the runs' steps cost about 45 ns
a run, the key-by-key passes 4-5 ns a key (2^17 float32 keys, one thread: 3.8 ns a key either
way where 8% start a run, 4.6 against 5.0 at 16%, 4.7 against 14.4 at 29%; 10M scores rounded
to 4 decimals, about 0.1%: exact_diagnostics 0.16 s key by key, 0.08 s by runs)."""


def _dense_block(s: SortedScores, lo: int, hi: int, tp0: float, fp0: float) -> Block:
    """`_key_block` key by key, where most keys differ from the one before: the positives'
    running count over every key, read at the end of each score's run."""
    assert s.keys is not None
    keys = s.keys[lo:hi][::-1].copy()  # contiguous: every pass below runs in SIMD
    score = np.right_shift(keys, 1)
    # The positives from the block's top to each key: a running count in the keys' own
    # width, in place, made float64 only where read. A block is 2·EXACT_BLOCK keys and the
    # rest of a run of equal scores, so only a run of 2^32 or more float32 keys needs int64.
    labels = np.bitwise_and(keys, 1, out=keys)
    wide = keys.itemsize == 4 and len(keys) > 0xFFFFFFFF
    below = np.cumsum(labels, dtype=np.int64) if wide else running_count(labels)
    last = np.empty(len(keys), bool)  # the last key of each score, from the top
    np.not_equal(score[:-1], score[1:], out=last[:-1])
    last[-1] = True
    base = tp0 + fp0 + 1.0  # the rank of the block's first key
    t = score.view(s.dtype)
    # The rank of each distinct score's last key is TP + FP there (exact integers: FP is
    # the rank less TP, so TP + FP is the rank again, bit for bit).
    if last.all():
        tp = np.add(below, tp0, dtype=np.float64)
        count = np.arange(base, base + len(keys))
        dp = _steps(tp, tp0)
        return t, None, tp, np.subtract(count, tp), dp, np.subtract(1.0, dp), count
    ends = np.flatnonzero(last)
    tp = np.add(below[ends], tp0, dtype=np.float64)
    count = np.add(ends, base, out=np.empty_like(tp))
    fp = np.subtract(count, tp)
    return t, ends, tp, fp, _steps(tp, tp0), _steps(fp, fp0), count


PREFIX_COLUMNS = 8
"""`running_count` reads its array as rows of this many."""


def running_count(a: np.ndarray) -> np.ndarray:
    """`np.cumsum(a)` of non-negative integers, in place, in a's own dtype (its total must fit).

    numpy's cumsum adds one element after another. Here the array is read as rows of
    PREFIX_COLUMNS: each row's running count by adding each column to the one before, across
    every row at once, then each row's offset, the running count of the rows' totals (a
    PREFIX_COLUMNS-th of the elements). Integer sums are exact in any order, so the counts are
    the same; on 2^17 labels about 2.5 times faster than cumsum."""
    c = PREFIX_COLUMNS
    r = len(a) // c
    if r < 64:
        return np.cumsum(a, out=a)
    rows = a[: r * c].reshape(r, c)
    for j in range(1, c):
        np.add(rows[:, j], rows[:, j - 1], out=rows[:, j])
    offsets = np.cumsum(rows[:, -1], dtype=a.dtype)  # the count up to each row's end
    rows[1:] += offsets[:-1, None]
    tail = a[r * c :]
    if len(tail):
        np.cumsum(tail, out=tail)
        tail += offsets[-1]
    return a


def _given(rows: Block) -> Block:
    return rows


def row_tasks(
    s: SortedScores, block: int, pool: Executor | None
) -> Iterator[tuple[Callable[[], Block], float, float]]:
    """`rows_from_top` as tasks that run apart (with a `pool`): the packed keys' ranges are cut
    first, and each block is made from the counts above it alone, read off the positives
    before each multiple of DISTINCT_BLOCK (`SortedScores.positives_below`, counted once and
    kept for the exact threshold counts that follow) (the same arrays as `rows_from_top`, bit
    for bit: every count is an integer in float64)."""
    if s.keys is None or pool is None:
        for rows, tp0, fp0 in rows_from_top(s, block):
            yield partial(_given, rows), tp0, fp0
        return
    n = len(s.keys)
    for lo, hi in list(s.key_ranges(block, descending=True)):
        tp0 = s.n_positives - s.positives_below(hi)  # the positives above the range
        fp0 = n - hi - tp0
        yield partial(_key_block, s, lo, hi, float(tp0), float(fp0)), float(tp0), float(fp0)


def _steps(a: np.ndarray, before: float) -> np.ndarray:
    """np.diff(a, prepend=before) without the joined copy."""
    out = np.empty_like(a)
    out[0] = a[0] - before
    np.subtract(a[1:], a[:-1], out=out[1:])
    return out


class Inline(Executor):
    """An executor that runs each task at once, on the calling thread (one thread)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        f: Future[T] = Future()
        f.set_result(fn(*args, **kwargs))
        return f


def ahead(pool: Executor, tasks: Iterable[tuple[Any, ...]], depth: int) -> Iterator[Any]:
    """The results of `tasks` ((function, *args) each) in order, at most `depth` running."""
    pending: deque[Future[Any]] = deque()
    for fn, *args in tasks:
        pending.append(pool.submit(fn, *args))
        if len(pending) >= depth:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
