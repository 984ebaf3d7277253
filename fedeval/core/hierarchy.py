"""Dyadic score hierarchy on [0, 1]: levels, constrained inference, range queries, quantiles.

Level k (1..h) splits [0, 1] into 2^k equal cells; the leaves are level h. Every function works
on arrays whose last axis is the cell axis, so a leading axis can hold classes or many noise
draws at once (that is how the exact variance of any query is computed in the tests).

Sources: Cormode & Markov, appendix A (dyadic counts, prefix queries, quantiles); Hay et al.,
"Boosting the accuracy of differentially private histograms through consistency", VLDB 2010
(constrained inference), generalised here to a noise variance that may differ between levels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from fedeval.core.memo import MISS, BitMemo

# scipy.optimize is imported on the first fit, not with this module: it is the largest import
# of a Flower ClientApp or ServerApp (which read cell indices but never fit), about 0.5 CPU-s of
# each app process and Ray worker (issue 24).
_pava: Callable[[np.ndarray, np.ndarray, np.ndarray], object] | None = None
"""The pool-adjacent-violators kernel behind scipy's `isotonic_regression`, without its copies
(None: use the public function); looked up by `_kernel()` on the first fit."""
_looked_up = False


def _kernel() -> Callable[[np.ndarray, np.ndarray, np.ndarray], object] | None:
    """`_pava`, looked up once: scipy's private kernel while it fits as the public function
    does (`_kernel_agrees`), else None."""
    global _pava, _looked_up
    if not _looked_up:
        _looked_up = True
        try:
            from scipy.optimize._pava_pybind import pava
        except ImportError:  # pragma: no cover - a scipy that moved it: the public function
            return None
        _pava = pava
        if not _kernel_agrees():  # pragma: no cover - a changed scipy
            _pava = None
    return _pava


def _isotonic_regression(y: np.ndarray) -> np.ndarray:
    """scipy's public unit-weight isotonic regression of one row."""
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(y).x)


def _kernel_agrees() -> bool:
    """Whether the private kernel, called as `_isotonic_rows_in_place` calls it, still fits as
    the public function does: a scipy that changed its signature or meaning falls back to the
    public function instead of failing (or fitting wrongly) mid-run."""
    y = np.array([3.0, 1.0, 2.0, 5.0, 4.0, 4.0, 0.5, 7.0])
    want = _isotonic_regression(y)
    try:
        _pava(y, np.ones(len(y)), np.full(len(y) + 1, -1, dtype=np.intp))  # type: ignore[misc]
    except Exception:  # any failure of a private API means: do not use it
        return False
    return bool(np.array_equal(y, want))


def cell_index(scores: np.ndarray, height: int) -> np.ndarray:
    """Leaf cell of each score in [0, 1]: floor(s · 2^h), with s = 1 in the last cell.

    Multiplying by a power of two is exact in floating point, so coarsening a height-H index by
    a right shift gives the height-h index of the same score.
    """
    n_leaves = 1 << height
    idx = (scores * n_leaves).astype(np.int64)
    np.minimum(idx, n_leaves - 1, out=idx)
    return idx


