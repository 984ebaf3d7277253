"""The distinct scores from the top, a block at a time, with the counts at and above each:
what `fedeval.estimate.diagnostics.exact_diagnostics` sums. Made one block after another
(`rows_from_top`), or as tasks each block of which needs only the counts above it
(`row_tasks`: the packed keys' positives counted per block first), to run in a pool; with the
executors that run them (`Inline`: on the calling thread; `ahead`: results in order, a bounded
number running)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from typing import Any, ParamSpec, TypeVar

import numpy as np
from numpy.typing import DTypeLike

from fedeval.estimate.exact import SortedScores

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class Picked:
    """A block's distinct scores from the top, gathered only at the points asked for:
    `scores[where]` (all of `scores` when `where` is None), and where `dtype` is given,
    `scores` are packed keys of scores of that dtype (each read as its key shifted right)."""

    scores: np.ndarray
    where: np.ndarray | None = None
    dtype: np.dtype | None = None

    def at(self, i: np.ndarray) -> np.ndarray:
        picked: np.ndarray = self.scores[i if self.where is None else self.where[i]]
        return picked if self.dtype is None else np.right_shift(picked, 1).view(self.dtype)

    def all(self) -> np.ndarray:
        return self.at(np.arange(len(self.scores if self.where is None else self.where)))


Block = tuple[Picked, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(scores, TP, FP, positives, negatives, TP + FP): `rows_from_top`' block."""


class Scratch:
    """Arrays each thread reuses from one block to the next (per call of the pass, so they go
    with it): a block's temporaries then come from the same few buffers, in cache, instead of
    fresh allocations that glibc serves from each thread's own arena and that grow it. An
    array got here is valid until the same thread asks for the same name again."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, name: str, size: int, dtype: DTypeLike) -> np.ndarray:
        """An uninitialised array of `size` elements of `dtype`, this thread's `name`."""
        held: dict[str, np.ndarray] = self._local.__dict__
        a = held.get(name)
        if a is None or len(a) < size or a.dtype != dtype:
            a = held[name] = np.empty(size + (size >> 3), dtype)
        return a[:size]


TEMPORARIES = "temporaries"
"""The `Scratch` buffer of 3·d + 2 words (d distinct scores in a block) that `_dense_block`'s
integer temporaries and then the areas' (`fedeval.estimate.area_pass.AreaPass.block`) use in
turn: a thread holds one, not both."""


def rows_from_top(
    s: SortedScores, block: int, scratch: Scratch | None = None
) -> Iterator[tuple[Block, float, float]]:
    """The distinct scores from the top, about `block` at a time: (scores, TP, FP, positives,
    negatives, TP + FP), descending, the counts at each distinct score as float64 (integers
    below 2^53 stay exact through the sums, in SIMD loops), the scores read only where a point
    is kept (`Picked`). Each block comes with (TP, FP) above it. A block of packed keys may
    hold its count arrays in the thread's buffers (`scratch`, else the generator's own): read
    them before asking for the next block.

    Packed keys are read from the top: TP is the positives at and above each distinct score
    (`_key_block`), FP the rank less TP, and a run of equal scores is never cut."""
    tp0 = fp0 = 0.0
    if s.keys is None:
        for d in s.distinct_blocks(block, descending=True):
            dp = d.positives[::-1].astype(np.float64)
            dn = d.negatives[::-1].astype(np.float64)
            tp = np.cumsum(dp)
            tp += tp0
            fp = np.cumsum(dn)
            fp += fp0
            yield (Picked(d.values[::-1]), tp, fp, dp, dn, tp + fp), tp0, fp0
            tp0, fp0 = float(tp[-1]), float(fp[-1])
        return
    scratch = Scratch() if scratch is None else scratch
    for lo, hi in s.key_ranges(block, descending=True):
        rows = _key_block(s, lo, hi, tp0, fp0, scratch)
        yield rows, tp0, fp0
        tp0, fp0 = float(rows[1][-1]), float(rows[2][-1])


def _key_block(
    s: SortedScores, lo: int, hi: int, tp0: float, fp0: float, scratch: Scratch | None = None
) -> Block:
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
        return _dense_block(s, lo, hi, tp0, fp0, Scratch() if scratch is None else scratch)
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
    return Picked(score.view(s.dtype)), tp, fp, dp, dn, tp + fp


DENSE_RUNS, RUN_SAMPLE = 16, 16
"""`_key_block` reads a block key by key (`_dense_block`) where more than one key in DENSE_RUNS
starts a run of equal keys (read off every RUN_SAMPLE-th key): the runs' steps cost about 45 ns
a run, the key-by-key passes 4-5 ns a key (2^17 float32 keys, one thread: 3.8 ns a key either
way where 8% start a run, 4.6 against 5.0 at 16%, 4.7 against 14.4 at 29%; 10M scores rounded
to 4 decimals, about 0.1%: exact_diagnostics 0.16 s key by key, 0.08 s by runs)."""


