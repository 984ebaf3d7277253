"""Every exact value equals scikit-learn's (or the direct formula's, where scikit-learn has no
counterpart) to 1e-12, on the score shapes that break counting code: ties across and within the
classes, duplicated rows, one value for every row, rare positives, float32 and float64, packed
keys and each class sorted apart, blocks in one thread or several; and past 2^31 rows, by
construction (a table of distinct scores whose counts are given, against scikit-learn's
`sample_weight`)."""

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from fedeval.estimate.diagnostics import exact_diagnostics
from fedeval.estimate.exact import (
    DistinctScores,
    SortedScores,
    exact_auc,
    exact_ece_of,
    exact_threshold_counts,
)
from fedeval.estimate.metrics import precision_recall_accuracy

KINDS = ["distinct", "ties", "duplicates", "one-value", "rare", "extremes"]


def _scores(kind: str, n: int, seed: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    y = rng.random(n) < (0.003 if kind == "rare" else 0.3)
    y[:2] = [True, False]  # both classes present
    s = 1 / (1 + np.exp(-(rng.normal(size=n) + 1.2 * y)))
    if kind == "ties":
        s = np.round(s, 2)  # ties within and across the classes
    elif kind == "duplicates":
        k = n // 3
        s[-k:], y[-k:] = s[:k], y[:k]  # whole rows repeated
    elif kind == "one-value":
        s[:] = 0.375
    elif kind == "extremes":
        s = np.clip(np.round(3 * s - 1, 3), 0, 1)  # many exactly 0 and exactly 1
    return s.astype(dtype), y


def _both_layouts(s: np.ndarray, y: np.ndarray) -> list[SortedScores]:
    """The packed keys (non-negative floats) and each class sorted apart."""
    packed = SortedScores.from_arrays(s, y)
    assert packed.keys is not None
    apart = SortedScores(np.sort(s[~y]), np.sort(s[y]))
    return [packed, apart]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_auc_and_ap_equal_sklearn(kind, dtype, threads):
    s, y = _scores(kind, 6000, 1, dtype)
    auc, ap = roc_auc_score(y, s), average_precision_score(y, s)
    for ss in _both_layouts(s, y):
        assert exact_auc(ss) == pytest.approx(auc, abs=1e-12)
        # small blocks: many blocks, each run of ties whole in one of them
        curves, _, _ = exact_diagnostics(ss, block=97, threads=threads)
        assert curves.roc_auc == pytest.approx(auc, abs=1e-12)
        assert curves.average_precision == pytest.approx(ap, abs=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threshold_metrics_equal_sklearn(kind, dtype):
    s, y = _scores(kind, 4000, 2, dtype)
    # thresholds on scores themselves (ties at the threshold), between them, and beyond
    thresholds = np.unique(np.r_[0.0, 0.375, s[:5].astype(np.float64), 0.5, 1.0, 1.5])
    for ss in _both_layouts(s, y):
        tp, fp = exact_threshold_counts(ss, thresholds)
        p, r, a = precision_recall_accuracy(tp, fp, float(y.sum()), float((~y).sum()))
        for i, t in enumerate(thresholds):
            pred = s >= t  # in float64, as the thresholds are given
            assert (tp[i], fp[i]) == (np.sum(pred & y), np.sum(pred & ~y))
            assert r[i] == pytest.approx(recall_score(y, pred), abs=1e-12)
            assert a[i] == pytest.approx(accuracy_score(y, pred), abs=1e-12)
            if pred.any():
                assert p[i] == pytest.approx(precision_score(y, pred), abs=1e-12)


def _ece(s: np.ndarray, y: np.ndarray, w: np.ndarray, bins: int) -> float:
    """Σ_b |Σ_b w·y − Σ_b w·s| / Σ w over bins min(⌊s·M⌋, M − 1): the direct formula."""
    b = np.minimum((s.astype(np.float64) * bins).astype(np.int64), bins - 1)
    pos = np.bincount(b, w * y, minlength=bins)
    tot = np.bincount(b, w * s.astype(np.float64), minlength=bins)
    return float(np.sum(np.abs(pos - tot)) / np.sum(w))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ece_equals_the_direct_formula(kind, dtype):
    s, y = _scores(kind, 5000, 3, dtype)
    want = _ece(s, y, np.ones(len(s)), 15)
    for ss in _both_layouts(s, y):
        assert exact_ece_of(ss, 15) == pytest.approx(want, abs=1e-12)
        assert exact_ece_of(ss, 15, lambda v: v) == pytest.approx(want, abs=1e-12)


def _counted(values: np.ndarray, negatives: np.ndarray, positives: np.ndarray) -> SortedScores:
    """A `SortedScores` whose distinct table (each value's count of each class) is given, with
    no array of the rows: the sums over it past 2^31 rows. (The classes are made of different
    dtypes so that every exact value is read off the table.)"""
    s = SortedScores(np.zeros(0, np.float32), np.zeros(0, np.float64))
    s.__dict__["distinct"] = DistinctScores(values, negatives, positives)
    s.n_negatives, s.n_positives = int(negatives.sum()), int(positives.sum())
    return s


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scale", [2**21, 2**25])
def test_past_two_to_the_31_rows_by_counts(seed, scale):
    """About 3.2 (12) billion rows as counts of a few hundred distinct scores, ties across the
    classes at most of them: AUC, AP and ECE against scikit-learn and the formula weighted by
    the same counts; the integer sums (2PN ≈ 4·10^18, past 2^53; ≈ 9·10^19, past 2^63) exact."""
    rng = np.random.default_rng(seed)
    k = 300
    values = np.sort(rng.choice(np.linspace(0, 1, 1001), k, replace=False))
    negatives = rng.integers(0, scale, k).astype(np.int64)
    positives = (rng.integers(0, scale, k) * (1 + 3 * values)).astype(np.int64)
    negatives[rng.random(k) < 0.2] = 0  # some scores of one class only
    positives[rng.random(k) < 0.2] = 0
    negatives[0] += 2**31 + 7  # one count past int32 alone
    s = _counted(values, negatives, positives)
    assert s.n_negatives + s.n_positives > 2**31
    assert 2 * s.n_negatives * s.n_positives > (2**53 if scale == 2**21 else 2**63)
    score = np.r_[values, values]
    label = np.r_[np.zeros(k, bool), np.ones(k, bool)]
    weight = np.r_[negatives, positives].astype(np.float64)
    auc = roc_auc_score(label, score, sample_weight=weight)
    ap = average_precision_score(label, score, sample_weight=weight)
    assert exact_auc(s) == pytest.approx(auc, abs=1e-12)
    for block in (7, 1 << 16):
        curves, _, _ = exact_diagnostics(s, block=block)
        assert curves.roc_auc == pytest.approx(auc, abs=1e-12)
        assert curves.average_precision == pytest.approx(ap, abs=1e-12)
        assert curves.roc_auc == exact_auc(s)  # the same integer sum
    ece = exact_ece_of(s, 15, lambda v: v)
    assert ece == pytest.approx(_ece(score, label, weight, 15), abs=1e-12)


@pytest.mark.parametrize("big", [2**30 + 11, 2**32 + 11])
def test_the_integer_auc_sum_is_exact_where_float64_is_not(big):
    """Counts where 2PN passes 2^53 (and 2^63: int64 would overflow): the AUC's sum in float64
    would round; here it is the exact fraction, correctly rounded once (a table whose AUC is
    known in closed form)."""
    values = np.array([0.25, 0.5, 0.75])
    s = _counted(values, np.array([big, 3, 0]), np.array([0, 5, big]))
    n, p = big + 3, big + 5
    # positives above negatives: 5 at 0.5 over `big` at 0.25, `big` at 0.75 over all N;
    # the 5 × 3 pairs tied at 0.5 count ½ (twice: once)
    twice = 2 * (5 * big + big * n) + 5 * 3
    want = twice / (2 * p * n)
    assert 2 * p * n > 2**53
    assert exact_auc(s) == want
    for block in (1, 2, 1 << 16):
        assert exact_diagnostics(s, block=block)[0].roc_auc == want
