import numpy as np
import pytest

from fedeval.core.hierarchy import (
    bucket_counts,
    cell_index,
    coarsen,
    consistent_leaves,
    cumulative,
    equidepth_edges,
    levels_from_leaves,
    mass_at_or_above,
    quantiles,
)


def design_matrix(levels: list[int]) -> np.ndarray:
    """Rows: every node of `levels` (the last is the leaves'); columns: leaves; entry 1 if the
    leaf is under the node."""
    h = levels[-1]
    rows = []
    for k in levels:
        width = 1 << (h - k)
        for j in range(1 << k):
            r = np.zeros(1 << h)
            r[j * width : (j + 1) * width] = 1
            rows.append(r)
    return np.array(rows)


@pytest.mark.parametrize("variances", [[1.0, 1.0, 1.0, 1.0], [5.0, 0.3, 2.0, 1.0]])
def test_consistency_is_generalised_least_squares(variances):
    # The two-pass algorithm must equal the explicit GLS estimate (AᵀWA)⁻¹AᵀWy on the leaves.
    h = 4
    rng = np.random.default_rng(0)
    a = design_matrix(list(range(1, h + 1)))
    y = rng.normal(size=a.shape[0]) * 10
    w = np.concatenate([np.full(1 << k, 1 / variances[k - 1]) for k in range(1, h + 1)])
    gls = np.linalg.solve(a.T @ (w[:, None] * a), a.T @ (w * y))
    parts = np.split(y, np.cumsum([1 << k for k in range(1, h)]))
    got = consistent_leaves(parts, variances, range(1, h + 1))
    np.testing.assert_allclose(got, gls, rtol=1e-10, atol=1e-10)


def test_consistency_with_a_variance_per_cell_is_generalised_least_squares():
    # Cells of one level with variances of their own (a local-DP count's variance grows with
    # the count): the two passes must still give the explicit GLS estimate, and batched
    # measurements (the rows of an identity: the consistency operator) must share the weights.
    h = 4
    rng = np.random.default_rng(3)
    a = design_matrix(list(range(1, h + 1)))
    variances = [rng.uniform(0.1, 20.0, size=1 << k) for k in range(1, h + 1)]
    y = rng.normal(size=a.shape[0]) * 10
    w = 1 / np.concatenate(variances)
    gls = np.linalg.solve(a.T @ (w[:, None] * a), a.T @ (w * y))
    parts = np.split(y, np.cumsum([1 << k for k in range(1, h)]))
    got = consistent_leaves(parts, variances, range(1, h + 1))
    np.testing.assert_allclose(got, gls, rtol=1e-10, atol=1e-10)
    eye = np.split(np.eye(a.shape[0]), np.cumsum([1 << k for k in range(1, h)]), axis=1)
    operator = consistent_leaves(eye, variances, range(1, h + 1))
    np.testing.assert_allclose(y @ operator, gls, rtol=1e-10, atol=1e-10)
    # One number per level, given as arrays, is the scalar path's result.
    same = [np.full(1 << k, v) for k, v in zip(range(1, h + 1), [5.0, 0.3, 2.0, 1.0], strict=True)]
    np.testing.assert_allclose(
        consistent_leaves(parts, same, range(1, h + 1)),
        consistent_leaves(parts, [5.0, 0.3, 2.0, 1.0], range(1, h + 1)),
        rtol=1e-12,
    )


def test_consistency_per_cell_keeps_exact_cells_and_skips_unmeasured_levels():
    leaves = np.arange(16.0)
    exact = levels_from_leaves(leaves, range(1, 5))
    zeros = [np.zeros(1 << k) for k in range(1, 5)]
    np.testing.assert_array_equal(consistent_leaves(exact, zeros, range(1, 5)), leaves)
    # Level 2 unmeasured (infinite variance, garbage counts): the others decide, as with scalars.
    rng = np.random.default_rng(4)
    noisy = [e + rng.normal(size=e.shape) for e in exact]
    noisy[1] = np.full(4, 1e9)
    per_cell = [
        np.full(1 << k, v) for k, v in zip(range(1, 5), [1.0, np.inf, 2.0, 1.0], strict=True)
    ]
    np.testing.assert_allclose(
        consistent_leaves(noisy, per_cell, range(1, 5)),
        consistent_leaves(noisy, [1.0, np.inf, 2.0, 1.0], range(1, 5)),
        rtol=1e-12,
    )


def test_consistency_batches_over_leading_axes():
    rng = np.random.default_rng(1)
    parts = [rng.normal(size=(3, 1 << k)) for k in range(1, 4)]
    batched = consistent_leaves(parts, [1, 2, 3], [1, 2, 3])
    for i in range(3):
        one = consistent_leaves([p[i] for p in parts], [1, 2, 3], [1, 2, 3])
        np.testing.assert_allclose(batched[i], one)


