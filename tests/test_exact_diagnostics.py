"""`exact_diagnostics`: one blocked pass over the distinct scores gives the same AUC, AP and
areas between curves as the full exact curves, and keeps a thinned curve made of their points."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from fedeval.estimate import curve_areas
from fedeval.estimate import diagnostics as C
from fedeval.estimate.exact import SortedScores, exact_auc
from fedeval.estimate.roc_pr import leaf_curves


def _data(seed: int, n: int, decimals: int | None):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    y[:2] = [True, False]
    s = (1 / (1 + np.exp(-(rng.normal(size=n) + 1.2 * y)))).astype(np.float32)
    if decimals is not None:
        s = np.round(s, decimals).astype(np.float32)
    leaves = np.stack(
        [np.histogram(s[~y], 64, (0, 1))[0], np.histogram(s[y], 64, (0, 1))[0]]
    ).astype(float)
    leaves += rng.normal(0, 3, leaves.shape)  # a noisy estimate
    return s, y, leaves


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("decimals", [1, 2, 3, None])
@pytest.mark.parametrize("block", [2, 7, 100, 1 << 16])
def test_blocked_pass_equals_the_full_curves(seed, decimals, block):
    s, y, leaves = _data(seed, 3000, decimals)
    ss = SortedScores.from_arrays(s, y)
    full = curve_areas.exact_curves(ss)
    for est in leaf_curves(leaves, 16):
        thin, roc, pr = C.exact_diagnostics(ss, est, block=block)
        assert roc == pytest.approx(curve_areas.roc_area_error(est, full), rel=1e-12, abs=1e-15)
        assert pr == pytest.approx(curve_areas.pr_area_error(est, full), rel=1e-12, abs=1e-15)
        assert thin.roc_auc == pytest.approx(full.roc_auc, abs=1e-12)
        assert thin.average_precision == pytest.approx(full.average_precision, abs=1e-12)
    assert thin.roc_auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert thin.roc_auc == exact_auc(ss)
    assert thin.average_precision == pytest.approx(average_precision_score(y, s), abs=1e-12)


@pytest.mark.parametrize("block", [1, 5, 1 << 16])
@pytest.mark.parametrize("cells", [3, 50, 1000])
def test_thinned_curve_is_made_of_the_exact_points(block, cells):
    """Every kept point is one of the full curve's, in order; both ends are kept; at most
    4·cells + 2 points; and when there are fewer points than that, all of them."""
    s, y, _ = _data(5, 20_000, None)
    ss = SortedScores.from_arrays(s, y)
    full = curve_areas.exact_curves(ss)
    thin, roc, pr = C.exact_diagnostics(ss, block=block, cells=cells)
    assert roc is None and pr is None
    assert len(thin.thresholds) <= 4 * cells + 2
    where = np.searchsorted(-full.thresholds, -thin.thresholds)  # thresholds descend
    assert np.all(np.diff(where) > 0)
    assert where[0] == 0 and where[-1] == len(full.thresholds) - 1
    for name in ("thresholds", "tpr", "fpr", "precision"):
        np.testing.assert_array_equal(getattr(thin, name), getattr(full, name)[where])
    few = SortedScores.from_arrays(s[:300], y[:300])
    thin_few = C.exact_diagnostics(few, block=block, cells=1000)[0]
    np.testing.assert_array_equal(thin_few.tpr, curve_areas.exact_curves(few).tpr)


def test_thinning_keeps_both_corners_of_a_big_step():
    """A tie of most negatives at one score among distinct others: the ROC jumps there, and
    both ends of the jump are kept whatever the rank spacing."""
    rng = np.random.default_rng(1)
    neg = np.sort(np.r_[rng.random(50_000), np.full(50_000, 0.5)])
    pos = np.sort(rng.random(50_000) * 0.5 + 0.5)
    ss = SortedScores(neg, pos)
    full = curve_areas.exact_curves(ss)
    thin = C.exact_diagnostics(ss, cells=20)[0]
    k = int(np.flatnonzero(full.thresholds == 0.5)[0])
    for i in (k - 1, k):
        assert np.any((thin.fpr == full.fpr[i]) & (thin.tpr == full.tpr[i]))


@pytest.mark.parametrize(
    "neg, pos",
    [
        ([0.5, 0.5], [0.5, 0.5]),  # all tied: the diagonal
        ([0.1, 0.2], [0.8, 0.9]),  # perfect
        ([0.1, 0.2, 0.3], [0.9, 0.9]),  # every positive at the top: recall jumps to 1 at once
        ([0.7], [0.1, 0.2, 0.3, 0.9]),
    ],
)
@pytest.mark.parametrize("block", [1, 2, 1 << 16])
def test_small_and_degenerate_curves(neg, pos, block):
    ss = SortedScores(np.array(neg), np.array(pos))
    full = curve_areas.exact_curves(ss)
    est = leaf_curves(np.array([[1.0, 2.0, 0.0, 1.0], [0.0, 1.0, 2.0, 1.0]]), 4)[0]
    thin, roc, pr = C.exact_diagnostics(ss, est, block=block)
    assert roc == pytest.approx(curve_areas.roc_area_error(est, full), rel=1e-12, abs=1e-15)
    assert pr == pytest.approx(curve_areas.pr_area_error(est, full), rel=1e-12, abs=1e-15)
    assert thin.roc_auc == pytest.approx(full.roc_auc, abs=1e-12)
    assert thin.average_precision == pytest.approx(full.average_precision, abs=1e-12)
    np.testing.assert_array_equal(thin.fpr, full.fpr)
    np.testing.assert_array_equal(thin.precision, full.precision)


def test_one_class_only_has_no_auc():
    ss = SortedScores(np.array([0.1, 0.4]), np.zeros(0))
    thin = C.exact_diagnostics(ss)[0]
    assert np.isnan(thin.roc_auc) and np.isnan(thin.average_precision)


@pytest.mark.parametrize("decimals", [1, 3, None])
@pytest.mark.parametrize("block", [1, 3, 50, 1 << 16])
@pytest.mark.parametrize("descending", [False, True])
def test_distinct_blocks_are_the_distinct_table_in_pieces(decimals, block, descending):
    s, y, _ = _data(2, 2000, decimals)
    whole = SortedScores.from_arrays(s, y).distinct
    fresh = SortedScores.from_arrays(s, y)  # the table not made: blocks from the sorted classes
    parts = list(fresh.distinct_blocks(block, descending=descending))
    assert "distinct" not in fresh.__dict__
    if descending:
        parts = parts[::-1]
    for name in ("values", "negatives", "positives"):
        np.testing.assert_array_equal(
            np.concatenate([getattr(d, name) for d in parts]), getattr(whole, name)
        )
    # Each block holds about `block` scores of each class (more only for a run of ties).
    assert all(len(d.values) <= 2 * block for d in parts) or decimals is not None


def test_distinct_blocks_of_one_class():
    ss = SortedScores(np.array([0.1, 0.1, 0.4]), np.zeros(0))
    (d,) = ss.distinct_blocks(8)
    np.testing.assert_array_equal(d.values, [0.1, 0.4])
    np.testing.assert_array_equal(d.negatives, [2, 1])
    assert d.positives.sum() == 0


@pytest.mark.parametrize("decimals", [1, 2, None])
def test_exact_auc_by_ranges_equals_the_distinct_table_form(decimals):
    """The AUC from binary searches in ranges of scores equals the sum over the distinct table
    (used when the classes' dtypes differ), and scikit-learn's."""
    s, y, _ = _data(4, 5000, decimals)
    same = SortedScores.from_arrays(s, y)
    mixed = SortedScores(np.sort(s[~y]), np.sort(s[y]).astype(np.float64))
    assert exact_auc(same) == exact_auc(mixed)
    assert exact_auc(same) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("m", [1, 2, 63, 64, 65, 1000, 4097])
def test_arc_cells_found_as_a_search_of_the_whole_arc_finds_them(m):
    """The thinning's arc cells are found from the arc at every ARC_STRIDE-th point and one
    window per edge: the same indices as a binary search of the whole arc, on curves with
    flat runs (one class only over a stretch), jumps and edges hit exactly."""
    from fedeval.estimate.diagnostics import _arc_starts

    rng = np.random.default_rng([28, m])
    p, n = 37, 53
    steps = rng.integers(0, 3, (2, m)) * (rng.random((2, m)) < 0.7)
    tp, fp = np.cumsum(steps[0]).astype(float), np.cumsum(steps[1]).astype(float)
    tp[-1], fp[-1] = max(tp[-1], 1.0), max(fp[-1], 1.0)
    tpr, fpr = tp / max(tp[-1], p), fp / max(fp[-1], n)
    scale = 500.0
    arc = (tpr + fpr) * scale
    for edges in (
        np.arange(0, int(np.floor(arc[-1])) + 1),
        np.unique(np.floor(arc)).astype(np.int64),  # values the arc takes exactly
        np.zeros(0, np.int64),
    ):
        expected = np.searchsorted(arc, edges, side="left")
        assert np.array_equal(_arc_starts(tpr, fpr, scale, edges), expected)


@pytest.mark.parametrize("kind", ["distinct", "pairs", "ties", "one-value", "one-class", "wide"])
def test_key_block_rows_are_the_counts_at_each_distinct_score(kind):
    """A block of packed keys read as rows (distinct scores from the top, TP/FP at each, the
    counts at each, the rank): the same floats as counting each score's examples directly
    (np.unique), for blocks cut anywhere a score's run ends and any counts above."""
    from fedeval.estimate.exact_rows import _key_block

    rng = np.random.default_rng(len(kind))
    n = 5000
    y = rng.random(n) < 0.4
    s = rng.random(n).astype(np.float32)
    if kind == "pairs":  # every score once in each class, or once
        s = np.repeat(rng.random(n // 2).astype(np.float32), 2)[:n]
    elif kind == "ties":
        s = np.round(s, 2)
    elif kind == "one-value":
        s[:] = 0.5
    elif kind == "one-class":
        s, y[:] = np.round(s, 1), True
    elif kind == "wide":
        s = np.round(s.astype(np.float64), 3)
    ss = SortedScores.from_arrays(s, y)
    for block in (1, 7, 300, n):
        tp0 = fp0 = 0
        for lo, hi in ss.key_ranges(block, descending=True):
            picked, tp, fp, dp, dn, count = _key_block(ss, lo, hi, float(tp0), float(fp0))
            keys = ss.keys[lo:hi]
            score = (keys >> 1).view(ss.dtype)
            values, at = np.unique(score, return_inverse=True)
            pos = np.bincount(at, keys & 1, len(values))[::-1]
            neg = np.bincount(at, 1 - (keys & 1), len(values))[::-1]
            np.testing.assert_array_equal(picked.all(), values[::-1])
            np.testing.assert_array_equal(dp, pos)
            np.testing.assert_array_equal(dn, neg)
            np.testing.assert_array_equal(tp, tp0 + np.cumsum(pos))
            np.testing.assert_array_equal(fp, fp0 + np.cumsum(neg))
            np.testing.assert_array_equal(count, tp0 + fp0 + np.cumsum(pos + neg))
            for a in (tp, fp, dp, dn, count):
                assert a.dtype == np.float64
            tp0, fp0 = tp0 + int(pos.sum()), fp0 + int(neg.sum())


def test_scratch_buffers_are_one_per_thread_and_name():
    """A block's temporaries are reused from one block to the next on its thread, never
    shared between the pool's threads (two blocks in flight would write each other's
    counts), and grown when a block is larger than any before."""
    import threading

    from fedeval.estimate.exact_rows import Scratch

    scratch = Scratch()
    a = scratch.get("tp", 1000, np.float64)
    assert np.shares_memory(a, scratch.get("tp", 900, np.float64))  # reused
    assert not np.shares_memory(a, scratch.get("fp", 1000, np.float64))  # another name
    wider = scratch.get("tp", 5000, np.float64)
    assert len(wider) == 5000 and wider.dtype == np.float64
    other: list[np.ndarray] = []
    t = threading.Thread(target=lambda: other.append(scratch.get("tp", 1000, np.float64)))
    t.start()
    t.join()
    assert not np.shares_memory(other[0], wider)
    assert not np.shares_memory(other[0], scratch.get("tp", 1000, np.float64))
