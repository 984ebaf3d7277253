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
