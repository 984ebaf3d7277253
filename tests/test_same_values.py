"""The release's post-read code made cheaper without changing a bit (issue 28's fixed costs):
each rewritten function against the formula it replaced, written out here as it was, on inputs
that reach its every branch (empty and pooled levels, exact and infinite variances, broadcast
draws, leaves without positives, capped slopes at an infinite factor), compared bit for bit;
and `fedeval.core.memo.BitMemo`, which returns a stored result only for equal bits."""

from __future__ import annotations

import numpy as np
import pytest

import fedeval.core.hierarchy as hierarchy
from fedeval.core.hierarchy import consistent_leaves, monotone_cumulative
from fedeval.core.memo import MISS, BitMemo
from fedeval.estimate.ece import class_tilt, split_geometry
from fedeval.estimate.roc_pr import leaf_ap_rows, leaf_tails


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def _pair_sum(a: np.ndarray) -> np.ndarray:
    return a[..., 0::2] + a[..., 1::2]


def _consistent_before(measured, variances, levels):
    """`consistent_leaves` (scalar variances) as it was: pairs summed in each pass, the
    children's sums scaled in place, a fresh array for every level's final values."""
    z = [np.asarray(m, dtype=np.float64) for m in measured]
    vz = [float(v) for v in variances]
    for i in range(len(levels) - 2, -1, -1):
        child_sum = _pair_sum(z[i + 1])
        v_own, v_children = vz[i], 2.0 * vz[i + 1]
        if v_own == 0.0:
            continue
        if not np.isfinite(v_own):
            z[i], vz[i] = child_sum, v_children
            continue
        if not np.isfinite(v_children):
            continue
        if v_children == 0.0:
            z[i], vz[i] = child_sum, 0.0
            continue
        w_own = v_children / (v_own + v_children)
        own = w_own * z[i]
        child_sum *= 1.0 - w_own
        z[i] = own + child_sum if own.shape != child_sum.shape else np.add(own, child_sum, out=own)
        vz[i] = v_own * v_children / (v_own + v_children)
    out = z[0]
    for i in range(1, len(levels)):
        gap = out - _pair_sum(z[i])
        gap /= 2.0
        shape = np.broadcast_shapes(z[i].shape[:-1], gap.shape[:-1]) + z[i].shape[-1:]
        out = np.empty(shape)
        np.add(z[i][..., 0::2], gap, out=out[..., 0::2])
        np.add(z[i][..., 1::2], gap, out=out[..., 1::2])
    return out


def _trees(rng: np.random.Generator):
    h = 6
    levels = list(range(1, h + 1))
    even = [float(v) for v in rng.uniform(0.5, 4.0, h)]
    for name, variances in [
        ("noisy", even),
        ("height choice", [1.3] * h),
        ("nothing measured at the top", [np.inf, *even[1:]]),
        ("an exact level", [*even[:2], 0.0, *even[3:]]),
        ("exact leaves", [*even[:-1], 0.0]),
        ("nothing measured below", [*even[:-1], np.inf]),
    ]:
        yield name, [rng.normal(size=(2, 1 << k)) * 9 for k in levels], variances, levels
    # the height choice's read: zeros above, one level of vectors at the leaves
    yield (
        "zeros above",
        [np.zeros((5, 1 << k)) for k in levels[:-1]] + [rng.random((5, 1 << h))],
        even,
        levels,
    )
    # noise draws under the release's own upper levels (broadcast), and draws at every level
    yield (
        "broadcast",
        [rng.normal(size=(2, 1 << k)) for k in levels[:-1]] + [rng.normal(size=(7, 2, 1 << h))],
        even,
        levels,
    )
    yield "draws", [rng.normal(size=(7, 2, 1 << k)) for k in levels], even, levels


@pytest.mark.parametrize("case", range(9))
def test_consistent_leaves_are_the_values_of_before(case):
    name, measured, variances, levels = list(_trees(np.random.default_rng(21)))[case]
    copies = [m.copy() for m in measured]
    got = consistent_leaves(measured, variances, levels)
    want = _consistent_before(copies, variances, levels)
    assert got.shape == want.shape, name
    assert _bits(got) == _bits(want), name
    for m, c in zip(measured, copies, strict=True):  # the caller's arrays are left alone
        assert _bits(m) == _bits(c), name


