"""Exact metrics from the raw scores, computed centrally: the truth a simulation reports beside
every estimate. Same semantics as scikit-learn's ``roc_auc_score`` and ``precision_score``.

Every exact value is computed from one table, `DistinctScores`: the distinct scores ascending
with each class's count at each. It is made in one linear pass over the two sorted classes (their
runs of equal scores, then a merge of two sorted runs), so after the one sort of the scores
nothing else sorts or binary-searches the n scores: AUC, the threshold counts, the curves and
ECE are cumulative sums over it. Scores with few distinct values make it small.

Non-negative float scores are held packed (`pack`): each score's bits shifted left by one with
the label in the lowest bit, so that one sort of the keys (the floor's own sort of the scores,
in the same width) orders them by score and, within a score, by class; the distinct table is
then read off each block of keys by one comparison of neighbours, with no merge.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike


@dataclass(frozen=True, eq=False)
class DistinctScores:
    """Each distinct score once, ascending, with the number of negatives and positives at it.

    Counts are held in the smallest integer type that fits them (int8 when scores are distinct);
    every sum over them is taken in int64 (exact)."""

    values: np.ndarray
    negatives: np.ndarray
    positives: np.ndarray

    @classmethod
    def of_sorted(cls, negatives: np.ndarray, positives: np.ndarray) -> DistinctScores:
        """From each class's scores sorted ascending: a linear pass over each (its runs of equal
        scores), then one merge of the two runs of distinct scores: numpy's stable sort of the
        two joined (timsort for floats) finds the two sorted runs and merges them in linear
        time."""
        vn, cn = _runs(negatives)
        vp, cp = _runs(positives)
        if not len(vp) or not len(vn):
            dtype = np.result_type(negatives.dtype, positives.dtype)
            values = (vn if len(vn) else vp).astype(dtype, copy=False)
            zero = np.zeros(len(values), np.int8)
            return cls(values, cn if len(vn) else zero, cp if len(vp) else zero)
        values = np.concatenate([vn, vp])
        order = np.argsort(values, kind="stable")
        values = values[order]
        neg = np.concatenate([cn, np.zeros(len(vp), cn.dtype)])[order]
        pos = np.concatenate([np.zeros(len(vn), cp.dtype), cp])[order]
        both = np.flatnonzero(values[1:] == values[:-1])
        if len(both):
            # A score in both classes: its negatives' entry comes first (stable), and takes the
            # positives' count from the entry after it, which is dropped.
            pos[both] = pos[both + 1]
            keep = np.ones(len(values), bool)
            keep[both + 1] = False
            # (one index for the three: several times faster than three boolean indexes)
            kept = np.flatnonzero(keep)
            values, neg, pos = values.take(kept), neg.take(kept), pos.take(kept)
        return cls(values, neg, pos)


def _runs(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, count of each) of a sorted array; counts in the smallest integer type
    that holds them (int8 when every score is distinct: an eighth of the memory of int64)."""
    if not len(a):
        return a, np.zeros(0, np.int8)
    new = np.empty(len(a), bool)
    new[0] = True
    np.not_equal(a[1:], a[:-1], out=new[1:])
    if new.all():
        return a, np.ones(len(a), np.int8)
    starts = np.flatnonzero(new)
    counts = np.diff(starts, append=len(a))
    return a[starts], counts.astype(np.min_scalar_type(int(counts.max())))


DISTINCT_BLOCK = 1 << 16
"""Scores of each class taken at a time by `SortedScores.distinct_blocks`."""

_KEY_TYPES: dict[np.dtype, np.dtype] = {
    np.dtype(np.float32): np.dtype(np.uint32),
    np.dtype(np.float64): np.dtype(np.uint64),
}


def packable(scores: np.ndarray) -> bool:
    """Whether `pack` holds these scores exactly: float32 or float64, none negative (−0.0 is
    taken as 0.0) and no NaN."""
    return scores.dtype in _KEY_TYPES and (not len(scores) or bool(scores.min() >= 0))