def coarsen(leaves: np.ndarray, height: int) -> np.ndarray:
    """Sum 2^H leaves (last axis) into the 2^h cells of level `height` ≤ H."""
    n = leaves.shape[-1]
    target = 1 << height
    if target > n:
        raise ValueError(f"cannot refine {n} cells into {target}")
    if n == 2 * target and leaves.dtype in (np.float64, np.int64):
        return _pair_sum(leaves)  # one level up: the pairs by slicing (the same one rounding)
    cells: np.ndarray = leaves.reshape(*leaves.shape[:-1], target, n // target).sum(axis=-1)
    return cells


def levels_from_leaves(leaves: np.ndarray, levels: Sequence[int]) -> list[np.ndarray]:
    """The exact counts of each requested level, summed from the leaves."""
    return [coarsen(leaves, k) for k in levels]


def consistent_leaves(
    measured: Sequence[np.ndarray],
    variances: Sequence[float | np.ndarray],
    levels: Sequence[int],
) -> np.ndarray:
    """Least-variance consistent leaf estimates from independent noisy level measurements.

    `measured[i]` are unbiased noisy counts of level `levels[i]` (last axis 2^k cells) with
    noise variance `variances[i]`: one number for every cell of the level, or an array of the
    cells' own variances (broadcast against the level's counts). With one level, that level is
    returned. With levels 1..h, the two passes of Hay et al. (2010, section 4) run with
    inverse-variance weights: bottom-up, each node's own measurement is combined with the sum
    of its children's estimates; top-down, the parent's final value is split between its
    children in proportion to their variances. The result is the generalised-least-squares
    estimate, so every range query answered from these leaves is unbiased and has the least
    variance among linear unbiased estimators. Nodes measured without noise (variance 0) are
    kept exactly; a level with infinite variance (nothing measured) is ignored, and where
    nothing below a node was measured the top-down pass splits it equally between its children.
    """
    levels = list(levels)
    if len(levels) == 1:
        return np.asarray(measured[0], dtype=np.float64)
    if levels != list(range(levels[0], levels[0] + len(levels))):
        raise ValueError(f"levels must be consecutive, got {levels}")
    if any(np.ndim(v) > 0 for v in variances):
        return _consistent_per_cell(measured, variances)

    z = [np.asarray(m, dtype=np.float64) for m in measured]
    vz = [float(v) for v in variances]  # all scalars here
    # Fewer fresh arrays, the same operations (so the same values): each level's pairs summed
    # once (the bottom-up pass sums z_{k+1}'s pairs once z_{k+1} is final; the top-down pass
    # reads those sums and then holds its gap in them), the children's weighted sums made in
    # one scratch array, and a level's final values written over the z_k this call made. A
    # fresh array's pages fault on first touch: in a new process, where the height choice
    # decodes 20 trees of up to 17 × 2^14 leaves, that was most of this function's time.
    pairs: list[np.ndarray | None] = [None] * len(levels)
    made = [False] * len(levels)  # z[i] is an array of this call's (writable in place)
    scratch: np.ndarray | None = None
    # Bottom-up: z_k = weighted mean of y_k and the sum of the children's z_{k+1}.
    for i in range(len(levels) - 2, -1, -1):
        child_sum = pairs[i + 1] = _pair_sum(z[i + 1])
        v_own, v_children = vz[i], 2.0 * vz[i + 1]
        if v_own == 0.0:
            continue  # an exact measurement stays as it is
        if not np.isfinite(v_own):  # nothing measured at this level (e.g. no OUE reporters)
            z[i] = child_sum
            vz[i] = v_children
            continue
        if not np.isfinite(v_children):  # nothing measured below: the node's own value stands
            continue
        if v_children == 0.0:
            z[i] = child_sum
            vz[i] = 0.0
            continue
        w_own = v_children / (v_own + v_children)
        # w_own·z + (1 − w_own)·Σ children
        own = w_own * z[i]
        if own.shape == child_sum.shape:
            if scratch is None or scratch.size < child_sum.size:
                scratch = np.empty(child_sum.size)
            scaled = scratch[: child_sum.size].reshape(child_sum.shape)
            np.multiply(child_sum, 1.0 - w_own, out=scaled)
            z[i] = np.add(own, scaled, out=own)
        else:
            z[i] = own + child_sum * (1.0 - w_own)
        made[i] = True
        vz[i] = v_own * v_children / (v_own + v_children)
    # Top-down: children absorb the parent's disagreement equally (siblings share a variance):
    # z + gap/2 for each child, added into the siblings' strided halves (the same values as
    # adding the repeated gap/2, without making it: a stack of 200 draws' 2^10 leaves
    # ~5.9 → ~4 ms).
    out = z[0]
    for i in range(1, len(levels)):
        below = pairs[i]
        assert below is not None  # summed by the bottom-up pass, read by this step alone
        gap = np.subtract(out, below, out=below) if out.shape == below.shape else out - below
        gap /= 2.0
        shape = np.broadcast_shapes(z[i].shape[:-1], gap.shape[:-1]) + z[i].shape[-1:]
        new = z[i] if made[i] and z[i].shape == shape else np.empty(shape)
        np.add(z[i][..., 0::2], gap, out=new[..., 0::2])
        np.add(z[i][..., 1::2], gap, out=new[..., 1::2])
        out = new
    return out


def class_variances(variances: Sequence[float | np.ndarray], c: int) -> list[float | np.ndarray]:
    """The noise variances of class `c`'s cells: a level's one number as it is, a per-cell
    array of both classes (2, 2^k) sliced to the class."""
    return [v if np.ndim(v) == 0 else np.asarray(v)[c] for v in variances]


def _consistent_per_cell(
    measured: Sequence[np.ndarray], variances: Sequence[float | np.ndarray]
) -> np.ndarray:
    """`consistent_leaves` where cells of a level have variances of their own: the same two
    passes, elementwise, and the top-down split in proportion to the two children's variances
    (equal where both are 0 or both infinite)."""
    z = [np.asarray(m, dtype=np.float64) for m in measured]
    # Each level's variances at their own shape (full along the cells), not copied out to the
    # counts' (a stack of noise draws shares one set): every entry is what the broadcast copy
    # held, so the weights, the combined variances and the shares are the same values, and
    # they broadcast against the counts where they meet them.
    vz = [
        np.broadcast_to(
            np.asarray(v, np.float64), np.broadcast_shapes(np.shape(v), zi.shape[-1:])
        ).copy()
        for v, zi in zip(variances, z, strict=True)
    ]
    for i in range(len(z) - 2, -1, -1):
        child_sum, v_children = _pair_sum(z[i + 1]), _pair_sum(vz[i + 1])
        v_own = vz[i]
        with np.errstate(invalid="ignore", divide="ignore"):
            w_own = np.where(
                v_own == 0.0,
                1.0,  # an exact measurement stays as it is
                np.where(
                    ~np.isfinite(v_own),
                    0.0,  # nothing measured here: the children's sum
                    np.where(
                        ~np.isfinite(v_children),
                        1.0,  # nothing measured below: the node's own value stands
                        v_children / (v_own + v_children),
                    ),
                ),
            )
            both = np.where(
                np.isfinite(v_own) & np.isfinite(v_children),
                v_own * v_children / np.where(v_own + v_children > 0, v_own + v_children, 1.0),
                np.minimum(v_own, v_children),
            )
        z[i] = w_own * z[i] + (1.0 - w_own) * child_sum
        vz[i] = both
    out = z[0]
    for i in range(1, len(z)):
        gap = out - _pair_sum(z[i])
        v = vz[i].reshape(*vz[i].shape[:-1], -1, 2)
        total = v.sum(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(np.isfinite(total) & (total > 0), v / total, 0.5)
        out = z[i] + np.repeat(gap, 2, axis=-1) * share.reshape(vz[i].shape)
    return out


def _pair_sum(a: np.ndarray) -> np.ndarray:
    """Neighbouring cells summed: a[2i] + a[2i + 1] (one rounding, as the pair's reduce does,
    without its per-pair loop: several times faster on a stack of noise draws)."""
    pairs: np.ndarray = a[..., 0::2] + a[..., 1::2]
    return pairs


def cumulative(
    leaves: np.ndarray, x: np.ndarray | float, sums: np.ndarray | None = None
) -> np.ndarray:
    """Mass of [0, x) for x in [0, 1], taking each leaf as uniform inside (linear interpolation).

    `leaves` has shape (..., L); the result has shape (..., *shape(x)). `sums`, where given, is
    `np.cumsum(leaves, axis=-1)` taken once for many queries on the same leaves (the same
    result, without the pass over the leaves).
    """
    leaves = np.asarray(leaves, dtype=np.float64)
    n = leaves.shape[-1]
    # cs[..., j - 1] = mass of the first j leaves
    cs = np.cumsum(leaves, axis=-1) if sums is None else sums
    pos = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0) * n
    j = np.minimum(np.floor(pos).astype(np.int64), n - 1)
    frac = pos - j
    below = np.where(j > 0, cs[..., np.maximum(j - 1, 0)], 0.0)  # (no leading 0 to copy in)
    mass: npt.NDArray[np.float64] = below + leaves[..., j] * frac
    return mass


def mass_at_or_above(leaves: np.ndarray, t: np.ndarray | float) -> np.ndarray:
    """Mass with score ≥ t (the leaf that holds t taken as uniform inside)."""
    leaves = np.asarray(leaves, dtype=np.float64)
    mass: npt.NDArray[np.float64] = leaves.sum(axis=-1, keepdims=np.ndim(t) > 0) - cumulative(
        leaves, t
    )
    return mass


def monotone_cumulative(leaves: np.ndarray) -> np.ndarray:
    """Prefix sums cs[j] = mass of the first j leaves, made non-decreasing by least squares,
    from 0 up to the raw total; `leaves` (..., L) gives (..., L + 1), each row fitted apart.

    The raw prefix sums of consistent leaves are unbiased; isotonic regression keeps them as
    close as possible while making them a valid CDF. Clamping each noisy leaf at 0 instead would
    add the positive part of the noise of every empty leaf: under strong noise that spurious
    mass drags every quantile (and every curve) away from the data. Both ends are held at
    their unbiased values, 0 and the raw total: where a class is sparse at either end, the fit
    pools noise there into one block whose mean is biased (up at the top end, as a maximum of
    noisy partial means is), which would lift the class's whole upper tail. Measured on 1.5%
    positives at 200k rows, distdp ε = 1, 40 releases: the leaves' AP bias −0.008 → −0.003,
    its spread 0.0078 → 0.0058.

    The last few fits are kept (`fedeval.core.memo.BitMemo`): a release's evaluation fits the
    same leaves up to seven times (the curves, the AP's hull, its reach, its order spread, the
    top block), and the fit of leaves equal bit for bit is returned (a copy), not taken again.
    """
    x = np.asarray(leaves, dtype=np.float64)
    fit = _fits.get(x)
    if fit is MISS:
        fit = _monotone_cumulative(x)
        _fits.put(fit, x)
    out: np.ndarray = fit
    return out


_fits = BitMemo(size=6, max_entries=1 << 17)
"""`monotone_cumulative`'s last fits (leaves up to 2^17 entries: a few MB)."""


def _monotone_cumulative(leaves: np.ndarray) -> np.ndarray:
    cs = np.zeros((*leaves.shape[:-1], leaves.shape[-1] + 1))
    np.cumsum(leaves, axis=-1, out=cs[..., 1:])
    total = cs[..., -1:]
    top = np.where(0.0 > total, 0.0, total)  # max(raw total, 0), taken before the fit
    _isotonic_rows_in_place(cs.reshape(-1, cs.shape[-1]))
    return np.clip(cs, 0.0, top, out=cs)


def _isotonic_rows_in_place(rows: np.ndarray) -> None:
    """Unit-weight isotonic regression of each row of a C-contiguous float64 (R, n) array,
    written over it: what `isotonic_regression(row).x` returns (its kernel, called as it calls
    it: unit weights, block bounds at −1), at a fraction of the cost on short rows, where its
    copies and result object dominate. One fit per row: scipy's is 1-D only."""
    n = rows.shape[-1]
    check = n >= OWN_FIT_CHECK_FROM
    pava = _kernel()
    if pava is None:
        for y in rows:
            if not (check and _own_fit(y)):
                y[:] = _isotonic_regression(y)
        return
    w, r = np.empty(n), np.empty(n + 1, dtype=np.intp)  # the kernel's work space, reset per row
    for y in rows:
        if check and _own_fit(y):
            continue
        w.fill(1.0)
        r.fill(-1)
        pava(y, w, r)


OWN_FIT_CHECK_FROM = 4096
"""Rows from which `_own_fit` is tested before fitting: exact counts at a fine height (a
federated release at h = 16: the fit pools every run of empty leaves, ~1 ms a row against
~0.1 ms for the test); shorter rows are fitted at once."""


def _own_fit(y: np.ndarray) -> bool:
    """Whether `y` is already what isotonic regression returns, bit for bit: strictly
    increasing (no block is pooled), or non-decreasing integers below 2^53 (a pooled run of
    equal integers has that integer as its exact mean)."""
    # One pass for both orders (the least step: ≥ 0 iff every step is, NaN failing both), and
    # the integers tried on a few entries first: a row of noisy sums fails at once.
    least = np.diff(y).min()
    if not least >= 0:
        return False
    if least > 0:
        return True
    head = y[:OWN_FIT_HEAD]
    if not np.all(head == np.rint(head)):
        return False
    return bool(np.all(y == np.rint(y)) and max(abs(y[0]), abs(y[-1])) < 2.0**53)


OWN_FIT_HEAD = 64
"""Entries `_own_fit` tries for integers before the whole row."""


def quantiles(leaves: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Scores x with mass([0, x)) = q · total, interpolating linearly inside the leaf that holds it.

    Works on the monotone prefix sums (`monotone_cumulative`); interpolating inside the leaf
    avoids the bias of returning the leaf's left edge.
    """
    return quantiles_of(monotone_cumulative(leaves), q)


def quantiles_of(cs: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`quantiles` from the leaves' monotone prefix sums `cs` (`monotone_cumulative`), taken
    once for many queries on the same leaves."""
    n = len(cs) - 1
    total = cs[-1]
    if total <= 0:
        return np.linspace(0.0, 1.0, len(np.atleast_1d(q)))
    target = np.asarray(q, dtype=np.float64) * total
    # First knot whose prefix reaches the target, then interpolate inside that leaf.
    j = np.clip(np.searchsorted(cs, target, side="left"), 1, n)
    lo, hi = cs[j - 1], cs[j]
    width = np.where(hi > lo, hi - lo, 1.0)
    frac = np.where(hi > lo, (target - lo) / width, 0.0)
    positions: npt.NDArray[np.float64] = (j - 1 + frac) / n
    return positions


def equidepth_edges(
    pooled_leaves: np.ndarray, n_buckets: int, prefix: np.ndarray | None = None
) -> np.ndarray:
    """B + 1 bucket edges at the estimated 0, 1/B, …, 1 quantiles of the pooled scores;
    `prefix`, where given, is their `monotone_cumulative`, taken once for several binnings."""
    q = np.linspace(0.0, 1.0, n_buckets + 1)
    edges = quantiles(pooled_leaves, q) if prefix is None else quantiles_of(prefix, q)
    edges[0], edges[-1] = 0.0, 1.0
    return np.maximum.accumulate(edges)


def bucket_counts(
    leaves: np.ndarray, edges: np.ndarray, sums: np.ndarray | None = None
) -> np.ndarray:
    """Counts of each bucket [edges[i], edges[i+1]): a range query per bucket (`sums` as in
    `cumulative`)."""
    return np.diff(cumulative(leaves, edges, sums), axis=-1)