def _leaf_ap_rows_before(fp, tp, rule):
    """`leaf_ap_rows` as it was: the precision terms of the live leaves alone, then each row's
    sum over its own (the integral rule's and the step rule's formulas)."""
    total = tp[:, -1]
    p, n = np.diff(tp, axis=-1), np.diff(fp, axis=-1)
    live = p > 0
    a, b = tp[:, :-1][live], fp[:, :-1][live]
    p, n = p[live], n[live]
    c, m = a + b, p + n
    if rule == "step":
        prec = (a + p) / (c + m)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_term = np.where(c > 0, np.log1p(m / np.where(c > 0, c, 1.0)) / m, 0.0)
        prec = p / m + (a - p * c / m) * log_term
    terms = p * np.clip(prec, 0.0, 1.0)
    bounds = np.r_[0, np.cumsum(np.count_nonzero(live, axis=1))]
    out = np.zeros(len(tp))
    for i in np.flatnonzero(~(total <= 0)):
        s = float(np.add.reduce(terms[bounds[i] : bounds[i + 1]]))
        out[i] = min(max(s / total[i], 0.0), 1.0)
    return out


@pytest.mark.parametrize("rule", ["integral", "step"])
def test_leaf_ap_rows_are_the_values_of_before(rule):
    """Rows of noisy leaves (empty leaves, leaves without positives, a row without any, ties),
    fitted into tails as the estimators fit them."""
    rng = np.random.default_rng(28)
    leaves = np.round(rng.gamma(0.4, 30.0, size=(40, 2, 300)) + rng.normal(0, 4, (40, 2, 300)))
    leaves[3, 1] = 0.0  # no positives at all
    leaves[5, :, 100:200] = 0.0  # a run of empty leaves
    leaves[7, 1, ::2] = 0.0  # every other leaf without positives
    fp, tp = leaf_tails(leaves)
    got, want = leaf_ap_rows(fp, tp, rule), _leaf_ap_rows_before(fp, tp, rule)
    assert _bits(got) == _bits(want)
    assert np.unique(got).size > 30  # the rows differ: a real comparison


def test_class_tilt_capped_pairs_are_the_values_of_before():
    """The pairs of capped leaves read afresh alone, as the choice over every pair read them:
    a factor of ±inf (a leaf too narrow for its bound) is the largest float, as before."""
    rng = np.random.default_rng(5)
    edges = np.sort(np.r_[0.0, rng.random(40), 1.0])
    edges[10] = edges[11] - 1e-160  # a leaf so narrow that 2/w² is infinite
    g = split_geometry(edges, 15)
    flat = rng.gamma(0.5, 20.0, size=(3, 2, len(edges) - 1))
    caps = np.full((2, len(edges) - 1), np.nan)
    caps[0, [2, 10, 30]] = [3.0, np.inf, -2.5]
    caps[1, [10, 11]] = [-np.inf, 7.0]
    with np.errstate(over="ignore", invalid="ignore"):  # ±inf factors overflow, as before
        got = class_tilt(flat, g, caps)
        uncapped = class_tilt(flat, g, None)
        at = caps[..., g.leaf]
        want = np.where(np.isnan(at), uncapped, np.nan_to_num(at) * flat[..., g.leaf] * g.lever)
    assert _bits(got) == _bits(want)
    assert not np.array_equal(got, uncapped)  # some pairs were capped


def _own_fit_before(y: np.ndarray) -> bool:
    step = np.diff(y)
    if not np.all(step >= 0):
        return False
    return bool(np.all(step > 0)) or bool(
        np.all(y == np.rint(y)) and max(abs(y[0]), abs(y[-1])) < 2.0**53
    )


def test_own_fit_decides_as_before():
    base = np.arange(5000.0)
    rows = {
        "increasing": base * 1.5,
        "integers with ties": np.floor(base / 3),
        "ties, a fraction after the head": np.r_[np.floor(base[:-1] / 3), 5000.5],
        "ties, fractions": np.floor(base / 3) + 0.25,
        "a fall": np.r_[base[:100], base[99:]],
        "a NaN": np.r_[base[:10], np.nan, base[11:]],
        "integers past 2^53": np.floor(base / 3) * 2.0**50,
        "ties at -0.0": np.r_[-0.0, 0.0, base[1:]],
    }
    for name, y in rows.items():
        assert hierarchy._own_fit(y) == _own_fit_before(y), name


