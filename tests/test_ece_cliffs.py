"""The ECE's reading beside a cliff: a class against an empty parent (`beside_cliffs`)."""

from __future__ import annotations

import numpy as np
import pytest

import fedeval.api.calibrate as calibrate
from fedeval.api.evaluate import evaluate_data, threshold_axis
from fedeval.estimate.smoothness import beside_cliffs
from fedeval.tables.scored import scored_from_arrays

THRESHOLDS = (0.015676, 0.133819, 0.214811, 0.459898, 0.58994)


def _narrow_scores() -> object:
    # A well calibrated model whose scores all lie in [0.01, 0.045]: 2% positives.
    rng = np.random.default_rng(18)
    s = np.round(rng.uniform(0.01, 0.045, 515), 4)
    y = (rng.random(515) < s).astype(np.int8)
    y[0] = 1
    return scored_from_arrays(
        y, s, keep_scores=True, resolution=16, axis=threshold_axis((0.0, 1.0), THRESHOLDS)
    )


def test_a_leaf_beside_an_empty_blind_parent_departs_whole():
    leaves = np.array([[62.0, 442, 0, 0, 0, 0, 0, 0], [1.0, 10, 0, 0, 0, 0, 0, 0]])
    departing = np.zeros_like(leaves)
    departing[:, 2:4] = np.inf  # the empty parent the mass ends against
    out = beside_cliffs(departing, leaves)
    assert np.isinf(out[:, 1]).all()  # the leaf across the cliff, in both classes
    assert (out[:, 0] == 0).all() and (out[:, 4:] == 0).all()
    assert np.isinf(out[:, 2:4]).all()  # the blind parent stays so
    # A blind parent that holds examples moves nothing beside it: its own examples depart.
    departing[:, 2:4] = 0.0
    departing[0, 4:6] = np.inf
    leaves[0, 4] = 30.0
    assert (beside_cliffs(departing, leaves)[0, :4] == 0).all()


def test_ece_of_scores_in_a_fraction_of_a_wide_leaf_is_held(monkeypatch):
    # h = 4 with these thresholds: leaves [0, 0.0157), [0.0157, 0.1338), …; the second holds
    # most scores, all below 0.045, and its parent reads as smooth as its neighbour. Read
    # smooth, its examples spread across the bin edge at 1/15 and make a gap the data do not
    # have: an ECE of 0.04 in [0.02, 0.06] around an exact 2.6e-4 (benchmarks/shapes.py S18).
    data = _narrow_scores()
    ev = evaluate_data(data, model="federated", thresholds=list(THRESHOLDS), height=4, seed=0)
    lo, hi = ev.ece.ci95
    assert lo <= ev.ece.exact <= hi
    monkeypatch.setattr(calibrate, "beside_cliffs", lambda departing, leaves, draws=None: departing)
    old = evaluate_data(data, model="federated", thresholds=list(THRESHOLDS), height=4, seed=0)
    assert old.ece.ci95[0] > old.ece.exact  # the smooth reading alone misses it
    assert old.ece.estimate == pytest.approx(ev.ece.estimate)  # the estimate is unchanged


def test_under_noise_a_parent_its_noise_cannot_tell_from_empty_is_a_cliff():
    leaves = np.array([[62.0, 442, 2.5, -1.0, 30, 30, 30, 30], [1.0, 10, 0.5, 0.2, 5, 5, 5, 5]])
    departing = np.zeros_like(leaves)
    departing[:, 2:4] = np.inf
    rng = np.random.default_rng(3)
    noisy = rng.normal(0.0, 2.0, (400, 2, 8))  # parent sd ≈ 2.8: 2.5 negatives are within it
    assert np.isinf(beside_cliffs(departing, leaves, noisy)[:, 1]).all()
    assert (beside_cliffs(departing, leaves)[:, 1] == 0).all()  # exact counts: it holds 2.5
    quiet = rng.normal(0.0, 0.2, (400, 2, 8))  # sd ≈ 0.28: 2.5 negatives are told apart
    assert (beside_cliffs(departing, leaves, quiet)[0, 1] == 0).all()
