"""One sorted array from sorted runs, in a pool of threads and in bounded extra memory: the
parallel half of the exact values' sort (each run, a batch of the input, is sorted by the
thread that read it).

The runs are cut at common splitters (quantiles of a sample of every run) into ranges of
values; each range, gathered from every run, is sorted on its own by a thread of the pool (numpy
releases the GIL while it gathers and sorts). The ranges are written in value order into a new
array whose pages are touched only as it fills (by the pool's threads), and when the runs live
in an anonymous memory map, the pages of each run whose values have all been gathered are given
back to the system (`madvise(MADV_DONTNEED)`) every `release_keys` keys gathered: memory stays
near one copy of the keys, plus the ranges in flight and that lag. The result is the sort of
all the keys, whatever the splitters, so every value computed from it is the same bit for bit
as after one serial sort.

What makes it parallel in fact: each range's keys come from every run (a run per batch read,
hundreds at scale), so a range is gathered by one `np.take` over an index made in a few whole-
array steps, not by a copy per run (each numpy call hands the GIL over, and with many threads
those hand-overs, not the copies, set the pace); the splitters are taken at staggered points of
each run, so that no range holds much more than its share (sampled at the same points of runs
of one distribution, they were the same few quantiles, and the last range held the top quarter
of all the keys: one thread sorted it while the others waited); and pages are given back a few
times per run, not once per run and range (each `madvise` stops every thread of the process to
flush its address translations).
"""

from __future__ import annotations

import functools
import math
import mmap
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import cast

import numpy as np

RANGE_KEYS = 1 << 21
"""Keys gathered and sorted at a time by one thread (8 MB of float32 keys): the memory in
flight is this times the threads."""

SAMPLE_PER_RANGE = 64
"""Keys sampled for each range (over all the runs): the splitters are quantiles of the sample."""

GATHER_KEYS = 1 << 19
"""Keys of a range gathered by one `np.take`: its index (8 bytes a key, 4 MB) is made this many
at a time."""

PIECE_KEYS = 1 << 10
"""A range is copied a run's piece at a time (`np.concatenate`) where its pieces hold at least
this many keys per thread on average, else gathered by `np.take`: each piece's copy hands the
GIL over twice, which with many threads costs more than the copy of a short piece, while the
take's index costs a few nanoseconds a key in any thread (about 10 times a copy)."""

RELEASE_ROUNDS = 32
"""The runs' pages are given back about this many times in a merge (each time one `madvise` per
run), within the bounds below."""

RELEASE_MIN_BYTES = 1 << 25
RELEASE_MAX_BYTES = 1 << 27
"""Keys gathered between two give-backs, in bytes: the runs' memory held beyond the merged
array's is at most this (32–128 MB), plus the ranges in flight."""

RELEASE = getattr(mmap, "MADV_DONTNEED", None) if hasattr(mmap, "MAP_PRIVATE") else None
"""The advice that frees a private anonymous map's pages (None where there is no such map or
no `mmap.madvise`: the runs are then sorted as one array)."""


@functools.cache
def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """The C library's `madvise`, called through ctypes (which lets go of the GIL during the
    call: `mmap.madvise` holds it, and each give-back waits for every thread of the process to
    flush its address translations); None where it cannot be found (then `mmap.madvise`)."""
    try:
        import ctypes

        f = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    f.restype = ctypes.c_int
    return cast(Callable[[int, int, int], int], f)


USE_LIBC = True
"""Whether `give_back_pages` calls the C library's `madvise` (found on first use)."""


def give_back_pages(source: mmap.mmap, address: int, start: int, length: int) -> None:
    """Free `length` bytes of the private anonymous map `source` (at `address`) from byte
    `start` (both whole pages): by the C library's `madvise` where found, else
    `mmap.madvise`; they read as zeros afterwards."""
    assert RELEASE is not None
    advise = _libc_madvise() if USE_LIBC else None
    if advise is None or advise(address + start, length, RELEASE) != 0:
        source.madvise(RELEASE, start, length)


_STAGGER = (math.sqrt(5) - 1) / 2
"""Run i's sample starts at the fractional part of (i + ½)·this of its spacing: the runs'
points spread over every level (a low-discrepancy sequence), not the same few of each."""


def anonymous_map(nbytes: int) -> mmap.mmap:
    """A private anonymous map (`RELEASE` frees its pages; in a shared one they would stay)."""
    return mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_PRIVATE)


