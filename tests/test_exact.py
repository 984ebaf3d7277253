"""The exact oracle agrees with scikit-learn, ties included."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, precision_score, recall_score, roc_auc_score

from fedeval.estimate.exact import SortedScores, exact_auc, exact_threshold_counts
from fedeval.estimate.metrics import precision_recall_accuracy


@pytest.mark.parametrize("seed", range(8))
def test_exact_auc_matches_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    y = rng.integers(0, 2, n).astype(bool)
    y[:2] = [True, False]
    # Rounding makes many ties, which count ½ in both.
    s = np.round(np.clip(0.2 * y + rng.random(n), 0, 1), int(rng.integers(1, 4)))
    assert exact_auc(SortedScores.from_arrays(s, y)) == pytest.approx(
        roc_auc_score(y, s), abs=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
def test_exact_threshold_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    y = rng.integers(0, 2, n).astype(bool)
    s = np.round(np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1), 2)
    thresholds = np.array([0.0, 0.1, 0.33, 0.5, 0.71, 0.9])
    tp, fp = exact_threshold_counts(SortedScores.from_arrays(s, y), thresholds)
    p, r, a = precision_recall_accuracy(tp, fp, float(y.sum()), float((~y).sum()))
    for i, t in enumerate(thresholds):
        pred = s >= t  # scikit-learn's convention for a score threshold
        assert p[i] == pytest.approx(precision_score(y, pred), abs=1e-12)
        assert r[i] == pytest.approx(recall_score(y, pred), abs=1e-12)
        assert a[i] == pytest.approx(accuracy_score(y, pred), abs=1e-12)


# ---------------------------------------------------------------------------------------------
# The one-pass exact values agree with the direct computations they replace.


def _scores(seed: int, n: int, decimals: int | None):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = np.clip(0.25 * y + 0.75 * rng.random(n), 0, 1).astype(np.float32)
    if decimals is not None:
        s = np.round(s, decimals)
    return s, y


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("decimals", [1, 3, None])
def test_distinct_scores_count_each_class_at_each_value(seed, decimals):
    from fedeval.estimate.exact import DistinctScores

    s, y = _scores(seed, 3000, decimals)
    d = SortedScores.from_arrays(s, y).distinct
    values = np.unique(s)
    np.testing.assert_array_equal(d.values, values)
    np.testing.assert_array_equal(d.negatives, [np.sum((s == v) & ~y) for v in values])
    np.testing.assert_array_equal(d.positives, [np.sum((s == v) & y) for v in values])
    one = DistinctScores.of_sorted(np.sort(s), np.sort(s[:0]))  # a class with no scores
    np.testing.assert_array_equal(one.values, values)
    assert one.positives.sum() == 0 and one.negatives.sum() == len(s)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("decimals", [1, 2, None])
def test_exact_values_equal_the_direct_sums(seed, decimals):
    """AUC and the threshold counts bit for bit as the searches over every score gave them."""
    s, y = _scores(seed, 4000, decimals)
    ss = SortedScores.from_arrays(s, y)
    neg, pos = ss.negatives, ss.positives
    twice = np.searchsorted(neg, pos, "left").sum() + np.searchsorted(neg, pos, "right").sum()
    assert exact_auc(ss) == int(twice) / (2 * len(pos) * len(neg))
    t = np.array([0.0, 0.1, 0.25, 0.5, 0.7, 0.75, 1.0, 1.5, -1.0])
    tp, fp = exact_threshold_counts(ss, t)
    np.testing.assert_array_equal(tp, len(pos) - np.searchsorted(pos, t, "left"))
    np.testing.assert_array_equal(fp, len(neg) - np.searchsorted(neg, t, "left"))


def _area_between_oracle(x1, y1, x2, y2) -> float:
    """The area between two curves by binary searches over sorted, deduplicated knots: the
    straightforward form of `_area_between`."""

    def limits(x, y):
        order = np.argsort(x, kind="stable")
        x, y = np.asarray(x, float)[order], np.asarray(y, float)[order]
        ux, first = np.unique(x, return_index=True)
        return ux, y[first], y[np.r_[first[1:] - 1, len(x) - 1]]

    def at(ux, left, right, g, side):
        n = len(ux)
        if side == "right":
            k = np.clip(np.searchsorted(ux, g, side="right") - 1, 0, n - 1)
            value, seg = right[k], k
        else:
            k = np.clip(np.searchsorted(ux, g, side="left"), 0, n - 1)
            value, seg = left[k], k - 1
        i, j = np.clip(seg, 0, n - 1), np.clip(seg + 1, 0, n - 1)
        x0, xe, y0, ye = ux[i], ux[j], right[i], left[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(xe > x0, (g - x0) / (xe - x0), 0.0)
        return np.where(ux[k] == g, value, y0 + t * (ye - y0))

    c1, c2 = limits(x1, y1), limits(x2, y2)
    grid = np.union1d(c1[0], c2[0])
    a, b = grid[:-1], grid[1:]
    d0 = at(*c1, a, "right") - at(*c2, a, "right")
    d1 = at(*c1, b, "left") - at(*c2, b, "left")
    same = d0 * d1 >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = (d0**2 + d1**2) / (2 * (np.abs(d0) + np.abs(d1)))
    area = np.where(same, (np.abs(d0) + np.abs(d1)) / 2, np.nan_to_num(crossing)) * (b - a)
    return float(area.sum())


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("decimals", [1, 2, None])
def test_exact_curves_and_areas_equal_the_direct_computation(seed, decimals):
    """The exact curves at every distinct score, and the areas between them and an estimate,
    as the binary-search forms give them (precision to the last bits: TP/(TP + FP) directly)."""
    from fedeval.estimate.curve_areas import exact_curves, pr_area_error, roc_area_error
    from fedeval.estimate.roc_pr import leaf_curves

    s, y = _scores(seed, 5000, decimals)
    ss = SortedScores.from_arrays(s, y)
    c = exact_curves(ss)
    t = np.unique(s)[::-1]
    p, n = len(ss.positives), len(ss.negatives)
    tp = p - np.searchsorted(ss.positives, t, "left")
    fp = n - np.searchsorted(ss.negatives, t, "left")
    np.testing.assert_array_equal(c.thresholds, np.r_[np.inf, t])
    np.testing.assert_array_equal(c.tpr, np.r_[0.0, tp / p])
    np.testing.assert_array_equal(c.fpr, np.r_[0.0, fp / n])
    np.testing.assert_allclose(c.precision, np.r_[1.0, tp / (tp + fp)], rtol=1e-15)

    rng = np.random.default_rng(seed)
    leaves = np.stack(
        [np.histogram(s[~y], 64, (0, 1))[0], np.histogram(s[y], 64, (0, 1))[0]]
    ).astype(float)
    leaves += rng.normal(0, 3, leaves.shape)  # a noisy estimate
    dense, points = leaf_curves(leaves, 16)
    for est in (dense, points):
        assert roc_area_error(est, c) == _area_between_oracle(est.fpr, est.tpr, c.fpr, c.tpr)
        assert pr_area_error(est, c) == _area_between_oracle(
            est.recall[1:], est.precision[1:], c.recall[1:], c.precision[1:]
        )
    # Curves whose knots extend past each other's ends (extrapolated), non-monotone x.
    x1, y1 = np.array([0.2, 0.5, 0.5, 0.9]), np.array([0.1, 0.4, 0.6, 0.8])
    x2, y2 = np.array([0.0, 0.3, 1.0, 0.6]), np.array([0.0, 0.5, 1.0, 0.7])
    from fedeval.estimate.curve_areas import _area_between

    assert _area_between(x1, y1, x2, y2) == _area_between_oracle(x1, y1, x2, y2)
    assert _area_between(x2, y2, x1, y1) == _area_between_oracle(x2, y2, x1, y1)


@pytest.mark.parametrize("seed", range(4))
def test_exact_ece_equals_the_sum_over_every_score(seed):
    from fedeval.estimate.exact import exact_ece_of

    s, y = _scores(seed, 3000, 2 if seed % 2 else None)
    x = s.astype(np.float64)
    b = np.minimum((x * 15).astype(np.int64), 14)
    direct = np.sum(np.abs(np.bincount(b, y, 15) - np.bincount(b, x, 15))) / len(x)
    ss = SortedScores.from_arrays(s, y)
    assert exact_ece_of(ss, 15) == pytest.approx(direct, abs=1e-12)
    f = np.sqrt
    xf = f(s).astype(np.float64)  # the transform sees the scores as stored
    bf = np.minimum((xf * 15).astype(np.int64), 14)
    direct_f = np.sum(np.abs(np.bincount(bf, y, 15) - np.bincount(bf, xf, 15))) / len(x)
    assert exact_ece_of(ss, 15, transform=f) == pytest.approx(direct_f, abs=1e-12)


@pytest.mark.parametrize("block", [1, 2, 7, 100])
def test_area_between_is_the_same_in_blocks(monkeypatch, block):
    from fedeval.estimate import curve_areas, roc_pr

    s, y = _scores(11, 800, 2)
    c = curve_areas.exact_curves(SortedScores.from_arrays(s, y))
    leaves = np.stack(
        [np.histogram(s[~y], 32, (0, 1))[0], np.histogram(s[y], 32, (0, 1))[0]]
    ).astype(float)
    est = roc_pr.leaf_curves(leaves, 8)[0]
    whole = (curve_areas.roc_area_error(est, c), curve_areas.pr_area_error(est, c))
    monkeypatch.setattr(curve_areas, "AREA_BLOCK", block)
    blocked = (curve_areas.roc_area_error(est, c), curve_areas.pr_area_error(est, c))
    assert blocked == pytest.approx(whole, rel=1e-12)
    assert whole[0] == pytest.approx(_area_between_oracle(est.fpr, est.tpr, c.fpr, c.tpr))
