"""Histogram estimators: exact on the grid, within the discretisation bound off it."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, precision_score, recall_score, roc_auc_score

import fedeval
from fedeval.core.hierarchy import bucket_counts, cell_index, equidepth_edges
from fedeval.estimate.metrics import (
    auc_from_buckets,
    precision_recall_accuracy,
    top_region_precision,
)


@pytest.mark.parametrize(("height", "shape"), [(6, "flat"), (8, "hierarchy"), (12, "flat")])
def test_federated_equals_sklearn_on_the_grid(height, shape):
    rng = np.random.default_rng(height)
    n = 5000
    y = rng.integers(0, 2, n)
    # Scores on the 2^-h grid (k / 2^h, k < 2^h): each leaf holds a single score value.
    k = np.clip((rng.beta(2 + 2 * y, 3) * (1 << height)).astype(int), 0, (1 << height) - 1)
    s = k / (1 << height)
    thresholds = [3 / (1 << height), 0.25, 0.5, 0.75]
    ev = fedeval.evaluate(
        y, s, model="federated", height=height, shape=shape, thresholds=thresholds, seed=0
    )
    assert ev.auc.estimate == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    for m in ev.thresholds:
        pred = s >= m.threshold
        assert m.precision.estimate == pytest.approx(precision_score(y, pred), abs=1e-12)
        assert m.recall.estimate == pytest.approx(recall_score(y, pred), abs=1e-12)
        assert m.accuracy.estimate == pytest.approx(accuracy_score(y, pred), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_federated_error_within_discretisation_bound_off_the_grid(seed):
    rng = np.random.default_rng(seed)
    n, h = 20_000, 7
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.15), 0, 1)
    t = np.array([0.123, 0.456, 0.789])
    ev = fedeval.evaluate(y, s, model="federated", height=h, thresholds=t, seed=0)
    cells = cell_index(s, h)
    pos = np.bincount(cells[y == 1], minlength=1 << h)
    neg = np.bincount(cells[y == 0], minlength=1 << h)
    # AUC: only pairs inside one leaf are uncertain, and they were counted ½.
    bound = 0.5 * np.sum(pos * neg) / (pos.sum() * neg.sum())
    assert abs(ev.auc.estimate - roc_auc_score(y, s)) <= bound
    # Recall: only the leaf that holds t is uncertain.
    for m in ev.thresholds:
        leaf = cell_index(np.array([m.threshold]), h)[0]
        assert abs(m.recall.estimate - m.recall.exact) <= pos[leaf] / pos.sum()


def test_equidepth_bucket_auc_within_worst_case_bound():
    rng = np.random.default_rng(4)
    n = 50_000
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.45 + 0.15 * y, 0.2), 0, 1)
    for b in (5, 20, 100):
        ev = fedeval.evaluate(y, s, model="federated", height=14, buckets=b, seed=0)
        leaves = ev.histogram.leaves
        edges = equidepth_edges(leaves.sum(axis=0), b)
        nb, pb = bucket_counts(leaves[0], edges), bucket_counts(leaves[1], edges)
        bound = 0.5 * np.sum(nb * pb) / (pb.sum() * nb.sum())  # Lemma 4.1's uncertainty
        assert abs(ev.auc.estimate - ev.auc.exact) <= bound + 1e-12
        assert bound <= 1 / (2 * b) + 1e-3  # ≈ 1/(2B) for equi-depth buckets


def test_auc_formula_small_example():
    # Buckets low→high: negatives (2, 1, 0), positives (0, 1, 2).
    # Pairs: neg in b0 beat by all 3 positives (2·3); neg in b1: 2 positives above + ½ tie.
    assert auc_from_buckets(np.array([2, 1, 0]), np.array([0, 1, 2])) == pytest.approx(
        (2 * 3 + 1 * (2 + 0.5)) / (3 * 3)
    )


def test_precision_undefined_when_nothing_predicted_positive():
    p, r, a = precision_recall_accuracy(np.array([0.0]), np.array([0.0]), 10.0, 10.0)
    assert np.isnan(p[0]) and r[0] == 0 and a[0] == 0.5


def test_top_region_precision_is_the_limit_from_the_top():
    # Negatives (5, 3, 0, 0), positives (0, 1, 1, 0): the top non-empty region is leaf 2 (1
    # positive, precision 1); asking for more than 1 example takes leaves 1–3 (2 of 5).
    leaves = np.array([[5.0, 3.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    assert top_region_precision(leaves) == 1.0
    assert top_region_precision(leaves, 1.5) == pytest.approx(2 / 5)
    # Per-region limits (one per top region size); noisy negative counts clamp at 0.
    assert top_region_precision(leaves, np.array([0.0, 1.5, 1.5, 1.5])) == pytest.approx(2 / 5)
    assert top_region_precision(np.array([[0.0, -2.0], [0.0, 1.0]])) == 1.0
    # Nothing large enough: the whole histogram; nothing at all: ½.
    assert top_region_precision(leaves, 100.0) == pytest.approx(2 / 10)
    assert top_region_precision(np.zeros((2, 3))) == 0.5