def release_keys(nbytes: int, itemsize: int) -> int:
    """Keys gathered between two give-backs in a merge of `nbytes` of keys."""
    lag = min(max(nbytes // RELEASE_ROUNDS, RELEASE_MIN_BYTES), RELEASE_MAX_BYTES)
    return max(lag // itemsize, 1)


def _splitters(runs: Sequence[np.ndarray], ranges: int) -> np.ndarray:
    """`ranges − 1` values splitting the union of the sorted runs into parts of about equal
    size: weighted quantiles of about SAMPLE_PER_RANGE·ranges keys, each run's share evenly
    spaced through it from a staggered start, each weighing the keys it stands for."""
    total = sum(len(r) for r in runs)
    want = SAMPLE_PER_RANGE * ranges
    picks, weights = [], []
    for i, r in enumerate(runs):
        if not len(r):
            continue
        m = max(1, min(len(r), math.ceil(want * len(r) / max(total, 1))))
        start = ((i + 0.5) * _STAGGER) % 1.0
        idx = ((np.arange(m) + start) * (len(r) / m)).astype(np.int64)
        picks.append(r[np.minimum(idx, len(r) - 1)])
        weights.append(np.full(m, len(r) / m))
    sample = np.concatenate(picks)
    order = np.argsort(sample, kind="stable")
    sample, cum = sample[order], np.cumsum(np.concatenate(weights)[order])
    at = np.searchsorted(cum, np.arange(1, ranges) * (cum[-1] / ranges), side="left")
    split: np.ndarray = sample[np.minimum(at, len(sample) - 1)]
    return split


def _gather(flat: np.ndarray, src: np.ndarray, lens: np.ndarray, dst: np.ndarray) -> None:
    """dst ← flat[src[0] : src[0] + lens[0]], then the next piece, …: by one `np.take` a
    GATHER_KEYS part of dst at a time, over an index made as a running sum of steps (1 inside a
    piece, the jump to the next piece at its start)."""
    at = np.zeros(len(src), np.int64)  # where each piece starts in dst
    np.cumsum(lens[:-1], out=at[1:])
    jump = np.empty(len(src), np.int64)
    jump[0] = src[0]
    np.subtract(src[1:], src[:-1] + lens[:-1] - 1, out=jump[1:])
    m = len(dst)
    for a in range(0, m, GATHER_KEYS):
        b = min(a + GATHER_KEYS, m)
        p0 = int(np.searchsorted(at, a, side="right")) - 1  # the piece that holds key a
        p1 = int(np.searchsorted(at, b, side="left"))  # pieces p0 + 1 … p1 − 1 start inside
        index = np.ones(b - a, np.intp)
        index[at[p0 + 1 : p1] - a] = jump[p0 + 1 : p1]
        index[0] = src[p0] + (a - at[p0])
        np.cumsum(index, out=index)
        np.take(flat, index, out=dst[a:b], mode="clip")


def merge_sorted_runs(
    runs: Sequence[np.ndarray],
    threads: int,
    source: mmap.mmap | None = None,
    offsets: Sequence[int] | None = None,
) -> np.ndarray:
    """All the keys of `runs` (each sorted ascending, one dtype), sorted, in a new array.

    `source` (optional): the anonymous map the runs are views of, run i starting `offsets[i]`
    keys into it; its pages are released as their keys are gathered (the runs must not be
    read afterwards). Without it the runs are first joined in one array (twice the memory:
    for small inputs).

    Memory beyond the result: the runs' pages not yet given back, at most `release_keys` keys
    gathered since the last give-back plus threads + 1 ranges in flight (about RANGE_KEYS each
    where keys are spread, more where one value repeats), and each thread's index of
    GATHER_KEYS·8 bytes."""
    runs = [r for r in runs]
    n = sum(len(r) for r in runs)
    dtype = runs[0].dtype if runs else np.dtype(np.uint32)
    out = np.empty(n, dtype)
    if n == 0:
        return out
    release = source is not None and offsets is not None and RELEASE is not None
    address = 0
    if source is not None and offsets is not None:
        flat = np.frombuffer(source, dtype)
        base = np.asarray(offsets, np.int64)
        address = flat.ctypes.data
    else:
        flat = np.concatenate(runs)
        base = np.zeros(len(runs), np.int64)
        np.cumsum([len(r) for r in runs[:-1]], out=base[1:])
    ranges = max(1, min(max(4 * threads, math.ceil(n / RANGE_KEYS)), n))
    split = _splitters(runs, ranges)
    # cuts[i, r]: where range r starts in run i (keys equal to a splitter go above it)
    cuts = np.zeros((len(runs), ranges + 1), np.int64)
    for i, r in enumerate(runs):
        cuts[i, 1:-1] = np.searchsorted(r, split, side="left")
        cuts[i, -1] = len(r)
    sizes = (cuts[:, 1:] - cuts[:, :-1]).sum(axis=0)
    starts = np.zeros(ranges + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])

    def gather_and_sort(j: int) -> None:
        lens = cuts[:, j + 1] - cuts[:, j]
        live = np.flatnonzero(lens)
        dst = out[starts[j] : starts[j + 1]]
        if not len(live):
            return
        if len(dst) >= len(live) * PIECE_KEYS * threads:
            lo = (base[live] + cuts[live, j]).tolist()
            hi = (base[live] + cuts[live, j + 1]).tolist()
            np.concatenate([flat[a:b] for a, b in zip(lo, hi, strict=True)], out=dst)
        else:
            _gather(flat, base[live] + cuts[live, j], lens[live], dst)
        dst.sort()

    page = mmap.PAGESIZE // dtype.itemsize
    freed = base.copy()  # each run's keys below this are given back (whole pages)
    lag = release_keys(n * dtype.itemsize, dtype.itemsize)
    held = 0  # keys gathered since the last give-back

    def give_back(j: int) -> None:
        """After range j: every run's pages below its cut at j + 1 (all gathered) are given
        back, when `lag` keys have been gathered since the last time, or at the end."""
        nonlocal held
        held += int(sizes[j])
        if not release or (held < lag and j < ranges - 1):
            return
        assert source is not None
        held = 0
        upto = base + cuts[:, j + 1]
        for i in np.flatnonzero(upto - freed >= page).tolist():
            a = -(-int(freed[i]) // page) * page  # whole pages only
            b = int(upto[i]) // page * page
            if b > a:
                give_back_pages(source, address, a * dtype.itemsize, (b - a) * dtype.itemsize)
            freed[i] = max(int(freed[i]), b)

    if threads <= 1 or ranges == 1:
        for j in range(ranges):
            gather_and_sort(j)
            give_back(j)
        return out
    pool = ThreadPoolExecutor(threads, "fedeval-merge")
    pending: deque[tuple[int, Future[None]]] = deque()
    try:
        for j in range(ranges):
            pending.append((j, pool.submit(gather_and_sort, j)))
            while len(pending) >= threads + 1 or (j == ranges - 1 and pending):
                done, f = pending.popleft()
                f.result()
                give_back(done)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out
