"""ECE from a noisy release: a debiased estimate, an interval that holds it, and the worst case.

ECE = Σ_b |D_b| / N over M equal-width bins of the score, with D_b = Σ_{i∈b} (y_i − s_i) — each
leaf's mass at its score (its midpoint, or the warped axis's, or the map's value there), so
D_b = Σ_{l∈b} (1 − s_l)·P_l − s_l·N_l is linear in the leaf counts. The release adds zero-mean
noise e_b to every D_b, and |D_b + e_b| is biased upward: by √(2v_b/π) where D_b = 0 (v_b the
noise variance), by less as |D_b| grows (the folded normal's mean). Summed over bins this bias
inflates the plug-in ECE Σ|D̃_b|/Ñ whenever the noise per bin is comparable to the gaps (it
made 0.096 of a true 0.046 on a 569-row data set; capped at 1 it made [0.967, 1] of 0.252).

- **Estimate.** Each |D_b| by √max(D̃_b² − v_b, 0): D̃_b² − v_b is unbiased for D_b² (v_b known
  from the noise draws), and the root keeps the estimate near |D̃_b| where the gap dominates the
  noise and near 0 where it does not. Divided by the noisy total Ñ and kept in [0, 1].
- **Interval.** The estimator's error depends on the unknown gaps, so its distribution is
  simulated at three candidate truths the release supports — the debiased gaps (sign of D̃_b,
  size √max(D̃_b² − v_b, 0)) and the plug-in gaps D̃_b, which bracket |D_b| for bins whose gap
  is within the noise, and the debiased gaps with every gap the release cannot tell from 0
  (|D̃_b| ≤ Z95·√v_b) at 0 — with the run's fresh noise draws (the release's own noise law, its
  correlations between leaves included): err = estimate(D* + e, Ñ + n) − Σ|D*|/Ñ. The third
  truth is where the estimate errs furthest upward: a bin's √max((D + e)² − v, 0) − |D| has
  mean +0.34·√v and 97.5 % point 2.01·√v at D = 0, a mean below 0 and a 97.5 % point
  below Z95·√v wherever |D| ≥ √v/2 (normal noise). The debiased truth puts a gap of up to
  √(Z95² − 1)·√v ≈ 1.7·√v in the one in three gapless bins whose noise exceeds √v, so where
  many bins hold no gap their summed bias was missing from the lower end (scores squeezed into
  [0.45, 0.55], 12 of 15 bins empty, localdp ε = 5: coverage 0.930 over 300 releases, the
  truth below the interval in every miss; 0.970 with the third truth). The interval
  is estimate − the 97.5 % and 2.5 % quantiles of err, taken as the hull over the truths, then
  widened on each side by the discretisation term (`fedeval.estimate.ece_range`'s
  `discretisation_range`: how far placing the examples anywhere inside their leaves, a leaf
  across a bin edge split once between its two bins, moves Σ|D_b|/N), a fixed offset for one
  data set, so combined with the noise's side as a bias (`bias_aware_half`), not added to it.
- **Smooth reading** (a release, `fedeval.api.calibrate.release_ece`). Placing every example
  anywhere inside its leaf is the worst case, attained by data with the same counts
  (`tests/test_coverage_limits.py`), and it was 20–40× the noise's part on smooth scores
  (binormal, 100k rows, distdp ε = 1, h = 7: 7.8e-3 of an 8.2e-3 interval; the truth 2.7e-5
  from the midpoint reading), so the interval held 0.99–1.00 on every family. As the AUC and
  AP read them, the leaves the release shows smooth (`fedeval.estimate.smoothness.departures`:
  no departing examples; the end leaves always depart) are read as a smooth density reads
  them: the gaps split a leaf across a bin edge by the overlap and the classes' slopes
  (`split_gaps`, linear in the counts, so the estimate and its noise simulation read them so
  too), each part's examples at its centre give or take the slope's offset
  (`ece_range.smooth_offsets`), plus the data's sampling given the counts (`ece_range`: where
  a leaf's examples fall about a bin edge, binomially, and where they sit inside their part).
  Departing examples keep the worst case. The same data set's interval: 1.3e-3 wide (noise
  6e-4), holding the truth in 0.997 of 300 releases — the sampling ambiguity, which same-count
  data sets span (`tests/test_coverage_limits.py`).
- **Worst case.** Where the noise alone could make up an ECE of WORST_CASE_NOISE or more (its
  expected inflation Σ √(2v_b/π)/Ñ), or the total Ñ is within 2 noise SDs of 0, the release
  cannot locate the ECE: [0, 1], with the reason. Where Ñ ≤ 0 the ECE is undetermined: 0.5 over
  [0, 1] with the reason, as the AUC.

Everything here reads the noisy release and fresh noise drawn by the analyst: post-processing.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq
from scipy.special import ndtr

from fedeval.core.memo import MISS, BitMemo
from fedeval.core.results import Estimate, undetermined_note
from fedeval.estimate.uncertainty import Z95

WORST_CASE_NOISE = 0.25
"""Expected inflation of the plug-in ECE by the noise alone (Σ_b √(2v_b/π)/Ñ) at or above which
the interval is the worst case [0, 1]: a quarter of the scale is noise, not data."""

TOTAL_Z = 2.0
"""The noisy total must be this many noise SDs above 0 for the ECE's denominator to mean
anything; nearer 0 the interval is the worst case."""

TAIL = 0.025
"""Each tail of the 95 % interval."""

ONE_SIDED = 1.6448536269514722
"""Φ⁻¹(0.95): the one-sided 95 % point of a normal."""


def leaf_bins(score: np.ndarray, n_bins: int) -> np.ndarray:
    """The ECE bin of each leaf's score: ⌊s·M⌋, the top edge in the last bin."""
    return np.minimum((np.asarray(score) * n_bins).astype(np.int64), n_bins - 1)


