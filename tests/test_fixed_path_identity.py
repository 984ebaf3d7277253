"""The fixed costs' fast paths (issue 28) give the values of the plain formulas they replace,
bit for bit (signed zeros included): the residuals from strided slices against the einsum over
gathered windows, the departing counts written in place against dividing everywhere and
selecting, the residual weights solved once per run of equal neighbourhoods against every
system solved, and the consistent leaves' in-place passes against the textbook expressions.
Each input mixes what the fast paths must not get wrong: zero and negative counts, a point
mass, warped (piecewise-uniform) and irregular edges, the smallest trees."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.core.hierarchy import _pair_sum, consistent_leaves
from fedeval.estimate import residual_weights as rw
from fedeval.estimate import smoothness as sm


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b) and np.array_equal(np.signbit(a), np.signbit(b)))


def _edges(kind: str, n_leaves: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rw.uniform_edges(n_leaves)
    if kind == "warped":  # uniform between knots, as a release axis with thresholds is
        knots = np.r_[0.0, np.sort(rng.random(4)), 1.0]
        return np.interp(np.arange(n_leaves + 1) / n_leaves, np.linspace(0, 1, 6), knots)
    return np.sort(np.r_[0.0, 1.0, rng.random(n_leaves - 1)])


def _counts(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    x = rng.poisson(3.0, shape).astype(float) + rng.normal(0, 2, shape).round()
    x[..., : shape[-1] // 4] = 0.0  # empty leaves: every term ±0
    x[..., shape[-1] // 2] += 400.0  # a point mass
    return x


def _solve_each(edges: np.ndarray) -> np.ndarray:
    """`_weights_of`' interior weights with every parent's system solved (the plain way)."""
    n_parents = (edges.size - 1) // 2
    j = np.arange(n_parents)
    e = edges[np.clip(2 * j[:, None] + np.arange(-2, 5)[None, :], 0, edges.size - 1)]
    centre, half = (e[:, 2] + e[:, 4]) / 2, (e[:, 4] - e[:, 2]) / 2
    t = ((e - centre[:, None]) / half[:, None])[1:-1]
    rows = np.stack([rw._moments(t[:, 2 * r], t[:, 2 * r + 2], 3) for r in range(3)], axis=1)
    target = rw._moments(t[:, 3], t[:, 4], 3)
    return np.asarray(np.linalg.solve(np.swapaxes(rows, 1, 2), target[..., None])[..., 0])


@pytest.mark.parametrize("n_leaves", [4, 8, 64, 1024])
@pytest.mark.parametrize("kind", ["uniform", "warped", "irregular"])
def test_residuals_and_weights_as_the_plain_formulas(n_leaves: int, kind: str) -> None:
    rng = np.random.default_rng([28, n_leaves, len(kind)])
    edges = _edges(kind, n_leaves, rng)
    w, index, _ = rw._weights_of(edges)
    if n_leaves > 4:  # interior parents exist: their weights from every system solved
        v = _solve_each(edges)
        assert _same(w[1:-1, 0], 0.0 - v[:, 0]) and _same(w[1:-1, 5], 0.0 - v[:, 2])
    # the sampling terms as np.unique pairs them
    rows = np.repeat(np.arange(w.shape[0]), w.shape[1])
    size = int(index.max()) + 1
    uniq, inverse = np.unique(rows * size + index.ravel(), return_inverse=True)
    parent, leaf, squared = rw._sampling_terms(w, index)
    assert np.array_equal(parent, uniq // size) and np.array_equal(leaf, uniq % size)
    assert _same(squared, np.bincount(inverse, weights=w.ravel()) ** 2)
    # 30 draws of both classes: several of `_residuals`' blocks at 1,024 leaves
    x = _counts((30, 2, n_leaves), rng)
    assert _same(rw._residuals(x, w, index), np.einsum("...jk,jk->...j", x[..., index], w))


@pytest.mark.parametrize("n_leaves", [8, 256])
def test_departing_counts_as_dividing_everywhere(n_leaves: int) -> None:
    rng = np.random.default_rng([28, n_leaves])
    r = rng.normal(0, 5, (20, 2, n_leaves // 2))
    r[..., :3] = 0.0
    keep, blind = rng.random((2, 2, n_leaves // 2)) < 0.5
    w_low, w_up = -rng.random(n_leaves // 2), rng.random(n_leaves // 2)
    w_low[0], w_up[-1] = 0.0, 0.0  # a parent without a usable weight
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(r > 0, r / np.where(w_up > 0, w_up, 1.0), 0.0)
        low = np.where(r < 0, r / np.where(w_low < 0, w_low, -1.0), 0.0)
    rough = keep | blind  # `departures` keeps rough parents that are not blind
    up = np.where(blind, np.inf, np.where(rough, up, 0.0))
    low = np.where(blind, np.inf, np.where(rough, low, 0.0))
    want = np.stack([low, up], axis=-1).reshape(20, 2, n_leaves)
    assert _same(sm._departing(r, rough & ~blind, blind, w_low, w_up), want)


@pytest.mark.parametrize("levels", [[1, 2], [1, 2, 3, 4, 5, 6]])
def test_consistent_leaves_as_the_textbook_passes(levels: list[int]) -> None:
    rng = np.random.default_rng([28, len(levels)])
    measured = [rng.laplace(0, 4, (40, 2, 1 << k)).round() for k in levels]
    variances = [float(v) for v in rng.uniform(1, 50, len(levels))]
    z, vz = [m.copy() for m in measured], list(variances)
    for i in range(len(levels) - 2, -1, -1):
        w_own = 2 * vz[i + 1] / (vz[i] + 2 * vz[i + 1])
        z[i] = w_own * z[i] + (1.0 - w_own) * _pair_sum(z[i + 1])
        vz[i] = vz[i] * 2 * vz[i + 1] / (vz[i] + 2 * vz[i + 1])
    want = z[0]
    for i in range(1, len(levels)):
        want = z[i] + np.repeat((want - _pair_sum(z[i])) / 2.0, 2, axis=-1)
    before = [m.copy() for m in measured]
    assert _same(consistent_leaves(measured, variances, levels), want)
    assert all(np.array_equal(m, b) for m, b in zip(measured, before, strict=True))  # unchanged


def test_shared_noisy_counts_as_each_reader_takes_them() -> None:
    """The re-noised releases' counts at the thresholds, taken once per evaluation, give the
    P/R/A intervals' parts and the sparse precision each reads on its own (a swapped or stale
    pair would move the σ of precision and recall, or the sparse verdicts)."""
    import fedeval
    from fedeval.api.evaluate import noisy_threshold_counts, sparse_precision, threshold_parts

    rng = np.random.default_rng(28)
    y = rng.random(3000) < 0.1
    scores = np.clip(rng.normal(0.3 + 0.3 * y, 0.15), 0, 1)
    run = fedeval.evaluate(y.astype(int), scores, model="distdp", seed=3).run
    thr = np.linspace(0.05, 0.95, 7)
    noisy = noisy_threshold_counts(run, thr)
    assert noisy is not None
    for (sd, bounds, pivot), (sd0, bounds0, pivot0) in zip(
        threshold_parts(run, thr, noisy), threshold_parts(run, thr), strict=True
    ):
        assert _same(sd, sd0) and _same(bounds, bounds0)
        assert all(_same(vars(pivot)[k], vars(pivot0)[k]) for k in vars(pivot))
    shared, alone = sparse_precision(run, thr, noisy), sparse_precision(run, thr)
    assert np.array_equal(shared[0], alone[0]) and shared[1] == alone[1]
    assert _same(shared[2], alone[2])
