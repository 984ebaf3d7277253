"""cwECE, top-label ECE and accuracy against hand-worked cases and a slow direct definition."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.multiclass.data import softmax
from fedeval.multiclass.metrics import accuracy, classwise_ece, measure, top_label_ece


def cw_ece_reference(p, y, n_bins):
    """Definition 3.3 literally: per class, per bin, |mean confidence − class frequency| weighted
    by the bin's share of the N examples; averaged over classes."""
    n, c = p.shape
    edges = np.linspace(0, 1, n_bins + 1)
    total = 0.0
    for j in range(c):
        for m in range(n_bins):
            last = m == n_bins - 1
            in_bin = [
                i
                for i in range(n)
                if edges[m] <= p[i, j] and (p[i, j] < edges[m + 1] or (last and p[i, j] <= 1))
            ]
            if not in_bin:
                continue
            conf = sum(p[i, j] for i in in_bin) / len(in_bin)
            freq = sum(y[i] == j for i in in_bin) / len(in_bin)
            total += len(in_bin) / n * abs(conf - freq)
    return total / c


def top_ece_reference(p, y, n_bins):
    n = len(p)
    edges = np.linspace(0, 1, n_bins + 1)
    total = 0.0
    for m in range(n_bins):
        rows = [
            i
            for i in range(n)
            if edges[m] <= p[i].max() and (p[i].max() < edges[m + 1] or m == n_bins - 1)
        ]
        if rows:
            conf = np.mean([p[i].max() for i in rows])
            acc = np.mean([np.argmax(p[i]) == y[i] for i in rows])
            total += len(rows) / n * abs(conf - acc)
    return total


def test_hand_case_two_classes():
    # Two bins. Class 0 confidences 0.8, 0.8, 0.2, 0.2 with labels 0, 1, 1, 1:
    #   bin [0.5, 1]: mean 0.8, class-0 share 1/2 → 2/4 · 0.3; bin [0, 0.5): 0.2 vs 0 → 2/4 · 0.2.
    # Class 1 is the mirror image (same gaps), so cwECE = 0.25.
    p = np.array([[0.8, 0.2], [0.8, 0.2], [0.2, 0.8], [0.2, 0.8]])
    y = np.array([0, 1, 1, 1])
    assert classwise_ece(p, y, 2) == pytest.approx(0.25, abs=1e-15)
    # top label: all confidences 0.8 (one bin), right 3 of 4 → |0.8 − 0.75| = 0.05
    assert top_label_ece(p, y, 2) == pytest.approx(0.05, abs=1e-15)
    assert accuracy(p, y) == 0.75


def test_hand_case_perfectly_calibrated_is_zero():
    p = np.array([[0.5, 0.5]] * 4)
    y = np.array([0, 1, 0, 1])
    assert classwise_ece(p, y, 10) == pytest.approx(0.0, abs=1e-15)
    assert top_label_ece(p, y, 10) == pytest.approx(0.0, abs=1e-15)


def test_probability_one_falls_in_the_last_bin():
    p = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    y = np.array([0, 2])
    assert classwise_ece(p, y, 5) == pytest.approx(cw_ece_reference(p, y, 5), abs=1e-15)
    assert top_label_ece(p, y, 5) == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_against_the_definition(seed):
    rng = np.random.default_rng(seed)
    n, c = 60, 4
    p = softmax(rng.normal(0, 2, (n, c)))
    y = rng.integers(0, c, n)
    for bins in (3, 15):
        assert classwise_ece(p, y, bins) == pytest.approx(cw_ece_reference(p, y, bins), rel=1e-12)
        assert top_label_ece(p, y, bins) == pytest.approx(top_ece_reference(p, y, bins), rel=1e-12)
    m = measure(p, y, 15)
    assert m.accuracy == np.mean(p.argmax(1) == y)