def test_monotone_fit_kept_is_a_copy_of_the_same_fit():
    """The kept fit of equal leaves is the fit itself, bit for bit, and a caller writing over
    what it was handed does not change what the next caller gets."""
    rng = np.random.default_rng(3)
    leaves = rng.normal(5.0, 20.0, size=(2, 200))
    first = monotone_cumulative(leaves)
    fresh = hierarchy._monotone_cumulative(leaves.copy())
    assert _bits(first) == _bits(fresh)
    first[:] = -1.0  # a caller that works in place
    again = monotone_cumulative(leaves.copy())
    assert _bits(again) == _bits(fresh)
    again[:] = -2.0
    assert _bits(monotone_cumulative(leaves)) == _bits(fresh)
    # leaves that differ in one bit are fitted afresh
    other = leaves.copy()
    other[0, 0] = np.nextafter(other[0, 0], np.inf)
    assert _bits(monotone_cumulative(other)) == _bits(hierarchy._monotone_cumulative(other))


def test_bit_memo_matches_bits_and_objects_only():
    memo = BitMemo(size=2, max_entries=10)
    a = np.array([0.0, 1.0, np.nan])
    token = object()
    memo.put(np.array([1.0, 2.0]), a, token)
    hit = memo.get(a.copy(), token)
    assert isinstance(hit, np.ndarray) and hit.tolist() == [1.0, 2.0]
    hit[:] = 9.0  # a copy: the stored result stands
    assert memo.get(a, token).tolist() == [1.0, 2.0]
    assert memo.get(np.array([-0.0, 1.0, np.nan]), token) is MISS  # -0.0 is not 0.0
    assert memo.get(a, object()) is MISS  # another object, though equal in kind
    assert memo.get(a.astype(np.float32), token) is MISS
    assert memo.get(a[:2], token) is MISS
    big = np.zeros(11)
    memo.put(np.ones(1), big, token)  # too large to keep
    assert memo.get(big, token) is MISS
    memo.put(np.full(1, 2.0), np.ones(2), token)
    memo.put(np.full(1, 3.0), np.ones(3), token)  # the first entry leaves (size 2)
    assert memo.get(a, token) is MISS
    assert memo.get(np.ones(3), token).tolist() == [3.0]


def _log_slopes_before(density: np.ndarray, mid: np.ndarray) -> np.ndarray:
    """`trend_split`'s slopes as they were read: three full readings, chosen in turn."""
    occupied = density > 0
    log_d = np.where(occupied, np.log(np.where(occupied, density, 1.0)), np.nan)
    pad = np.full((*density.shape[:-1], 1), np.nan)
    below = np.concatenate([pad, log_d[..., :-1]], axis=-1)
    above = np.concatenate([log_d[..., 1:], pad], axis=-1)
    mid_below = np.concatenate([[np.nan], mid[:-1]])
    mid_above = np.concatenate([mid[1:], [np.nan]])
    with np.errstate(invalid="ignore"):
        centred = (above - below) / (mid_above - mid_below)
        from_below = (log_d - below) / (mid - mid_below)
        from_above = (above - log_d) / (mid_above - mid)
    slope = np.where(np.isfinite(centred), centred, np.nan)
    slope = np.where(np.isnan(slope) & np.isfinite(from_below), from_below, slope)
    slope = np.where(np.isnan(slope) & np.isfinite(from_above), from_above, slope)
    return np.nan_to_num(slope, nan=0.0)


@pytest.mark.parametrize("n_leaves", [1, 2, 3, 64])
def test_log_slopes_are_the_values_of_before(n_leaves):
    """Leaves with mass, empty leaves alone and in runs, at either end, on uneven widths."""
    from fedeval.estimate.average_precision import _log_slopes

    rng = np.random.default_rng(n_leaves)
    edges = np.sort(np.r_[0.0, rng.random(n_leaves - 1), 1.0])
    mid = (edges[:-1] + edges[1:]) / 2.0
    density = rng.gamma(0.7, 5.0, size=(6, 2, n_leaves)) * (rng.random((6, 2, n_leaves)) > 0.3)
    density[0] = 0.0
    density[1, :, :1] = 0.0
    got, want = _log_slopes(density, mid), _log_slopes_before(density, mid)
    assert got.shape == want.shape
    assert _bits(got) == _bits(want)