def pack(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Keys that sort as (score, label): the score's bits shifted left by one (for a
    non-negative float the bits order as the values do, and the shift drops only the sign bit,
    which makes −0.0 equal 0.0), the label in the freed lowest bit. Same width as the scores."""
    keys: np.ndarray = np.left_shift(scores.view(_KEY_TYPES[scores.dtype]), 1)
    np.bitwise_or(keys, positive.view(np.uint8), out=keys)
    return keys


def unpack(keys: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The scores of packed keys (the label dropped)."""
    scores: np.ndarray = np.right_shift(keys, 1).view(dtype)
    return scores


def widen(keys: np.ndarray) -> np.ndarray:
    """float32 keys as the float64 keys of the same scores and labels."""
    return pack(unpack(keys, np.dtype(np.float32)).astype(np.float64), (keys & 1).astype(bool))


def _distinct_of_keys(keys: np.ndarray, dtype: np.dtype) -> DistinctScores:
    """The distinct table of sorted keys (a whole run of equal scores among them): a run
    starts where the score changes; when none repeats, each key is its own row."""
    score = np.right_shift(keys, 1)
    label = keys & 1
    new = np.empty(len(keys), bool)
    new[:1] = True
    np.not_equal(score[1:], score[:-1], out=new[1:])
    if new.all():
        pos = label.astype(np.int8)
        return DistinctScores(score.view(dtype), 1 - pos, pos)
    starts = np.flatnonzero(new)
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = len(keys)
    ends -= 1
    # Positives of each run: the label's running count at its end, less the previous run's
    # (a cumulative sum and one gather: several times faster than np.add.reduceat).
    below = np.cumsum(label, dtype=np.int64)[ends]
    pos = np.diff(below, prepend=0)
    counts = np.diff(ends, prepend=-1)
    small = np.min_scalar_type(int(counts.max()))
    return DistinctScores(
        score[starts].view(dtype), (counts - pos).astype(small), pos.astype(small)
    )