def bin_gaps(leaves: np.ndarray, score: np.ndarray, n_bins: int) -> np.ndarray:
    """D_b = Σ_{l∈b} (1 − s_l)·P_l − s_l·N_l for a stack of leaves (..., 2, L): shape (..., M)."""
    leaves = np.asarray(leaves, dtype=np.float64)
    lead = leaves.shape[:-2]
    rows = int(np.prod(lead)) if lead else 1
    flat = leaves.reshape(rows, 2, -1)
    b = leaf_bins(score, n_bins)
    lin = (1 - score) * flat[:, 1] - score * flat[:, 0]
    cell = (b + n_bins * np.arange(rows)[:, None]).ravel()
    out = np.bincount(cell, lin.ravel(), minlength=rows * n_bins)
    return out.reshape(*lead, n_bins)


SPLIT_CHUNK = 1 << 16
"""(row, pair) entries `split_gaps` computes at a time."""


def split_gaps(
    leaves: np.ndarray,
    edges: np.ndarray,
    n_bins: int,
    *,
    tilt: np.ndarray | None = None,
    caps: np.ndarray | None = None,
) -> npt.NDArray[np.float64]:
    """D_b of a stack of leaves (..., 2, L) read as a smooth density reads them: each leaf's
    examples of each class split between the bins it overlaps as a density linear across the
    leaf splits them (its count n spread evenly, n·f in a part of the overlap f, plus what the
    class's slope moves, `class_tilt`), each part at its overlap's centre c, so D_b = Σ_{(l, b)}
    (1 − c)·P_part − c·N_part, linear in the counts (shape (..., M)). A leaf inside one bin
    is read at its midpoint, as `bin_gaps` reads it; a leaf of no width is read whole in the
    bin of its midpoint. Reading the split by the overlap alone left the classes' slopes out:
    two bumps per class (sd 0.05), 20k rows, 64 leaves: 6.7e-4 below the truth on average,
    its sampling band holding it in 89 of 100 data draws. `tilt` (..., 2, pairs): these
    leaves' `class_tilt`, where the caller has it already (the same values); `caps`: the
    release's `slope_caps`, passed on to `class_tilt`."""
    leaves = np.asarray(leaves, dtype=np.float64)
    lead = leaves.shape[:-2]
    rows = int(np.prod(lead)) if lead else 1
    flat = leaves.reshape(rows, 2, -1)
    g = split_geometry(edges, n_bins)
    leaf, b, c = g.leaf, g.b, g.c
    out = np.empty((rows, n_bins))
    # A chunk of rows at a time: each row's sums are its own (the same values), and the
    # temporaries, a dozen (rows, pairs) arrays, stay a few MB (200 draws of 1,024 leaves took
    # 36 MB at once, held while the exact pass holds the scores).
    step = max(1, SPLIT_CHUNK // max(len(leaf), 1))
    for r0 in range(0, rows, step):
        chunk = flat[r0 : r0 + step]
        k = len(chunk)
        # (k, pairs): each pair's part of its leaf's gap, summed into its bin per row.
        # g.f·((1 − c)·P − c·N) + (1 − c)·tilt₊ − c·tilt₋, each product written over its
        # factor's gathered copy (the same operations in the same order)
        part = chunk[:, 1, leaf]
        part *= 1 - c
        other = chunk[:, 0, leaf]
        other *= c
        part -= other
        part *= g.f
        if tilt is None:
            moved = class_tilt(chunk, g, caps)
        else:
            moved = tilt.reshape(rows, 2, -1)[r0 : r0 + step]
        np.multiply(moved[:, 1], 1 - c, out=other)
        part += other
        np.multiply(moved[:, 0], c, out=other)
        part -= other
        cell = (b + n_bins * np.arange(k)[:, None]).ravel()
        sums = np.bincount(cell, part.ravel(), minlength=k * n_bins)
        out[r0 : r0 + k] = sums.reshape(k, n_bins)
    gaps: npt.NDArray[np.float64] = out.reshape(*lead, n_bins)
    return gaps


class SplitGeometry(NamedTuple):
    """What `split_gaps`, `class_tilt` and `fedeval.estimate.ece_range` read of the leaves'
    edges against the M bins, whatever the counts: the (leaf, bin) pairs (`touching_pairs`),
    each pair's part [at_lo, at_hi] of its leaf, its share f of the leaf and its centre c, and
    for the classes' slopes each leaf's width, its neighbours (nxt, prv) and 1/their span, and
    each pair's lever ((at_hi − x_l)² − (at_lo − x_l)²)/2; each leaf's width where positive
    (1 elsewhere, the divisor of its density) and each pair's leaf's 1/span. Read-only arrays,
    kept per axis
    (`split_geometry`): a fine axis (2^16 leaves) took 6 ms a reading, three a release."""

    leaf: np.ndarray
    b: np.ndarray
    at_lo: np.ndarray
    at_hi: np.ndarray
    f: np.ndarray
    c: np.ndarray
    width: np.ndarray
    nxt: np.ndarray
    prv: np.ndarray
    inv: np.ndarray
    lever: np.ndarray
    safe_width: np.ndarray
    inv_pair: np.ndarray


def split_geometry(edges: np.ndarray, n_bins: int) -> SplitGeometry:
    """The `SplitGeometry` of these L + 1 edges against `n_bins` bins (computed once per
    edges and M: a pure function of them)."""
    edges = np.ascontiguousarray(edges, dtype=np.float64)
    return _split_geometry(edges.tobytes(), n_bins)


@functools.lru_cache(maxsize=8)
def _split_geometry(edges_bytes: bytes, n_bins: int) -> SplitGeometry:
    edges = np.frombuffer(edges_bytes, dtype=np.float64)
    lo_e, hi_e = edges[:-1], edges[1:]
    assigned_bin = leaf_bins((lo_e + hi_e) / 2, n_bins)
    leaf, b = touching_pairs(lo_e, hi_e, assigned_bin, n_bins)
    b_lo, b_hi = b / n_bins, (b + 1) / n_bins
    b_hi[b == n_bins - 1] = np.inf
    b_lo[b == 0] = -np.inf
    lo_l, hi_l = lo_e[leaf], hi_e[leaf]
    at_lo, at_hi = np.maximum(lo_l, b_lo), np.minimum(hi_l, b_hi)
    width_l = hi_l - lo_l
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(
            width_l > 0, np.clip(at_hi - at_lo, 0.0, None) / width_l, assigned_bin[leaf] == b
        )
    c = np.where(width_l > 0, (at_lo + at_hi) / 2, (lo_l + hi_l) / 2)
    width = hi_e - lo_e
    centre = (lo_e + hi_e) / 2
    n_leaves = len(width)
    nxt = np.minimum(np.arange(n_leaves) + 1, n_leaves - 1)
    prv = np.maximum(np.arange(n_leaves) - 1, 0)
    span = centre[nxt] - centre[prv]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 0.0)
    x = centre[leaf]
    lever = ((at_hi - x) ** 2 - (at_lo - x) ** 2) / 2
    lever = np.where((width[leaf] > 0) & (at_hi > at_lo), lever, 0.0)
    safe_width = np.where(width > 0, width, 1.0)
    geometry = SplitGeometry(
        leaf, b, at_lo, at_hi, f, c, width, nxt, prv, inv, lever, safe_width, inv[leaf]
    )
    for a in geometry:
        a.setflags(write=False)
    return geometry


