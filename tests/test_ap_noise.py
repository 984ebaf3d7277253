"""The AP's noise at each candidate height, simulated from the probe (`fedeval.core.ap_noise`):
the simulation runs the release's own AP estimator, and its prediction follows where the scores
sit, as a constant times count sd / positives cannot."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.core.ap_noise import release_ap, simulated_ap_error
from fedeval.core.height_choice import choose_height
from fedeval.core.hierarchy import consistent_leaves
from fedeval.core.spec import release_spec
from fedeval.estimate.roc_pr import leaf_ap_rows, leaf_tails
from fedeval.privacy.mechanism import mechanism_of
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays


def test_release_ap_is_the_estimators_ap():
    # Noisy leaves of every kind (empty leaves, negative counts, a class under the noise): the
    # simulation's AP is the estimator's, to rounding (its sum order differs).
    rng = np.random.default_rng(3)
    for n_leaves, scale in ((4, 1.0), (64, 30.0), (512, 5.0)):
        counts = rng.poisson(rng.gamma(0.5, 40.0, (2, n_leaves)))
        leaves = counts + scale * rng.standard_normal((20, 2, n_leaves))
        want = leaf_ap_rows(*leaf_tails(leaves), "integral")
        got = release_ap(leaves)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def _data(shape: str):
    """50,000 rows, 30% positives: smooth binormal scores, or scores clipped at exactly 0 and 1
    (benchmarks/hard.py's clipped family: 10-12% of each class on one end)."""
    rng = np.random.default_rng(0)
    y = rng.random(50_000) < 0.3
    if shape == "smooth":
        s = 1.0 / (1.0 + np.exp(-rng.normal(np.where(y, 1.0, -1.0), 1.0)))
    else:
        s = np.clip(rng.normal(np.where(y, 0.7, 0.3), 0.3), 0.0, 1.0)
    return scored_from_arrays(y.astype(int), s)


@pytest.mark.parametrize("height", [6, 9])
def test_ap_noise_prediction_follows_where_the_scores_sit(height):
    # The same class totals and the same count sd, so K·sd/P predicts the same AP noise for
    # both; measured over 30 releases (distdp ε = 1), the smooth scores' AP error is 2.4-2.7×
    # the clipped scores' (their positives' top mass sits in one leaf, read with one leaf's
    # noise). The RMS of 30 errors is known to about 1/√60 = 13%, the ratio to 18% (log sd),
    # so a measured ratio over 1.5 is a real difference (2.4 at 2.5 sds); the simulation must
    # show it in the same direction and within a factor 2 (its 8 draws: ±25%, and a probe of
    # 64 cells cannot place a mass inside a cell, which moves it by up to 1.5× here).
    measured, predicted = {}, {}
    for shape in ("smooth", "clipped"):
        data = _data(shape)
        exact = data.leaf_counts(height).reshape(2, -1).astype(float)
        errors = []
        for seed in range(30):
            spec = release_spec(None, dict(model="distdp", epsilon=1.0, height=height, seed=seed))
            run = simulate(data, spec=spec)
            errors.append(float(release_ap(run.histogram.leaves) - release_ap(exact)))
        measured[shape] = float(np.sqrt(np.mean(np.square(errors))))
        sd = np.sqrt(mechanism_of(run.config).cohort_noise_variance)
        probe = data.leaf_counts(6).reshape(2, -1).astype(float)
        choice = choose_height(probe, 0.0, np.array([height]), np.array([sd]), "distdp")
        predicted[shape] = float(choice.noise[1, 0])
    m = measured["smooth"] / measured["clipped"]
    p = predicted["smooth"] / predicted["clipped"]
    assert m > 1.5, measured
    assert m / 2.0 <= p <= 2.0 * m, (measured, predicted)
    # K·sd/P (the rule before the simulation) gives a ratio of 1 here: under m / 2 at these
    # seeds (m = 2.35, 2.73).


def test_no_positives_to_simulate_is_none():
    hist = np.zeros((2, 64))
    hist[0] = 100.0
    out = simulated_ap_error(hist, 1.0, np.array([4, 8]), np.array([3.0, 5.0]), 1)
    assert np.isnan(out).all()


def test_a_coarser_level_of_the_same_release_reads_no_threshold_better():
    # Why precision, recall and accuracy are read from the consistent leaves at every height:
    # a count ≥ t at an edge of level f is a linear query, and the consistent leaves are the
    # least-variance linear unbiased reading of all released levels (Hay et al. 2010), so
    # reading it from level f's own measurements, or from levels 1 … f of the same release
    # made consistent alone, can only add variance. Levels 1 … 9, one variance per count (the
    # distdp tree); 4,000 draws give each variance to 2.2% (√(2/4000)), so ≤ 1.07× is 3 sds.
    rng = np.random.default_rng(5)
    h, f, draws = 9, 4, 4_000
    levels = list(range(1, h + 1))
    measured = [rng.standard_normal((draws, 1 << lv)) for lv in levels]
    full = consistent_leaves(measured, [1.0] * h, levels)
    sub = consistent_leaves(measured[:f], [1.0] * f, levels[:f])
    for edge in (1, 5, 8, 15):  # count ≥ edge / 2^f
        at_full = full[:, edge << (h - f) :].sum(axis=1).var()
        at_sub = sub[:, edge:].sum(axis=1).var()
        at_level = measured[f - 1][:, edge:].sum(axis=1).var()
        assert at_full <= 1.07 * min(at_sub, at_level), (edge, at_full, at_sub, at_level)