class SortedScores:
    """The scores of both classes, sorted: as one array of packed keys (`from_keys`; see
    `pack`), or as each class sorted apart (`SortedScores(negatives, positives)`; any scores).

    `negatives` and `positives` are each class's sorted scores (unpacked on first use)."""

    _keys: np.ndarray | None = None
    _sorting: Future[np.ndarray | None] | None = (
        None  # the keys' sort, when it runs in another thread
    )
    threads: int = 1
    """Threads the passes over the scores may use (the reader's thread count)."""

    def __init__(self, negatives: np.ndarray, positives: np.ndarray):
        self._classes: tuple[np.ndarray, np.ndarray] | None = (negatives, positives)
        self.n_negatives, self.n_positives = len(negatives), len(positives)
        self.dtype = np.result_type(negatives.dtype, positives.dtype)

    @classmethod
    def from_keys(
        cls,
        keys: np.ndarray,
        dtype: DTypeLike,
        n_positives: int,
        sorting: Future[np.ndarray | None] | None = None,
    ) -> SortedScores:
        """From sorted packed keys of scores of `dtype`, `n_positives` of them positive; or
        from keys being sorted by `sorting` (waited for on first use: the work that does not
        need them runs meanwhile), in place, or into the array it returns."""
        s = cls.__new__(cls)
        s._keys, s._sorting, s._classes, s.dtype = keys, sorting, None, np.dtype(dtype)
        s.n_negatives, s.n_positives = len(keys) - n_positives, n_positives
        return s

    @property
    def keys(self) -> np.ndarray | None:
        """The sorted keys, when packed."""
        sorting = self._sorting  # (read once: another thread may finish the wait first)
        if sorting is not None:
            merged = sorting.result()  # None: sorted in place; else a new sorted array
            if merged is not None:
                self._keys = merged
            self._sorting = None
        return self._keys

    @classmethod
    def from_arrays(cls, y_score: np.ndarray, y_positive: np.ndarray) -> SortedScores:
        """Packed when `packable`, else each class sorted."""
        y_score, y_positive = np.asarray(y_score), np.asarray(y_positive, dtype=bool)
        if packable(y_score):
            keys = pack(y_score, y_positive)
            keys.sort()
            return cls.from_keys(keys, y_score.dtype, int(np.count_nonzero(y_positive)))
        return cls(np.sort(y_score[~y_positive]), np.sort(y_score[y_positive]))

    def _split(self) -> tuple[np.ndarray, np.ndarray]:
        if self._classes is None and self.keys is not None:
            is_pos = (self.keys & 1).astype(bool)
            self._classes = (
                unpack(self.keys[~is_pos], self.dtype),
                unpack(self.keys[is_pos], self.dtype),
            )
        assert self._classes is not None
        return self._classes

    @property
    def negatives(self) -> np.ndarray:
        return self._split()[0]

    @property
    def positives(self) -> np.ndarray:
        return self._split()[1]

    @cached_property
    def distinct(self) -> DistinctScores:
        """The distinct scores with each class's count: what every exact value is summed from."""
        if self.keys is not None:
            return _distinct_of_keys(self.keys, self.dtype)
        return DistinctScores.of_sorted(self.negatives, self.positives)

    def distinct_blocks(
        self, block: int = DISTINCT_BLOCK, *, descending: bool = False
    ) -> Iterator[DistinctScores]:
        """The distinct table a range of scores at a time (each block ascending; the blocks
        from the bottom, or from the top), made from about `block` scores of each class: the
        same rows as `distinct`, with memory the size of a block instead of the whole table."""
        if self.keys is not None and "distinct" not in self.__dict__:
            for lo, hi in self.key_ranges(2 * block, descending=descending):
                yield _distinct_of_keys(self.keys[lo:hi], self.dtype)
            return
        if "distinct" in self.__dict__ or self.negatives.dtype != self.positives.dtype:
            d = self.distinct  # already made, or classes that do not compare in one dtype
            starts = range(0, len(d.values), block)
            for i in reversed(starts) if descending else starts:
                yield DistinctScores(
                    d.values[i : i + block],
                    d.negatives[i : i + block],
                    d.positives[i : i + block],
                )
            return
        for _, neg, pos in self.chunks(block, descending=descending):
            yield DistinctScores.of_sorted(neg, pos)

    def key_ranges(self, block: int, *, descending: bool = False) -> Iterator[tuple[int, int]]:
        """[lo, hi) ranges of about `block` packed keys, from the bottom or the top, each
        ending where a score does (a run of equal scores is never cut)."""
        keys = self.keys
        assert keys is not None
        n = len(keys)
        if descending:
            hi = n
            while hi > 0:
                lo = max(hi - block, 0)
                if lo:  # back to the start of the score's run: its keys are 2v and 2v + 1
                    lo = int(np.searchsorted(keys[:hi], (keys[lo] >> 1) << 1, side="left"))
                yield lo, hi
                hi = lo
        else:
            lo = 0
            while lo < n:
                hi = min(lo + block, n)
                if hi < n:  # on to the end of the last score's run
                    hi = int(np.searchsorted(keys, ((keys[hi - 1] >> 1) + 1) << 1, side="left"))
                yield lo, hi
                lo = hi

    @cached_property
    def _positives_before(self) -> np.ndarray:
        """Positives among the packed keys before each multiple of DISTINCT_BLOCK: each
        block's count read off COUNT_KEYS keys at a time as rows of DISTINCT_BLOCK, in a pool
        of `threads` where there are several such parts (integer counts: the same in any
        order)."""
        keys = self.keys
        assert keys is not None
        parts = range(0, len(keys), COUNT_KEYS)
        sums = np.zeros(-(-len(keys) // DISTINCT_BLOCK) + 1, np.int64)
        count = partial(_block_positives, keys, sums[1:])
        in_pool(count, parts, self.threads)
        np.cumsum(sums, out=sums)
        return sums

    def positives_below(self, i: int) -> int:
        """Positives among the first i packed keys."""
        assert self.keys is not None
        b = i // DISTINCT_BLOCK
        rest = self.keys[b * DISTINCT_BLOCK : i]
        return int(self._positives_before[b]) + int(np.count_nonzero(rest & 1))

    def chunks(
        self, block: int = DISTINCT_BLOCK, *, descending: bool = False
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(negatives below the range, its negatives, its positives) for consecutive ranges of
        scores (views, ascending inside), about `block` of each class in each; the classes
        must have one dtype.

        A range ends at a score taken from one class, and the other class is cut there by one
        binary search in its own dtype, so a run of equal scores never straddles two ranges."""
        neg, pos = self.negatives, self.positives
        lo_n, lo_p, hi_n, hi_p = 0, 0, len(neg), len(pos)
        while lo_n < hi_n or lo_p < hi_p:
            live = _live(neg, pos, lo_n, lo_p, hi_n, hi_p)
            if descending:  # the range's lowest score: the higher of each class's candidate
                cut = max(a[max(hi - block, lo)] for a, lo, hi in live)
                new_n = int(np.searchsorted(neg[lo_n:hi_n], cut, side="left")) + lo_n
                new_p = int(np.searchsorted(pos[lo_p:hi_p], cut, side="left")) + lo_p
                yield new_n, neg[new_n:hi_n], pos[new_p:hi_p]
                hi_n, hi_p = new_n, new_p
            else:  # the range's highest score: the lower of each class's candidate
                cut = min(a[min(lo + block, hi) - 1] for a, lo, hi in live)
                new_n = int(np.searchsorted(neg[lo_n:hi_n], cut, side="right")) + lo_n
                new_p = int(np.searchsorted(pos[lo_p:hi_p], cut, side="right")) + lo_p
                yield lo_n, neg[lo_n:new_n], pos[lo_p:new_p]
                lo_n, lo_p = new_n, new_p


COUNT_KEYS = DISTINCT_BLOCK << 4
"""Keys whose positives one task counts (`SortedScores._positives_before`)."""


def _block_positives(keys: np.ndarray, out: np.ndarray, lo: int) -> None:
    """out[b] = the positives among keys[b·DISTINCT_BLOCK : (b + 1)·DISTINCT_BLOCK] for the
    blocks of keys[lo : lo + COUNT_KEYS] (lo a multiple of DISTINCT_BLOCK)."""
    hi = min(lo + COUNT_KEYS, len(keys))
    for a in range(lo, hi, DISTINCT_BLOCK):
        out[a // DISTINCT_BLOCK] = np.count_nonzero(keys[a : min(a + DISTINCT_BLOCK, hi)] & 1)


def in_pool(task: Callable[[int], Any], items: Iterable[int], threads: int) -> list[Any]:
    """[task(i) for i in items], in a pool of `threads` where there are more items than one
    (numpy releases the GIL inside each task), in order."""
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [task(i) for i in items]
    with ThreadPoolExecutor(min(threads, len(items)), "fedeval-exact") as pool:
        return list(pool.map(task, items))


def _live(
    neg: np.ndarray, pos: np.ndarray, lo_n: int, lo_p: int, hi_n: int, hi_p: int
) -> list[tuple[np.ndarray, int, int]]:
    """(scores, lo, hi) of each class with scores left in [lo, hi)."""
    return [(a, lo, hi) for a, lo, hi in ((neg, lo_n, hi_n), (pos, lo_p, hi_p)) if lo < hi]


INT64_LIMIT = 2**63
"""Sums of counts at or past this overflow int64: `int_dot` takes them in Python integers."""


def int_dot(a: np.ndarray, b: np.ndarray) -> int:
    """Σ a·b of two non-negative int64 vectors, exact: in int64 where Σa · max b < 2^63 (then
    no partial sum reaches it), else in Python integers (counts past ~3·10^9 examples, as a
    table of distinct scores with large counts holds them; never for the packed keys' blocks,
    whose counts are a few per score)."""
    if not len(a):
        return 0
    if int(a.sum()) * int(b.max()) < INT64_LIMIT:
        return int(np.dot(a, b))
    return int(np.dot(a.astype(object), b.astype(object)))


def exact_auc(s: SortedScores) -> float:
    """Mann-Whitney AUC with ties counted ½: for each positive, negatives below plus ½ equal.

    Counts are summed as int64 (`int_dot`: in Python integers where int64 would overflow,
    2PN ≥ 2^63 past ~3·10^9 examples) before one float division.
    """
    twice = 0
    if s.keys is None and s.negatives.dtype == s.positives.dtype:
        # Each positive's negatives below, plus at or below, found by binary search in its
        # range of scores (a cache-sized piece of the negatives); the second search only for
        # positives tied with a negative.
        for below_range, neg, pos in s.chunks():
            if not len(neg) or not len(pos):
                twice += 2 * below_range * len(pos)
                continue
            left = np.searchsorted(neg, pos, side="left")
            tied = np.flatnonzero(neg[np.minimum(left, len(neg) - 1)] == pos)
            twice += 2 * (below_range * len(pos) + int(left.sum()))
            twice += int(np.searchsorted(neg, pos[tied], side="right").sum() - left[tied].sum())
    else:
        below_block = 0  # negatives below the block
        for d in s.distinct_blocks():  # temporaries a block long, not n
            neg = d.negatives.astype(np.int64)
            below = np.cumsum(neg)  # negatives at or below each score
            below += below_block
            below_block = int(below[-1])
            below *= 2
            below -= neg  # twice those strictly below, plus the ties
            twice += int_dot(d.positives.astype(np.int64), below)
    denom = 2 * s.n_positives * s.n_negatives
    return twice / denom if denom else float("nan")


def exact_threshold_counts(
    s: SortedScores, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(TP, FP) at each threshold: examples of each class with score ≥ t (a binary search per
    threshold in the packed keys, or in each sorted class)."""
    t = np.asarray(thresholds, dtype=np.float64)
    if s.keys is not None:
        below = [_keys_below(s, x) for x in t.ravel()]
        pos = np.array([s.positives_below(i) for i in below], dtype=np.float64)
        tp_k, fp_k = s.n_positives - pos, s.n_negatives - (np.array(below) - pos)
        return tp_k.reshape(t.shape), fp_k.reshape(t.shape)
    tp = [len(s.positives) - _count_below(s.positives, x) for x in t.ravel()]
    fp = [len(s.negatives) - _count_below(s.negatives, x) for x in t.ravel()]
    return np.reshape(tp, t.shape).astype(np.float64), np.reshape(fp, t.shape).astype(np.float64)


def _count_below(a: np.ndarray, x: float, below: Callable[[Any], bool] | None = None) -> int:
    """How many of the sorted `a` are below x (compared in float64), or satisfy `below`, a
    predicate true on a prefix of `a` that changes near x.

    The binary search runs in the array's own dtype (a float64 key would make numpy convert
    the whole float32 array first, a copy of n per search), then a step or two corrects for
    the key's rounding to that dtype, a run of equal scores at a time."""
    if not len(a):
        return 0
    i = int(np.searchsorted(a, np.asarray(x).astype(a.dtype), side="left"))
    if below is None:
        below = lambda v: float(v) < x  # noqa: E731
    while i > 0 and not below(a[i - 1]):
        i = int(np.searchsorted(a, a[i - 1], side="left"))
    while i < len(a) and below(a[i]):
        i = int(np.searchsorted(a, a[i], side="right"))
    return i


def _keys_below(s: SortedScores, x: float, below: Callable[[Any], bool] | None = None) -> int:
    """`_count_below` in the packed keys: how many scores are below x (compared in float64),
    or satisfy `below`; the search key is x rounded to the scores' dtype, corrected by a step
    or two, a run of equal scores at a time."""
    keys = s.keys
    assert keys is not None
    n = len(keys)
    v = np.asarray(x).astype(s.dtype)
    i = 0 if not v > 0 else int(np.searchsorted(keys, v.view(keys.dtype) << 1, side="left"))
    if below is None:
        below = lambda v: float(v) < x  # noqa: E731

    def score(j: int) -> float:
        return float(unpack(keys[j : j + 1], s.dtype)[0])

    while i > 0 and not below(score(i - 1)):
        i = int(np.searchsorted(keys, (keys[i - 1] >> 1) << 1, side="left"))
    while i < n and below(score(i)):
        i = int(np.searchsorted(keys, ((keys[i] >> 1) + 1) << 1, side="left"))
    return i


ECE_BLOCK = 1 << 20
"""Packed keys unpacked at a time to sum a bin's scores."""


def _bin_of(v: Any, n_bins: int) -> int:
    return min(int(float(v) * n_bins), n_bins - 1)


def _in_bin_below(n_bins: int, k: int, v: Any) -> bool:
    """Whether score v falls in a bin below bin k of `n_bins`."""
    return _bin_of(v, n_bins) < k


def _bin_starts(a: np.ndarray, n_bins: int) -> list[int]:
    """Where each of `n_bins` equal-width bins starts in a sorted array, and its end: bins are
    taken as ECE takes them (min(⌊x·M⌋, M − 1) in float64), so a binary search near k/M is
    corrected by a step or two to the exact boundary."""
    starts = [0]
    for k in range(1, n_bins):
        i = _count_below(a, k / n_bins, partial(_in_bin_below, n_bins, k))
        starts.append(max(i, starts[-1]))
    return [*starts, len(a)]


def _score_sum(keys: np.ndarray, dtype: np.dtype, pieces: list[tuple[int, int]], i: int) -> float:
    """The sum in float64 of the scores of the packed keys of `pieces[i]`."""
    a, b = pieces[i]
    return float(np.sum(unpack(keys[a:b], dtype), dtype=np.float64))


def exact_ece_of(
    s: SortedScores,
    n_bins: int = 15,
    transform: Callable[[np.ndarray], ArrayLike] | None = None,
) -> float:
    """ECE over `n_bins` equal-width bins of the scores (on [0, 1]) or of `transform(score)`,
    a function applied score by score: Σ_b |positives_b − Σ score|_b / N (sums in float64).

    Raw scores are summed bin by bin along the sorted classes (a binary search per bin edge);
    a transform is applied once per distinct score, weighted by its counts."""
    total = s.n_positives + s.n_negatives
    if transform is None and s.keys is not None:
        ece = 0.0
        keys = s.keys
        edges = [0]
        for k in range(1, n_bins):
            i = _keys_below(s, k / n_bins, partial(_in_bin_below, n_bins, k))
            edges.append(max(i, edges[-1]))
        edges.append(len(keys))
        # Each bin's scores summed ECE_BLOCK keys at a time from its start (in a pool of
        # `s.threads`), the parts added in order: the same floats on any number of threads.
        pieces = [
            (a, min(a + ECE_BLOCK, hi))
            for lo, hi in itertools.pairwise(edges)
            for a in range(lo, hi, ECE_BLOCK)
        ]
        part_sums = iter(
            in_pool(partial(_score_sum, keys, s.dtype, pieces), range(len(pieces)), s.threads)
        )
        for lo, hi in itertools.pairwise(edges):
            score_sum = 0.0
            for _ in range(lo, hi, ECE_BLOCK):
                score_sum += next(part_sums)
            ece += abs(s.positives_below(hi) - s.positives_below(lo) - score_sum)
        return float(ece / total)
    if transform is None:
        ece = 0.0
        e_pos, e_neg = _bin_starts(s.positives, n_bins), _bin_starts(s.negatives, n_bins)
        for b in range(n_bins):
            pos = s.positives[e_pos[b] : e_pos[b + 1]]
            neg = s.negatives[e_neg[b] : e_neg[b + 1]]
            score_sum = np.sum(pos, dtype=np.float64) + np.sum(neg, dtype=np.float64)
            ece += abs(len(pos) - score_sum)
        return float(ece / total)
    positives = np.zeros(n_bins)
    sums = np.zeros(n_bins)
    for d in s.distinct_blocks():
        x = np.asarray(transform(d.values), dtype=np.float64)
        bins = np.minimum((x * n_bins).astype(np.int64), n_bins - 1)
        positives += np.bincount(bins, d.positives, minlength=n_bins)
        sums += np.bincount(
            bins, x * (d.positives + d.negatives.astype(np.int64)), minlength=n_bins
        )
    return float(np.sum(np.abs(positives - sums)) / total)
