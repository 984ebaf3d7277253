"""The score axis: how scores map onto the unit interval that the leaves of a release cut.

By default the map is linear on the score range. When thresholds are declared before the data
are read, the map is a monotone piecewise-linear warp whose knots send each threshold onto a cell
edge of height `align_height` (and so of every finer height): precision, recall and accuracy at
those thresholds are then sums of whole leaves, with no interpolation and no within-leaf
uncertainty, whatever the scores' distribution (point masses included). Inside a segment the map
is linear, so a leaf that does not straddle a knot is still a leaf of uniform width in scores.

The warp depends only on the declared thresholds, never on the data: it is a public parameter of
the release, stated in every document that carries one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

MIN_ALIGN_HEIGHT = 4
"""The coarsest height thresholds are aligned to (more when there are more thresholds): a warp
at height 4 moves a threshold at most 1/32 of the range from where the linear map puts it."""

MAX_RAISED_HEIGHT = 5
"""`--height auto` is raised to the alignment height only up to here (31 thresholds): a finer
tree costs every estimate noise, and many thresholds (a sweep) are better served by the height
auto picks, with the within-leaf interval where one falls inside a leaf."""


@dataclass(frozen=True)
class ScoreAxis:
    """A monotone map of the score range [lo, hi] onto [0, 1], linear between knots.

    `knots` are interior (score, unit) pairs, both strictly increasing inside (lo, hi) and
    (0, 1); no knots is the linear map.

    >>> axis = ScoreAxis.aligned(0.0, 1.0, [0.3], height=2)
    >>> axis.to_unit(np.array([0.3])).tolist(), axis.from_unit(0.25)
    ([0.25], 0.3)
    """

    lo: float
    hi: float
    knots: tuple[tuple[float, float], ...] = ()
    _xs: np.ndarray = field(init=False, repr=False, compare=False)
    _us: np.ndarray = field(init=False, repr=False, compare=False)
    _align: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lo, hi = float(self.lo), float(self.hi)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"the score range must be finite numbers lo < hi. Found {lo}, {hi}.")
        xs = np.array([lo] + [float(s) for s, _ in self.knots] + [hi])
        us = np.array([0.0] + [float(u) for _, u in self.knots] + [1.0])
        if not (np.all(np.diff(xs) > 0) and np.all(np.diff(us) > 0)):
            raise ValueError("the axis knots must increase strictly, inside the score range.")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "_xs", xs)
        object.__setattr__(self, "_us", us)
        h = 0
        for u in us[1:-1]:
            while (u * (1 << h)) % 1:
                h += 1
        object.__setattr__(self, "_align", h)

    @classmethod
    def linear(cls, lo: float = 0.0, hi: float = 1.0) -> ScoreAxis:
        return cls(float(lo), float(hi))

    @classmethod
    def aligned(
        cls,
        lo: float,
        hi: float,
        thresholds: Sequence[float] | np.ndarray,
        height: int | None = None,
    ) -> ScoreAxis:
        """The warp that puts every threshold strictly inside (lo, hi) on a cell edge of
        `height` (default: the coarsest height ≥ MIN_ALIGN_HEIGHT with room for them all), each
        on the edge nearest its linear position that keeps them distinct and in order."""
        lo, hi = float(lo), float(hi)
        t = np.unique(np.asarray(thresholds, dtype=np.float64))
        t = t[(t > lo) & (t < hi)]
        k = len(t)
        if k == 0:
            return cls(lo, hi)
        need = math.ceil(math.log2(k + 1))
        h = max(need, MIN_ALIGN_HEIGHT) if height is None else int(height)
        if h < need:
            raise ValueError(f"{k} thresholds need cells of height ≥ {need} to fall on edges.")
        n = 1 << h
        target = np.rint((t - lo) / (hi - lo) * n).astype(np.int64)
        # Forward then backward pass: strictly increasing edges in [1, n - 1], each as close to
        # its target as order allows.
        e = np.clip(target, np.arange(1, k + 1), n - k + np.arange(k))
        e = np.maximum.accumulate(e - np.arange(k)) + np.arange(k)
        return cls(lo, hi, tuple(zip(t.tolist(), (e / n).tolist(), strict=True)))

    @property
    def score_range(self) -> tuple[float, float]:
        return (self.lo, self.hi)

    @property
    def is_linear(self) -> bool:
        return not self.knots

    def align_height(self) -> int:
        """The coarsest height whose cell edges hold every knot (0 for the linear map)."""
        return self._align

    def auto_floor(self, resolution: int) -> int:
        """The least height `--height auto` may pick for data read at `resolution`: the
        alignment height when it is at most MAX_RAISED_HEIGHT and the resolution, else 0."""
        h = self.align_height()
        return h if h <= min(resolution, MAX_RAISED_HEIGHT) else 0

    def to_unit(self, x: np.ndarray | float) -> np.ndarray:
        """Scores (or thresholds) onto [0, 1]. A score at or above a knot lands at or above its
        edge and one below it strictly below, so flooring at any height ≥ the alignment height
        puts it on the right side."""
        x = np.asarray(x, dtype=np.float64)
        if self.is_linear:
            return (x - self.lo) / (self.hi - self.lo)
        unit: npt.NDArray[np.float64] = np.interp(x, self._xs, self._us)
        h = self.align_height()
        if unit.ndim and h <= 30:
            # The clamp below moves only a value that rounding carried onto or a few ulps past
            # a knot's edge. Knots are edges of height h, where unit·2^h is exact, so a value
            # more than 1e-12 above every edge cannot move: only the others are clamped (about
            # 2.5× faster at a million scores, the same bits).
            scaled = unit * (1 << h)
            near = np.flatnonzero(scaled - np.floor(scaled) < 1e-12 * (1 << h))
            if near.size:
                unit[near] = self._clamped(x[near], unit[near])
            return unit
        return self._clamped(x, unit)

    def _clamped(self, x: np.ndarray, unit: np.ndarray) -> np.ndarray:
        """`unit` (the interpolated values of x) kept inside x's own segment."""
        seg = np.searchsorted(self._xs[1:-1], x, side="right")
        lower = self._us[:-1].copy()
        lower[0] = -np.inf  # the ends are not clamped: out-of-range values stay out of range
        upper = np.nextafter(self._us[1:], -np.inf)
        upper[-1] = np.inf
        clamped: npt.NDArray[np.float64] = np.clip(unit, lower[seg], upper[seg])
        return clamped

    def from_unit(self, u: np.ndarray | float) -> np.ndarray | float:
        """Unit positions (cell edges, midpoints, curve thresholds) back to scores."""
        arr = np.asarray(u, dtype=np.float64)
        if self.is_linear:
            out = self.lo + (self.hi - self.lo) * arr
        else:
            out = np.interp(arr, self._us, self._xs)
        return out if np.ndim(u) else float(out)

    def leaf_edges(self, n_leaves: int) -> np.ndarray:
        """The n_leaves + 1 leaf edges in the scores' units."""
        return np.asarray(self.from_unit(np.arange(n_leaves + 1) / n_leaves))

    def leaf_midpoints(self, n_leaves: int) -> np.ndarray:
        """Each leaf's midpoint score: where its mass is taken to sit (linear inside a leaf)."""
        e = self.leaf_edges(n_leaves)
        midpoints: npt.NDArray[np.float64] = (e[:-1] + e[1:]) / 2
        return midpoints

    def to_dict(self) -> dict[str, Any]:
        """The keys a document stores: `score_range`, and `cell_edges` when thresholds were
        aligned."""
        d: dict[str, Any] = {"score_range": [self.lo, self.hi]}
        if self.knots:
            d["cell_edges"] = {
                "scores": [s for s, _ in self.knots],
                "units": [u for _, u in self.knots],
            }
        return d

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ScoreAxis:
        """Inverse of `to_dict`; raises ValueError naming what is wrong."""
        try:
            lo, hi = (float(x) for x in doc["score_range"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError("score_range must be two finite numbers lo < hi") from e
        edges = doc.get("cell_edges")
        if edges is None:
            return cls(lo, hi)
        try:
            scores = [float(x) for x in edges["scores"]]
            units = [float(x) for x in edges["units"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError("cell_edges must hold two lists of numbers, scores and units") from e
        if len(scores) != len(units) or not all(map(math.isfinite, scores + units)):
            raise ValueError("cell_edges must hold two finite lists of equal length")
        return cls(lo, hi, tuple(zip(scores, units, strict=True)))


def threshold_axis(
    score_range: tuple[float, float], thresholds: Sequence[float], height: int | str = "auto"
) -> ScoreAxis:
    """The axis that makes `thresholds` cell edges of a release of `height`: at that height
    when it is given, else at the coarsest height ≥ MIN_ALIGN_HEIGHT with room for them all.
    Linear when a given height is too coarse to hold them all, or the thresholds are not finite
    numbers (whoever reads them reports that)."""
    lo, hi = (float(x) for x in score_range)
    t = np.asarray(thresholds, dtype=np.float64)
    if t.ndim != 1 or not np.all(np.isfinite(t)):
        return ScoreAxis.linear(lo, hi)
    inside = np.unique(t[(t > lo) & (t < hi)])
    if height == "auto":
        return ScoreAxis.aligned(lo, hi, inside)
    try:
        h = int(height)
    except (TypeError, ValueError):
        return ScoreAxis.linear(lo, hi)
    if len(inside) == 0 or h < 1 or (1 << min(h, 30)) <= len(inside):
        return ScoreAxis.linear(lo, hi)
    return ScoreAxis.aligned(lo, hi, inside, height=h)


DEFAULT_THRESHOLDS = tuple(i / 11 for i in range(1, 11))
"""1/11 … 10/11 of the score range, the papers' experiment thresholds (Cormode & Markov, PVLDB
2023, section 7): what every release declares as cell edges when no thresholds are given."""


def release_axis(
    score_range: tuple[float, float],
    thresholds: Sequence[float] | None,
    height: int | str = "auto",
) -> ScoreAxis:
    """The axis a release is made on: the declared thresholds, or by default
    `DEFAULT_THRESHOLDS` of the range, as cell edges (`threshold_axis`). The one definition the
    one-shot `evaluate`, `encode` and the Flower apps share, so that the staged and the one-shot
    paths make the same release from the same options."""
    lo, hi = (float(x) for x in score_range)
    if thresholds is None:
        thresholds = [lo + (hi - lo) * t for t in DEFAULT_THRESHOLDS]
    return threshold_axis((lo, hi), thresholds, height)


CELLS_PER_LEAF = 4
"""Fine cells per leaf of `LeafLookup`'s tables: few, so that both tables (the leaf at each
cell's least score, the edge inside it) stay in cache (at h = 16, 1 MB each for float32): the
look-up is two random reads a score, and a cell that an edge cuts costs no more than another.
(1M float32 scores, default axis at h = 16, loaded 2-core machine: 9.2 ns a score with 2^18
cells against 18.0 with 2^21 and 10.2–15.1 for the earlier one-table look-up.) A cell that
several edges cut (a steep stretch of the warp) takes a binary search."""

LOOKUP_CHUNK = 1 << 16
"""Scores `LeafLookup` maps at a time on one or two threads (`lookup_chunk`): its temporaries
(about 17 bytes a score) stay in cache beside the tables. (Measured with the earlier one-table
look-up, loaded 2-core machine, 1M float32 scores: 21 and 37 ns a score against 26 and 53 for
the whole batch at once; `evaluate --no-exact` on 10M rows with 2 threads 0.381 against 0.401
CPU-s, best of 8, alternated.)"""

MAX_TABLE_CELLS = 1 << 21
"""At most this many fine cells (tables of 8 MB of int32 and as many edges: heights above 19
only)."""


class LeafLookup:
    """The leaf of each score of `dtype` at height `resolution`, ``min(⌊to_unit(x)·2^h⌋,
    2^h − 1)`` bit for bit, by one look-up in a table over fine cells of the score range: the
    warp's interpolation and clamp cost about 35 ns a score, the look-up about 5."""

    # The leaf is a non-decreasing step function of the score: the number of leaf edges e_i
    # (the least score of the dtype whose leaf is ≥ i, found exactly) at or below it. A fine
    # cell, the scores with one value of ⌊(x − lo)·scale⌋, holds one leaf unless an edge falls
    # inside it; its scores are then compared with that edge.

    def __init__(self, axis: ScoreAxis, resolution: int, dtype: np.dtype | type) -> None:
        self.dtype = np.dtype(dtype)
        self.resolution = resolution
        n_leaves = 1 << resolution
        d = self.dtype.type
        self.lo, self.hi = d(axis.lo), d(axis.hi)
        if self.dtype.kind != "f" or float(self.lo) != axis.lo or float(self.hi) != axis.hi:
            raise ValueError("the score range must be exact in the scores' dtype")
        cells = min(max(n_leaves * CELLS_PER_LEAF, 1 << 12), MAX_TABLE_CELLS)
        self.cells = cells
        self.scale = d(cells / (axis.hi - axis.lo))
        if not np.isfinite(self.scale):
            raise ValueError("the score range is too narrow for a table")
        self.edges = self._edges(axis, n_leaves)
        finite = self.edges[np.isfinite(self.edges)]
        cell = np.clip(self._cells(finite), 0, cells)
        before = np.nextafter(finite, d(-np.inf))
        # Whether each edge is the least score of its cell (then the whole cell is at or above it).
        lowest = (finite == self.lo) | (np.clip(self._cells(before), 0, cells) < cell)
        # A cell's leaf at its least score counts the edges in the cells below it and an edge
        # that is its least score: edge i counts from cell `start` on, so the table steps up
        # by one at each start (one np.repeat, no temporaries the size of the table).
        start = np.minimum(cell + ~lowest, cells + 1)
        table = np.repeat(
            np.arange(len(start) + 1, dtype=np.int32), np.diff(start, prepend=0, append=cells + 1)
        )
        # Cells an edge cuts: the table holds -1 - k, k indexing the cut cells, which keep
        # their leaf at the least score and the first edge inside (more than one edge inside a
        # cell, in a steep stretch of the warp: a binary search among all the edges).
        cut, first, inside = np.unique(cell[~lowest], return_index=True, return_counts=True)
        self.table = table  # the leaf at each cell's least score
        # A cut cell's first edge inside it (+inf elsewhere): the leaf is one more from there.
        self.next_edge = np.full(len(table), d(np.inf), self.dtype)
        self.next_edge[cut] = finite[~lowest][first]
        self.cut_more = inside > 1
        self.more = np.zeros(len(table), bool)
        self.more[cut[self.cut_more]] = True
        self.has_more = bool(self.cut_more.any())

    def _leaf(self, axis: ScoreAxis, x: np.ndarray, n_leaves: int) -> np.ndarray:
        leaf = (axis.to_unit(x) * n_leaves).astype(np.int64)
        return np.minimum(leaf, n_leaves - 1)

    def _edges(self, axis: ScoreAxis, n_leaves: int) -> np.ndarray:
        """e_i for i = 1 … 2^h − 1 in `dtype` (+inf where no score in range reaches leaf i):
        a few ulp steps from the inverse map settle nearly all; the rest (near 0, where ulps
        are tiny) are bisected over the ordered bit patterns of the dtype."""
        d = self.dtype.type
        i = np.arange(1, n_leaves)
        v = np.asarray(axis.from_unit(i / n_leaves)).astype(self.dtype)
        np.clip(v, self.lo, self.hi, out=v)
        for _ in range(8):
            at = self._leaf(axis, v, n_leaves) >= i
            up = np.flatnonzero(~at & (v < self.hi))
            down = np.flatnonzero(at & (v > self.lo))
            down = down[self._leaf(axis, np.nextafter(v[down], d(-np.inf)), n_leaves) >= i[down]]
            if not up.size and not down.size:
                break
            v[up] = np.nextafter(v[up], d(np.inf))
            v[down] = np.nextafter(v[down], d(-np.inf))
        else:
            left = np.union1d(up, down)
            v[left] = self._bisect(axis, i[left], n_leaves)
        v[self._leaf(axis, v, n_leaves) < i] = np.inf
        return v

    def _bisect(self, axis: ScoreAxis, i: np.ndarray, n_leaves: int) -> np.ndarray:
        """The least score of the dtype in range whose leaf is ≥ i (hi when none is)."""
        a = np.full(len(i), _key(np.array([self.lo]))[0] - 1)  # leaf(a) < i: below the range
        b = np.full(len(i), _key(np.array([self.hi]))[0])  # taken as leaf(b) ≥ i
        while True:
            live = np.flatnonzero(b > a + 1)  # (b − a can overflow int64)
            if not live.size:
                return _from_key(b, self.dtype)
            m = a[live] // 2 + b[live] // 2 + ((a[live] & 1) + (b[live] & 1)) // 2
            at = self._leaf(axis, _from_key(m, self.dtype), n_leaves) >= i[live]
            b[live[at]] = m[at]
            a[live[~at]] = m[~at]

    def _cells(self, x: np.ndarray) -> np.ndarray:
        """The fine cell of each score; outside [0, cells] it is clipped (by `take` when
        looking up, so a score that rounds past an end still finds the end cell)."""
        cells: npt.NDArray[np.intp]
        if self.lo == 0:
            cells = (x * self.scale).astype(np.intp)
        else:
            cells = ((x - self.lo) * self.scale).astype(np.intp)
        return cells

    def __call__(self, x: np.ndarray, chunk: int = LOOKUP_CHUNK) -> np.ndarray:
        """Leaf indices (int32) of the scores `x` (of this lookup's dtype, inside the range),
        `chunk` scores at a time: the cells' temporaries (the scaled scores, their int64 cell,
        the next edge) stay a chunk long, in cache, instead of 17 bytes a score of the whole
        batch (`lookup_chunk`: larger chunks where many threads share the GIL)."""
        if x.dtype != self.dtype:  # the cells of another width are not this table's
            raise TypeError(f"scores of {x.dtype} given to a look-up made for {self.dtype}")
        leaf = np.empty(len(x), self.table.dtype)
        for a in range(0, len(x), chunk):
            self._look_up(x[a : a + chunk], leaf[a : a + chunk])
        return leaf

    def _look_up(self, x: np.ndarray, leaf: np.ndarray) -> None:
        """`__call__` of one chunk, written into `leaf`: the leaf at the cell's least score,
        plus one at or above the edge that cuts the cell, in five numpy calls with no branch
        on the data (each call hands the GIL over: with many reading threads the hand-overs,
        not the arithmetic, set the pace); cells that several edges cut take a binary search."""
        cells = self._cells(x)
        self.table.take(cells, mode="clip", out=leaf)
        leaf += x >= self.next_edge.take(cells, mode="clip")
        if self.has_more:
            more = np.flatnonzero(self.more.take(cells, mode="clip"))
            if more.size:
                leaf[more] = np.searchsorted(self.edges, x[more], side="right")


def lookup_chunk(threads: int) -> int:
    """Scores a `LeafLookup` call maps at a time on `threads` reading threads: LOOKUP_CHUNK on
    one or two, larger on more (up to 2^20), so that the numpy calls of all the threads, each
    handing the GIL over, stay as many per second as on two."""
    return int(min(LOOKUP_CHUNK * max(1, threads // 2), 1 << 20))


def _key(v: np.ndarray) -> np.ndarray:
    """Floats as signed integers in the same order (±0 both 0): bisection by ulps."""
    bits = v.view(np.int64 if v.dtype.itemsize == 8 else np.int32).astype(np.int64)
    magnitude = bits & ((1 << (8 * v.dtype.itemsize - 1)) - 1)
    return np.where(bits < 0, -magnitude, magnitude)


def _from_key(k: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Inverse of `_key`."""
    width = 8 * dtype.itemsize
    bits = np.where(k < 0, -k | (-1 << (width - 1)), k)
    return bits.astype(np.int64 if width == 64 else np.int32).view(dtype)


@functools.lru_cache(maxsize=8)
def leaf_lookup(axis: ScoreAxis, resolution: int, dtype: str) -> LeafLookup | None:
    """The `LeafLookup` of an axis at a resolution for scores of `dtype` (made once), or None
    when no table is possible (a range not exact in the dtype): then map with `to_unit`."""
    try:
        return LeafLookup(axis, resolution, np.dtype(dtype))
    except ValueError:
        return None
