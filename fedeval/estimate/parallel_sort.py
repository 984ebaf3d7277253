"""One sorted array from sorted runs, in a pool of threads and in bounded extra memory: the
parallel half of the exact values' sort (each run, a batch of the input, is sorted by the
thread that read it).

The runs are cut at common splitters (quantiles of a sample of every run) into ranges of
values; each range, gathered from every run, is sorted on its own by a thread of the pool (numpy
releases the GIL while it copies and sorts). The ranges are written in value order into a new
array whose pages are touched only as it fills, and when the runs live in an anonymous memory
map, the pages of each run whose values have all been gathered are given back to the system
(`madvise(MADV_DONTNEED)`) as the ranges complete: memory stays near one copy of the keys,
plus the ranges in flight. The result is the sort of all the keys, whatever the splitters, so
every value computed from it is the same bit for bit as after one serial sort.
"""

from __future__ import annotations

import math
import mmap
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

RANGE_KEYS = 1 << 21
"""Keys gathered and sorted at a time by one thread (8 MB of float32 keys): the memory in
flight is this times the threads."""

SAMPLE_PER_RANGE = 8
"""Keys sampled from each run for each range: the splitters are quantiles of the sample."""

RELEASE = getattr(mmap, "MADV_DONTNEED", None) if hasattr(mmap, "MAP_PRIVATE") else None
"""The advice that frees a private anonymous map's pages (None where there is no such map or
no `mmap.madvise`: the runs are then sorted as one array)."""


def anonymous_map(nbytes: int) -> mmap.mmap:
    """A private anonymous map (`RELEASE` frees its pages; in a shared one they would stay)."""
    return mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_PRIVATE)


def _splitters(runs: Sequence[np.ndarray], ranges: int) -> np.ndarray:
    """`ranges − 1` values splitting the union of the sorted runs into parts of about equal
    size: quantiles of evenly spaced keys of every run, weighted by the run's length."""
    total = sum(len(r) for r in runs)
    picks, weights = [], []
    for r in runs:
        if not len(r):
            continue
        m = max(1, min(len(r), SAMPLE_PER_RANGE * ranges * len(r) // max(total, 1)))
        idx = (np.arange(m) * len(r)) // m
        picks.append(r[idx])
        weights.append(np.full(m, len(r) / m))
    sample = np.concatenate(picks)
    order = np.argsort(sample, kind="stable")
    sample, cum = sample[order], np.cumsum(np.concatenate(weights)[order])
    at = np.searchsorted(cum, np.arange(1, ranges) * (cum[-1] / ranges), side="left")
    split: np.ndarray = sample[np.minimum(at, len(sample) - 1)]
    return split


def merge_sorted_runs(
    runs: Sequence[np.ndarray],
    threads: int,
    source: mmap.mmap | None = None,
    offsets: Sequence[int] | None = None,
) -> np.ndarray:
    """All the keys of `runs` (each sorted ascending, one dtype), sorted, in a new array.

    `source` (optional): the anonymous map the runs are views of, run i starting `offsets[i]`
    keys into it; its pages are released as their keys are gathered (the runs must not be
    read afterwards)."""
    runs = [r for r in runs]
    n = sum(len(r) for r in runs)
    dtype = runs[0].dtype if runs else np.dtype(np.uint32)
    out = np.empty(n, dtype)
    if n == 0:
        return out
    ranges = max(1, min(max(4 * threads, math.ceil(n / RANGE_KEYS)), n))
    split = _splitters(runs, ranges)
    # cuts[i, r]: where range r starts in run i (keys equal to a splitter go above it)
    cuts = np.zeros((len(runs), ranges + 1), np.int64)
    for i, r in enumerate(runs):
        cuts[i, 1:-1] = np.searchsorted(r, split, side="left")
        cuts[i, -1] = len(r)
    starts = np.zeros(ranges + 1, np.int64)
    np.cumsum((cuts[:, 1:] - cuts[:, :-1]).sum(axis=0), out=starts[1:])

    def gather_and_sort(j: int) -> None:
        lo, hi = cuts[:, j], cuts[:, j + 1]
        at = int(starts[j])
        for i in np.flatnonzero(hi > lo):
            m = int(hi[i] - lo[i])
            out[at : at + m] = runs[i][lo[i] : hi[i]]
            at += m
        out[starts[j] : starts[j + 1]].sort()

    release = source is not None and offsets is not None and RELEASE is not None
    page = mmap.PAGESIZE // dtype.itemsize
    freed = np.array(offsets if release else [0] * len(runs), np.int64)  # in keys
    ends = freed + cuts[:, -1]

    def give_back(j: int) -> None:
        """Release the pages of each run below range j's end (all gathered)."""
        assert source is not None and offsets is not None and RELEASE is not None
        upto = np.asarray(offsets, np.int64) + cuts[:, j + 1]
        upto = np.where(upto >= ends, ends, upto)
        for i in np.flatnonzero(upto - freed >= page):
            a = -(-int(freed[i]) // page) * page  # whole pages only
            b = int(upto[i]) // page * page
            if b > a:
                source.madvise(RELEASE, a * dtype.itemsize, (b - a) * dtype.itemsize)
            freed[i] = max(int(freed[i]), b)

    if threads <= 1 or ranges == 1:
        for j in range(ranges):
            gather_and_sort(j)
            if release:
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
                if release:
                    give_back(done)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out