def _dense_block(
    s: SortedScores, lo: int, hi: int, tp0: float, fp0: float, scratch: Scratch
) -> Block:
    """`_key_block` key by key, where most keys differ from the one before, in the keys' own
    (ascending) order: where each score starts, and the positives below each start, read off
    the labels packed 64 to a word (a word's positives are its bits set: `np.bitwise_count`),
    a running count of the words' and the bits below the start in its own word. From the top,
    a score's rank is the keys from its start up, and its TP the block's positives less those
    below its start (exact integers, so the same floats as a running count from the top).
    Two compares, one search for the starts and a few passes over a 64th of the keys; the
    rest in the distinct scores. The count arrays are `scratch`'s."""
    assert s.keys is not None
    keys = s.keys[lo:hi]
    m = len(keys)
    work = scratch.get("keys", m, keys.dtype)
    # A score's keys are 2v then 2v + 1: a new score starts where a key exceeds the one
    # before with its label bit set.
    np.bitwise_or(keys, 1, out=work)
    new = scratch.get("new", m, np.bool_)
    new[:1] = True
    np.greater(keys[1:], work[:-1], out=new[1:])
    starts = np.flatnonzero(new)  # ascending
    np.bitwise_and(keys, 1, out=work)
    labels = scratch.get("labels", m, np.uint8)
    np.copyto(labels, work, casting="unsafe")
    packed = np.packbits(labels, bitorder="little")
    words = scratch.get("words", -(-m // 64), np.uint64)
    words[-1:] = 0
    words.view(np.uint8)[: len(packed)] = packed
    below = scratch.get("below", len(words) + 1, np.int64)  # positives below each word
    below[0] = 0
    np.cumsum(np.bitwise_count(words), dtype=np.int64, out=below[1:])
    d = len(starts)
    # Three integer temporaries in the thread's TEMPORARIES buffer (the areas' later).
    room = scratch.get(TEMPORARIES, 3 * d + 2, np.uint64)
    word = np.right_shift(starts, 6, out=room[:d].view(np.intp))
    bits = room[d : 2 * d]  # the bits below each start in its word
    np.bitwise_and(starts, 63, out=bits.view(np.intp))
    np.left_shift(np.uint64(1), bits, out=bits)
    np.subtract(bits, np.uint64(1), out=bits)
    # (mode "clip": every index is in range, and a take into `out` that may raise copies.)
    got = np.take(words, word, out=room[2 * d : 3 * d], mode="clip")
    np.bitwise_and(bits, got, out=bits)
    at = np.take(below, word, out=got.view(np.int64), mode="clip")
    np.add(at, np.bitwise_count(bits, out=scratch.get("ones", d, np.uint8)), out=at)
    # From the top: TP the positives above the block and in it less those below the start.
    tp = np.subtract(tp0 + float(below[-1]), at[::-1], out=scratch.get("tp", d, np.float64))
    count = scratch.get("count", d, np.float64)
    np.subtract(tp0 + fp0 + m, starts[::-1], out=count)
    fp = np.subtract(count, tp, out=scratch.get("fp", d, np.float64))
    dp = _steps(tp, tp0, scratch.get("dp", d, np.float64))
    dn = _steps(fp, fp0, scratch.get("dn", d, np.float64))
    return Picked(keys, starts[::-1], s.dtype), tp, fp, dp, dn, count


def _given(rows: Block) -> Block:
    return rows


def row_tasks(
    s: SortedScores, block: int, pool: Executor | None, scratch: Scratch | None = None
) -> Iterator[tuple[Callable[[], Block], float, float]]:
    """`rows_from_top` as tasks that run apart (with a `pool`): the packed keys' ranges are cut
    first, and each block is made from the counts above it alone, read off the positives
    before each multiple of DISTINCT_BLOCK (`SortedScores.positives_below`, counted once and
    kept for the exact threshold counts that follow) (the same arrays as `rows_from_top`, bit
    for bit: every count is an integer in float64)."""
    if s.keys is None or pool is None:
        for rows, tp0, fp0 in rows_from_top(s, block, scratch):
            yield partial(_given, rows), tp0, fp0
        return
    n = len(s.keys)
    for lo, hi in list(s.key_ranges(block, descending=True)):
        tp0 = s.n_positives - s.positives_below(hi)  # the positives above the range
        fp0 = n - hi - tp0
        make = partial(_key_block, s, lo, hi, float(tp0), float(fp0), scratch)
        yield make, float(tp0), float(fp0)


def _steps(a: np.ndarray, before: float, out: np.ndarray | None = None) -> np.ndarray:
    """np.diff(a, prepend=before) without the joined copy (into `out` when given)."""
    out = np.empty_like(a) if out is None else out
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