def test_consistency_keeps_exact_counts_and_single_level():
    leaves = np.arange(16.0)
    exact = levels_from_leaves(leaves, range(1, 5))
    np.testing.assert_array_equal(consistent_leaves(exact, [0, 0, 0, 0], range(1, 5)), leaves)
    np.testing.assert_array_equal(consistent_leaves([leaves], [3.0], [4]), leaves)


def test_cell_index_coarsens_by_shift():
    s = np.random.default_rng(2).random(10_000)
    s[:3] = [0.0, 1.0, 0.5]
    fine = cell_index(s, 20)
    for h in (1, 5, 12):
        np.testing.assert_array_equal(fine >> (20 - h), cell_index(s, h))
    assert cell_index(np.array([1.0]), 3)[0] == 7  # score 1 lands in the last cell


def test_coarsen_sums_children():
    leaves = np.arange(8)
    np.testing.assert_array_equal(coarsen(leaves, 2), [1, 5, 9, 13])


def test_cumulative_interpolates_uniformly_inside_a_leaf():
    leaves = np.array([4.0, 0.0, 8.0, 4.0])
    assert cumulative(leaves, 0.0) == 0
    assert cumulative(leaves, 0.125) == 2  # half of the first leaf
    assert cumulative(leaves, 0.5) == 4
    assert cumulative(leaves, 0.625) == 8
    assert cumulative(leaves, 1.0) == 16
    np.testing.assert_allclose(mass_at_or_above(leaves, np.array([0.0, 0.625, 1.0])), [16, 8, 0])


def test_quantiles_interpolate_inside_the_leaf():
    # Uniform mass: the q-quantile is q itself, not the left edge of its leaf.
    leaves = np.full(8, 10.0)
    np.testing.assert_allclose(quantiles(leaves, np.array([0.1, 0.5, 0.93])), [0.1, 0.5, 0.93])
    # Noisy negative leaves are clamped for the search, so quantiles stay monotone.
    noisy = np.array([5.0, -3.0, 2.0, 7.0])
    q = quantiles(noisy, np.linspace(0, 1, 21))
    assert np.all(np.diff(q) >= 0)


def test_equidepth_buckets_hold_equal_mass():
    rng = np.random.default_rng(3)
    scores = rng.beta(2, 5, 100_000)
    leaves = np.bincount(cell_index(scores, 12), minlength=1 << 12).astype(float)
    edges = equidepth_edges(leaves, 10)
    counts = bucket_counts(leaves, edges)
    assert edges[0] == 0 and edges[-1] == 1
    np.testing.assert_allclose(counts, 10_000, rtol=1e-9)
    # ... and the edges are the true deciles up to a leaf width.
    np.testing.assert_allclose(edges[1:-1], np.quantile(scores, np.arange(1, 10) / 10), atol=2**-12)


def test_unmeasured_level_is_ignored():
    # A level nobody reported on (infinite variance) must not poison the others with NaN.
    rng = np.random.default_rng(4)
    parts = [rng.normal(size=1 << k) for k in range(1, 4)]
    got = consistent_leaves(parts, [np.inf, 1.0, 1.0], [1, 2, 3])
    np.testing.assert_allclose(got, consistent_leaves(parts[1:], [1.0, 1.0], [2, 3]))


@pytest.mark.parametrize("empty", [0, 1, 2])
def test_a_level_measured_by_nobody_leaves_no_nan(empty):
    # Tiny localdp runs can leave a level without reporters (infinite variance). The leaves stay
    # finite, and consistent: each level's sum of leaves is what the measured levels say.
    rng = np.random.default_rng(empty)
    levels = [1, 2, 3]
    measured = [rng.normal(10, 1, 1 << k) for k in levels]
    variances = [1.0, 1.0, 1.0]
    variances[empty] = float("inf")
    measured[empty] = np.zeros(1 << levels[empty])
    leaves = consistent_leaves(measured, variances, levels)
    assert np.all(np.isfinite(leaves))
    if empty == 2:  # the leaves split their parents equally
        np.testing.assert_allclose(leaves[0::2], leaves[1::2])