def slope_caps(leaves: np.ndarray, g: SplitGeometry) -> npt.NDArray[np.float64] | None:
    """Where a release's slope would make a class's density across a leaf negative, the slope
    that stays inside it, as a factor on the leaf's count (2, L; nan where the slope stands);
    None where no leaf needs one. A density linear across a leaf of width w holding n examples
    is n/w + β·(x − x_l), which is ≥ 0 on the whole leaf iff |β| ≤ 2n/w² (at the bound a
    triangle: every example on one side of the leaf's centre is as far as a density can put
    them). The central difference of the neighbours' densities exceeds it beside a point mass
    in a narrow leaf (declared thresholds a few 1e-4 apart, 1,774 rows, distdp ε = 1: a wide,
    empty leaf beside one, across two bin edges, was read holding 85 examples it has not,
    and the ECE interval held the truth in 23% of 200 releases). Read on the release
    (clamped at 0) and kept as the factor sign(β)·2/w² on each input's count, so the reading
    stays linear in the counts and the noise draws are read by the same map. Kept for the
    last few counts (`fedeval.core.memo.BitMemo`): the ECE's estimate and its discretisation
    range read the same release's."""
    counts = np.clip(np.asarray(leaves, dtype=np.float64), 0.0, None)
    if len(g.width) < 2:
        return None
    caps = _caps.get(counts, g)
    if caps is MISS:
        caps = _slope_caps(counts, g)
        _caps.put(caps, counts, g)
    return caps  # type: ignore[no-any-return]


