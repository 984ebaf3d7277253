"""The descent (`fedeval.estimate.descent`): each region of a distdp release read at the finest
level whose counts are informative there. Its pieces against dense computations: the nodes'
noise sds against (AᵀWA)⁻¹ of the tree's design, the cells against a recursive descent, the
spread leaves' AP against the AP of the cells; and where it must change nothing."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.api.evaluate import evaluate_data
from fedeval.estimate.descent import (
    DESCENT_SDS,
    descent_read,
    descent_starts,
    node_sds,
    spread,
)
from fedeval.estimate.roc_pr import leaf_ap_rows, leaf_tails
from fedeval.tables.scored import ScoredData, scored_from_arrays


def _dense_sds(variances: list[float], levels: list[int]) -> np.ndarray:
    """sd of one pooled count of each level 0..h by the dense least-squares variance
    a'(AᵀWA)⁻¹a, A the design of the released levels over the 2^h leaves, W = diag(1/v), two
    classes with the same variances."""
    h = levels[-1]
    n = 1 << h
    rows, weights = [], []
    for k, v in zip(levels, variances, strict=True):
        width = n >> k
        for i in range(1 << k):
            row = np.zeros(n)
            row[i * width : (i + 1) * width] = 1.0
            rows.append(row)
            weights.append(1.0 / v)
    a_mat = np.asarray(rows)
    cov = np.linalg.inv(a_mat.T @ np.diag(weights) @ a_mat)
    out = []
    for k in range(h + 1):
        a = np.zeros(n)
        a[: n >> k] = 1.0
        out.append(2.0 * a @ cov @ a)  # two classes
    return np.sqrt(np.asarray(out))


@pytest.mark.parametrize(
    ("variances", "levels"),
    [
        ([4.0, 4.0, 4.0, 4.0], [1, 2, 3, 4]),  # the even tree
        ([1.0, 1.0, 9.0, 9.0, 9.0], [1, 2, 3, 4, 5]),  # a split: coarse levels finer noise
        ([2.0, 3.0, 5.0], [2, 3, 4]),  # levels from 2: level 1 and the root are sums
    ],
)
def test_node_sds_equal_the_dense_least_squares_variance(variances, levels):
    got = node_sds(tuple(variances), levels)
    assert got is not None
    np.testing.assert_allclose(got, _dense_sds(variances, levels), rtol=1e-10)


def test_node_sds_none_without_noise_to_descend_by():
    assert node_sds((1.0, 0.0), (1, 2)) is None  # exact leaves
    assert node_sds((1.0, np.ones((2, 4))), (1, 2)) is None  # per-cell variances


def _recursive_starts(pooled: np.ndarray, sd: np.ndarray, z: float) -> list[int]:
    h = int(np.log2(len(pooled)))
    out: list[int] = []

    def go(k: int, i: int) -> None:
        width = len(pooled) >> k
        if k == h or pooled[i * width : (i + 1) * width].sum() < z * sd[k + 1]:
            out.append(i * width)
            return
        go(k + 1, 2 * i)
        go(k + 1, 2 * i + 1)

    go(0, 0)
    return out


def test_descent_starts_equal_a_recursive_descent():
    rng = np.random.default_rng(3)
    sd = np.array([0.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    for _ in range(50):
        pooled = rng.choice([0.0, 3.0, 40.0], size=64) * rng.random(64)
        want = _recursive_starts(pooled, sd, DESCENT_SDS)
        assert descent_starts(pooled, sd).tolist() == want


def test_an_empty_half_is_read_as_one_cell():
    pooled = np.r_[np.zeros(8), np.full(8, 100.0)]
    starts = descent_starts(pooled, np.full(5, 1.0))
    assert starts.tolist() == [0, *range(8, 16)]


def test_spread_leaves_read_as_their_cells():
    """The integral rule reads a cell's count spread evenly over its leaves as the one cell
    (module docstring): the AP of the spread leaves equals the AP of the cells; the counts of
    every cell are kept."""
    rng = np.random.default_rng(4)
    leaves = rng.integers(0, 50, size=(2, 32)).astype(np.float64)
    starts = np.array([0, 8, 12, 13, 14, 16, 24])
    flat = spread(leaves, starts)
    cells = np.add.reduceat(leaves, starts, axis=-1)
    np.testing.assert_allclose(np.add.reduceat(flat, starts, axis=-1), cells)
    ap_flat = leaf_ap_rows(*leaf_tails(flat[None]), "integral")[0]
    ap_cells = leaf_ap_rows(*leaf_tails(cells[None]), "integral")[0]
    assert ap_flat == pytest.approx(ap_cells, abs=1e-12)
    assert spread(leaves, np.arange(32)) is leaves


def test_descent_read_none_where_every_node_is_informative():
    leaves = np.full((2, 64), 1e6)
    assert descent_read(leaves, (1.0,) * 6, tuple(range(1, 7))) is None


def _squeezed(n: int = 40_000) -> ScoredData:
    rng = np.random.default_rng(5)
    y = rng.random(n) < 0.3
    s = np.clip(0.45 + 0.1 * rng.beta(2 + 2 * y, 3), 0, 1)
    return scored_from_arrays(y.astype(int), s)


def test_squeezed_scores_are_read_in_fewer_cells_than_leaves():
    """Squeezed scores under distdp: most leaves are empty, so the descent reads far fewer
    cells, and the spread leaves' AP differs from the leaves' (what `benchmarks/level_read.py`
    measures; the library's curves read the leaves, `fedeval.estimate.descent`)."""
    data = _squeezed()
    ev = evaluate_data(data, model="distdp", epsilon=1.0, height=8, seed=1, ci_draws=0)
    hist = ev.run.histogram
    starts = descent_read(hist.leaves, hist.level_variances, hist.config.levels)
    assert starts is not None and len(starts) < hist.leaves.shape[-1] // 2
    want = leaf_ap_rows(*leaf_tails(spread(hist.leaves, starts)[None]), "integral")[0]
    leaves_ap = leaf_ap_rows(*leaf_tails(hist.leaves[None]), "integral")[0]
    assert ev.curves.average_precision.estimate == pytest.approx(leaves_ap, abs=1e-12)
    assert abs(want - leaves_ap) > 1e-6  # the read differs from the leaves'