def test_monotone_cumulative_of_a_stack_is_each_row_fitted_alone():
    # Noisy leaves, stacked as noise draws are: the same fit bit for bit as one row at a time,
    # and the same as scipy's isotonic regression of the prefix sums clamped to [0, total].
    from scipy.optimize import isotonic_regression

    from fedeval.core.hierarchy import monotone_cumulative

    rng = np.random.default_rng(5)
    stack = rng.normal(0.0, 30.0, (7, 2, 257)) + rng.poisson(20.0, 257)
    stack[0, 1] -= 60.0  # a class whose raw total is negative: clamped to [0, 0]
    fitted = monotone_cumulative(stack)
    assert fitted.shape == (7, 2, 258)
    for i in range(7):
        for c in range(2):
            row = monotone_cumulative(stack[i, c])
            np.testing.assert_array_equal(fitted[i, c], row)
            cs = np.concatenate([[0.0], np.cumsum(stack[i, c])])
            oracle = np.clip(isotonic_regression(cs).x, 0.0, max(float(cs[-1]), 0.0))
            np.testing.assert_array_equal(row, oracle)
    assert np.all(fitted[0, 1] == 0.0)
    assert np.all(np.diff(fitted, axis=-1) >= 0.0)


def test_pair_sums_are_the_pairs_reduced():
    # The consistency passes sum neighbouring cells of stacks of float draws: the same values
    # bit for bit as summing each reshaped pair.
    from fedeval.core.hierarchy import _pair_sum

    rng = np.random.default_rng(2)
    a = rng.normal(0.0, 1e3, (20, 2, 1 << 7)) * rng.random((20, 2, 1 << 7))
    np.testing.assert_array_equal(_pair_sum(a), a.reshape(20, 2, -1, 2).sum(axis=-1))


def test_monotone_cumulative_of_long_rows_is_scipys_fit():
    # Rows long enough to be tested for being their own fit first: exact counts with runs of
    # empty leaves (kept), a strictly increasing float row (kept), float ties and a violation
    # (fitted): all equal scipy's isotonic regression bit for bit.
    from scipy.optimize import isotonic_regression

    from fedeval.core.hierarchy import OWN_FIT_CHECK_FROM, monotone_cumulative

    rng = np.random.default_rng(9)
    n = OWN_FIT_CHECK_FROM + 3
    counts = rng.poisson(0.3, n).astype(float)
    floats = rng.random(n) + 0.1
    ties = np.where(rng.random(n) < 0.5, 0.0, rng.random(n) * 0.3)
    violated = counts.copy()
    violated[n // 2] = -4.0
    for leaves in (counts, floats, ties, violated):
        cs = np.concatenate([[0.0], np.cumsum(leaves)])
        oracle = np.clip(isotonic_regression(cs).x, 0.0, max(float(cs[-1]), 0.0))
        np.testing.assert_array_equal(monotone_cumulative(leaves), oracle)


def test_long_rows_are_fitted_afresh_each_time():
    # A release's estimators ask for the same class's fit many times; each call fits the values
    # it is given (no state kept between calls): a caller writing into a result, or an array
    # changed in place, changes nothing else.
    from scipy.optimize import isotonic_regression

    from fedeval.core.hierarchy import monotone_cumulative

    def oracle(x):
        cs = np.concatenate([[0.0], np.cumsum(x)])
        return np.clip(isotonic_regression(cs).x, 0.0, max(float(cs[-1]), 0.0))

    rng = np.random.default_rng(12)
    leaves = rng.normal(3.0, 5.0, (2, 4096))
    first = monotone_cumulative(leaves[1])
    np.testing.assert_array_equal(first, oracle(leaves[1]))
    first[:] = -1.0
    np.testing.assert_array_equal(monotone_cumulative(leaves[1].copy()), oracle(leaves[1]))
    np.testing.assert_array_equal(monotone_cumulative(leaves[0]), oracle(leaves[0]))
    leaves[1, 7] += 100.0  # in place: the same object, other values
    np.testing.assert_array_equal(monotone_cumulative(leaves[1]), oracle(leaves[1]))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int8, bool])
def test_coarsening_one_level_is_the_pairs_summed(dtype):
    # One level up is done by slicing for float64 and int64: the same values and type as the
    # reshaped sum; other types (whose pairwise add would keep a narrow type) take that sum.
    rng = np.random.default_rng(6)
    leaves = (rng.normal(0.0, 50.0, (30, 2, 64)) * rng.random((30, 2, 64))).astype(dtype)
    want = leaves.reshape(30, 2, 32, 2).sum(axis=-1)
    got = coarsen(leaves, 5)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_a_changed_private_fit_kernel_is_not_used(monkeypatch):
    """The private isotonic kernel is used only while it fits as scipy's public function does:
    one that fails, or fits otherwise, is caught by the check made when it is looked up (the
    first fit)."""
    import fedeval.core.hierarchy as hierarchy

    assert hierarchy._kernel() is None or hierarchy._kernel_agrees()

    def wrong(y, w, r):  # a kernel that does nothing
        return None

    def broken(y, w):  # a kernel whose signature changed
        raise TypeError("pava() takes 2 arguments")

    for kernel in (wrong, broken):
        monkeypatch.setattr(hierarchy, "_pava", kernel)
        assert not hierarchy._kernel_agrees()