def _slope_caps(counts: np.ndarray, g: SplitGeometry) -> npt.NDArray[np.float64] | None:
    beta = _slopes(counts[None], g)[0]
    inv_w2 = 2.0 / (g.safe_width * g.safe_width)
    capped = (np.abs(beta) > counts * inv_w2) & (g.width > 0)
    if not capped.any():
        return None
    caps: npt.NDArray[np.float64] = np.where(capped, np.sign(beta) * inv_w2, np.nan)
    return caps


def _slopes(flat: np.ndarray, g: SplitGeometry) -> npt.NDArray[np.float64]:
    """(rows, 2, L): each class's slope across each leaf, the central difference of its
    neighbours' densities n/w (one side at either end)."""
    ahead = _ahead(flat, g)
    ahead *= g.inv
    return ahead


def _ahead(flat: np.ndarray, g: SplitGeometry) -> npt.NDArray[np.float64]:
    """(rows, 2, L): each leaf's neighbours' densities n/w, the one ahead less the one behind
    (the leaf itself at either end); its differences written into one array (the same values
    as subtracting the slices into new ones)."""
    density: npt.NDArray[np.float64] = flat / g.safe_width
    density[..., ~(g.width > 0)] = 0.0  # as np.where(width > 0, n/w, 0) reads it
    ahead = np.empty_like(density)
    np.subtract(density[..., 2:], density[..., :-2], out=ahead[..., 1:-1])
    ahead[..., 0] = density[..., 1] - density[..., 0]
    ahead[..., -1] = density[..., -1] - density[..., -2]
    return ahead


