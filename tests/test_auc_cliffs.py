"""The AUC's and AP's reading beside a cliff the noise hides (`beside_cliffs` with the run's
noise draws, read by `fedeval.api.curves.release_departures`)."""

from __future__ import annotations

import numpy as np

import fedeval

THRESHOLDS = [0.571328, 0.664082, 0.664662, 0.664914, 0.890673]


def _squeezed_grid() -> tuple[np.ndarray, np.ndarray]:
    """762 scores on a 0.001 grid in [0.656, 0.667] (`benchmarks/shapes.py --master 7`, S8):
    the negatives at the bottom, the positives at the top, 140 of them; AUC 0.998."""
    values = np.round(np.arange(0.656, 0.6675, 0.001), 3)
    counts = [221, 201, 109, 50, 33, 15, 7, 20, 15, 37, 35, 19]
    positives = [0, 0, 0, 1, 1, 8, 5, 19, 15, 37, 35, 19]
    s = np.repeat(values, counts)
    y = np.concatenate([np.arange(c) < p for c, p in zip(counts, positives, strict=True)])
    return y, s


def test_a_class_in_a_fraction_of_a_wide_leaf_beside_noise_is_held_under_distdp():
    # At the auto height (4) the leaf [0.618, 0.664) holds 656 of the rows, all in its top
    # 1.3%, and its neighbours hold only noise: read smooth, its 34 positives sat at the
    # middle of its 622 negatives, an AUC of 0.78 in [0.68, 0.86] around 0.998 (15 of these
    # 20 releases missed; 26 of 100 held in the sweep). With the leaf beside a parent its
    # noise cannot tell from empty departing whole, 18 of 20 held.
    y, s = _squeezed_grid()
    misses = 0
    for seed in range(20):
        ev = fedeval.evaluate(y, s, model="distdp", epsilon=1.0, seed=seed, thresholds=THRESHOLDS)
        misses += not ev.auc.ci95[0] <= ev.auc.exact <= ev.auc.ci95[1]
    assert misses <= 5