def _class_tilt_before(flat, g, caps):
    density = np.where(g.width > 0, flat / g.safe_width, 0.0)
    ahead = np.empty_like(density)
    ahead[..., 1:-1] = density[..., 2:] - density[..., :-2]
    ahead[..., 0] = density[..., 1] - density[..., 0]
    ahead[..., -1] = density[..., -1] - density[..., -2]
    moved = ahead[..., g.leaf] * g.inv_pair * g.lever
    if caps is not None:
        at = caps[..., g.leaf]
        moved = np.where(np.isnan(at), moved, np.nan_to_num(at) * flat[..., g.leaf] * g.lever)
    return moved


def test_split_gaps_and_slopes_are_the_values_of_before():
    """The ECE's gaps of noisy draws (rows of both signs, a leaf of no width) and the release's
    slope caps, against the formulas as they were written."""
    from fedeval.estimate.ece import slope_caps, split_gaps

    rng = np.random.default_rng(11)
    edges = np.sort(np.r_[0.0, rng.random(70), 1.0])
    edges[20] = edges[21]  # a leaf of no width
    g = split_geometry(edges, 15)
    leaves = rng.gamma(0.6, 40.0, size=(2, 71))
    leaves[1, 30:33] = 0.0
    draws = rng.normal(0.0, 6.0, size=(9, 2, 71))
    caps = slope_caps(leaves, g)
    assert caps is not None and np.isfinite(caps).any()  # some leaves are capped
    got_gaps = split_gaps(leaves + draws, edges, 15, caps=caps)
    want = []
    for row in leaves + draws:
        chunk = row[None]
        part = g.f * ((1 - g.c) * chunk[:, 1, g.leaf] - g.c * chunk[:, 0, g.leaf])
        moved = _class_tilt_before(chunk, g, caps)
        part = part + (1 - g.c) * moved[:, 1] - g.c * moved[:, 0]
        want.append(np.bincount(g.b, part[0], minlength=15))
    assert _bits(got_gaps) == _bits(np.array(want))


def _per_cell_before(measured, variances):
    """`consistent_leaves` with per-cell variances as it was: every level's variances copied
    out to its counts' shape first."""
    z = [np.asarray(m, dtype=np.float64) for m in measured]
    vz = [
        np.broadcast_to(np.asarray(v, np.float64), zi.shape).copy()
        for v, zi in zip(variances, z, strict=True)
    ]
    for i in range(len(z) - 2, -1, -1):
        child_sum, v_children = _pair_sum(z[i + 1]), _pair_sum(vz[i + 1])
        v_own = vz[i]
        with np.errstate(invalid="ignore", divide="ignore"):
            w_own = np.where(
                v_own == 0.0,
                1.0,
                np.where(
                    ~np.isfinite(v_own),
                    0.0,
                    np.where(~np.isfinite(v_children), 1.0, v_children / (v_own + v_children)),
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


def test_per_cell_variances_are_the_values_of_before():
    """Per-cell variances (OUE's, with empty cells at 0 and unmeasured ones infinite, a scalar
    level among them) under a stack of draws at every level and under the release's own upper
    levels (broadcast)."""
    rng = np.random.default_rng(9)
    levels = list(range(1, 7))
    variances = [rng.uniform(0.5, 9.0, (2, 1 << k)) for k in levels]
    variances[1] = 2.5  # one number for a level
    variances[2][0, 1] = 0.0
    variances[3][1, :3] = np.inf
    variances[5][:, 7] = 0.0
    draws = [rng.normal(size=(5, 2, 1 << k)) * 4 for k in levels]
    release = [rng.normal(size=(2, 1 << k)) * 4 for k in levels[:-1]] + [draws[-1]]
    for measured in (draws, release):
        got = consistent_leaves(measured, variances, levels)
        want = _per_cell_before(measured, variances)
        assert got.shape == want.shape
        assert _bits(got) == _bits(want)