def class_tilt(
    flat: np.ndarray, g: SplitGeometry, caps: np.ndarray | None = None
) -> npt.NDArray[np.float64]:
    """(rows, 2, pairs): what a density linear across each leaf moves into the part [at_lo,
    at_hi] of its leaf beyond the even share: ∫ β·(x − x_l) dx over the part = β·((at_hi −
    x_l)² − (at_lo − x_l)²)/2 (x_l the leaf's centre; 0 for a part that is the whole leaf),
    β the class's slope there, the central difference of its neighbours' densities n/w (one
    side at either end), linear in the counts of (rows, 2, L). `caps` (2, L; `slope_caps`): the
    release's leaves whose slope a density cannot have, read at the bound instead. Kept for the
    last few readings of one row (`fedeval.core.memo.BitMemo`): on exact counts the ECE's
    estimate reads the same leaves as its discretisation range."""
    if len(g.width) < 2:
        return np.zeros((*flat.shape[:2], len(g.leaf)))
    if len(flat) != 1:  # noise draws: read once each
        return _class_tilt(flat, g, caps)
    moved = _tilts.get(flat, g, caps)
    if moved is MISS:
        moved = _class_tilt(flat, g, caps)
        _tilts.put(moved, flat, g, caps)
    return moved  # type: ignore[no-any-return]


_caps = BitMemo(size=2, max_entries=1 << 18)
_tilts = BitMemo(size=2, max_entries=1 << 18)


def _class_tilt(
    flat: np.ndarray, g: SplitGeometry, caps: np.ndarray | None
) -> npt.NDArray[np.float64]:
    # Each leaf's density once, its neighbours' difference by slices (nxt = l + 1 and prv =
    # l − 1 inside, the leaf itself at either end), then gathered at the pairs' leaves: the
    # same elementwise operations as reading each pair's neighbours afresh, so the same
    # values, over L entries instead of twice the pairs (a fine axis: 3 calls a release).
    moved: npt.NDArray[np.float64] = _ahead(flat, g)[..., g.leaf]
    moved *= g.inv_pair
    moved *= g.lever
    if caps is not None:  # the slopes a density cannot have, at the bound (`slope_caps`)
        # Only the pairs of capped leaves are read afresh (a few of a fine axis's 2^16): the
        # same products at those entries as a choice over all of them, the rest as they are.
        at = caps[..., g.leaf]
        cls, pair = np.nonzero(~np.isnan(at))
        capped = np.nan_to_num(at[cls, pair])
        moved[..., cls, pair] = capped * flat[..., cls, g.leaf[pair]] * g.lever[pair]
    return moved


def touching_pairs(
    lo_e: np.ndarray, hi_e: np.ndarray, assigned: np.ndarray, n_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """(leaf, bin) of every pair where leaf [lo_e, hi_e] overlaps bin b (min(hi_e, (b + 1)/M)
    > max(lo_e, b/M), the outer bins open-ended) or is `assigned` to it, ordered by leaf then
    bin. Candidates are the bins of a leaf's ends ± 1 (a margin for rounding at a bin edge),
    then tested exactly as `discretisation_range` reads them."""
    first = np.clip(np.floor(lo_e * n_bins), 0, n_bins - 1).astype(np.int64) - 1
    last = np.clip(np.floor(hi_e * n_bins), 0, n_bins - 1).astype(np.int64) + 1
    first = np.minimum(np.maximum(first, 0), assigned)
    last = np.maximum(np.minimum(last, n_bins - 1), assigned)
    # The candidates as a (leaf, k) table, bin first + k, k below the leaf's count: its
    # nonzero entries come in (leaf, bin) order. Its width is the most candidates a leaf has
    # (at most M + 2), so a fine axis makes a narrow table, a coarse one a short one.
    size = last - first + 1
    k = np.arange(int(size.max()) if len(size) else 1)
    b = first[:, None] + k
    # Each bin's ends read from a table of the M bins (the same divisions, done once a bin);
    # a candidate past the last bin is past its leaf's count and is dropped below.
    bins = np.arange(n_bins)
    ends_lo, ends_hi = bins / n_bins, (bins + 1) / n_bins
    ends_hi[-1] = np.inf
    ends_lo[0] = -np.inf
    at = np.minimum(b, n_bins - 1)
    overlaps = np.minimum(hi_e[:, None], ends_hi[at]) - np.maximum(lo_e[:, None], ends_lo[at]) > 0
    keep = (overlaps | (assigned[:, None] == b)) & (k < size[:, None])
    leaf = np.nonzero(keep)[0]
    return leaf, b[keep]


def _debiased(gaps: np.ndarray, var: np.ndarray) -> npt.NDArray[np.float64]:
    """√max(D² − v, 0), elementwise."""
    debiased: npt.NDArray[np.float64] = np.sqrt(np.maximum(gaps * gaps - var, 0.0))
    return debiased


def ece_estimate(
    leaves: np.ndarray,
    noise_draws: np.ndarray | None,
    score: np.ndarray,
    *,
    n_bins: int = 15,
    discretisation: float | tuple[float, float] = 0.0,
    interval: bool = True,
    edges: np.ndarray | None = None,
) -> Estimate:
    """The ECE of a release (2, L) whose leaves sit at `score` (L,), with its 95 % interval
    (module docstring). `noise_draws` (R, 2, L): fresh draws of the release's noise (None: the
    counts are exact, and the estimate is the plain Σ|D_b|/N ± `discretisation`).
    `discretisation`: a half-width, or how far below and above (`discretisation_range`).
    `interval` False: the estimate alone. `exact` is left None for the caller to fill in.
    `edges` (L + 1): the gaps are read as a smooth density reads the leaves (`split_gaps`: a
    leaf across a bin edge split by the overlap), the noise on them likewise, instead of each
    leaf whole at `score` (the discretisation term is then about that reading:
    `discretisation_range` with `smooth`).

    The interval is read from the estimate uncapped (the ECE is at most 1, but capping each
    draw at 1 where the noise carries them past it piles them up there and their spread
    vanishes: 811 scores in [0.9945, 0.9999], 23 positives, localdp ε = 5, an ECE of 0.97
    held in 0.73 of 100 releases by [0.99, 1]-wide intervals, 0.98 uncapped), then clipped."""
    below, above = discretisation if isinstance(discretisation, tuple) else (discretisation,) * 2
    leaves = np.asarray(leaves, dtype=np.float64)
    score = np.asarray(score, dtype=np.float64)

    caps = None if edges is None else slope_caps(leaves, split_geometry(edges, n_bins))

    def gaps_of(x: np.ndarray) -> npt.NDArray[np.float64]:
        if edges is None:
            return bin_gaps(x, score, n_bins)
        return split_gaps(x, edges, n_bins, caps=caps)

    gaps = gaps_of(leaves)
    total = float(leaves.sum())
    full = (0.0, 1.0)
    if total <= 0:
        note = undetermined_note("the ECE", float(leaves[1].sum()), float(leaves[0].sum()))
        return Estimate(0.5, None, full if interval else None, note)
    if noise_draws is None or len(noise_draws) < 2:
        value = min(float(np.abs(gaps).sum()) / total, 1.0)
        if not interval:
            return Estimate(value)
        return Estimate(value, None, (max(value - below, 0.0), min(value + above, 1.0)))
    draws = np.asarray(noise_draws, dtype=np.float64)
    e = gaps_of(draws)  # (R, M): the noise on each D_b
    n_noise = draws.sum(axis=(1, 2))  # (R,): the noise on the total
    var = np.mean(e * e, axis=0)  # the noise is zero-mean: its second moment is its variance
    # Uncapped for the interval: the ECE is at most 1, but where the noise carries the
    # estimate past 1 the capped draws pile up at 1 and their spread vanishes (below).
    raw = float(_debiased(gaps, var).sum()) / total
    value = min(raw, 1.0)
    if not interval:
        return Estimate(value)
    sd_total = float(np.sqrt(np.mean(n_noise * n_noise)))
    inflation = float(np.sqrt(2 * var / math.pi).sum()) / total
    if total <= TOTAL_Z * sd_total or inflation >= WORST_CASE_NOISE:
        note = (
            f"the noise could make up an ECE of ≈ {inflation:.2f} on its own (noisy total "
            f"≈ {total:,.0f} ± {sd_total:,.0f}): the release cannot locate the ECE, so its "
            "interval is the worst case"
        )
        return Estimate(value, None, full, note)
    lo, hi = math.inf, -math.inf
    denom = np.maximum(total + n_noise, 1e-300)
    debiased = np.sign(gaps) * _debiased(gaps, var)
    # The gaps the release cannot tell from 0 (|D̃_b| ≤ Z95·√v_b) at 0: the truth whose
    # estimate errs furthest upward (module docstring), so the interval's lower end.
    zeroed = np.where(gaps * gaps <= Z95 * Z95 * var, 0.0, debiased)
    for truth in (debiased, gaps, zeroed):
        t = float(np.abs(truth).sum()) / total
        est = _debiased(truth + e, var).sum(axis=1) / denom
        err = np.where(total + n_noise > 0, est - t, 1.0)
        q_lo, q_hi = np.quantile(err, [TAIL, 1 - TAIL])
        lo, hi = min(lo, raw - float(q_hi)), max(hi, raw - float(q_lo))
    lo = raw - bias_aware_half(max(raw - lo, 0.0), below)
    hi = raw + bias_aware_half(max(hi - raw, 0.0), above)
    return Estimate(value, None, (min(max(lo, 0.0), value), max(min(hi, 1.0), value)))


def bias_aware_half(noise: float, bias: float) -> float:
    """The half-width that holds 95 % of a normal estimate whose error is its noise (95 %
    half-width `noise`, σ = noise/Z95) plus a fixed offset of at most `bias`: σ·cv(bias/σ),
    cv(t) the 95 % point of |N(t, 1)|, Φ(cv − t) − Φ(−cv − t) = 0.95 (Armstrong & Kolesár,
    "Simple and honest confidence intervals in nonparametric regression", Quantitative
    Economics 2020, eq. 2.3). Between the noise's 1.96σ (no offset) and bias + 1.645σ (an
    offset many σ wide), and never above the sum bias + 1.96σ: a fixed offset at its bound
    leaves only one tail of the noise to miss on. The ECE's offsets (where the examples sit
    inside their leaves, the data's sampling given the counts) are fixed for one data set
    while the noise is drawn, so they are a bias, not a spread to add in quadrature: added
    as a range they held 0.99–1.00 where the noise alone held 0.72–0.98."""
    if not bias > 0:
        return noise
    if not noise > 0:
        return bias
    sigma = noise / Z95
    t = bias / sigma

    def miss(h: float) -> float:
        return float(ndtr(h - t) - ndtr(-h - t)) - (1 - 2 * TAIL)

    # cv lies in [t + Φ⁻¹(0.95), t + Z95]: at the lower end the far tail's mass is missing
    # (miss ≤ 0), at the upper end it is counted twice over (miss ≥ 0).
    # Where the far tail's mass is below rounding (an offset many σ wide), the lower end.
    low, high = t + ONE_SIDED, t + Z95
    if miss(low) >= 0.0 or miss(high) <= 0.0:
        return sigma * low
    return sigma * float(brentq(miss, low, high, xtol=1e-10))
