"""Binary calibration (histogram binning, BBQ) from a noisy release never worse than the scores
themselves in expectation: each bucket shrunk toward the scores by its noise, the map kept
only where the release shows a gain, else the scores themselves as a step on the leaves; all of
it post-processing of the release (issue 25)."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

import fedeval
from fedeval.views.dicts import shareable


def calibrated_scores(n: int, rng: np.random.Generator):
    """Scores that are their own positives' rate: any map fitted from noise makes them worse."""
    s = rng.beta(2, 2, n)
    return (rng.random(n) < s).astype(int), s


def test_noisy_maps_of_calibrated_scores_are_not_worse_than_the_scores():
    # localdp ε = 2 at h = 7 on 50,000 calibrated scores: the buckets' frequencies are noise.
    # The map falls back to the scores as a step on the 128 leaves, which moves the ECE by at
    # most half a leaf (1/256); a noisy map passes the one-sided 95 % check with probability
    # ≤ 5 %, and 4 or more passes among 16 fits has probability < 1 % (binomial). The old
    # maps (the noisy frequencies, made monotone) were worse by 0.01–0.06 in every fit.
    half_leaf = 0.5 / 128
    assert sum(comb(16, k) * 0.05**k * 0.95 ** (16 - k) for k in range(4, 17)) < 0.01
    worse = []
    for seed in range(8):
        y, s = calibrated_scores(50_000, np.random.default_rng([seed, 9]))
        for method in ("binning", "bbq"):
            r = fedeval.calibrate(
                y, s, model="localdp", epsilon=2.0, method=method, height=7, seed=seed,
                ci_draws=0,
            )  # fmt: skip
            excess = r.ece_calibrated.exact - r.ece_raw.exact
            if excess > half_leaf:
                worse.append((seed, method, excess))
    assert len(worse) <= 3, worse


@pytest.mark.parametrize("method", ["binning", "bbq"])
def test_a_miscalibrated_model_is_still_calibrated_under_noise(method):
    # distdp ε = 1, 20,000 scores that overstate their rate: the release shows the gain and the
    # map keeps it (the check is not a fallback that hides everything).
    rng = np.random.default_rng(3)
    s = rng.beta(2, 2, 20_000)
    y = (rng.random(20_000) < 0.5 + 0.7 * (s - 0.5)).astype(int)
    r = fedeval.calibrate(y, s, model="distdp", epsilon=1.0, method=method, seed=3)
    assert r.check is not None and r.check.kept
    assert r.ece_calibrated.exact < 0.3 * r.ece_raw.exact


def test_the_check_is_stated_in_the_shared_map():
    y, s = calibrated_scores(20_000, np.random.default_rng(4))
    r = fedeval.calibrate(y, s, model="localdp", epsilon=2.0, height=6, seed=4, ci_draws=0)
    doc = shareable(r.to_dict())
    check = doc["shrinkage"]
    assert check["kept"] is False
    assert "no further privacy cost" in check["post_processing"]
    assert set(check) >= {"gain", "noise_sd", "kept", "rule", "metric"}
    # Fallen back, the map is the scores themselves to within half a leaf.
    grid = np.linspace(0, 1, 1001)
    assert np.max(np.abs(r.apply(grid) - grid)) <= 0.5 / 64 + 1e-12


def test_without_noise_the_map_is_the_plain_fit():
    y, s = calibrated_scores(5_000, np.random.default_rng(5))
    r = fedeval.calibrate(y, s, model="federated", seed=5)
    assert r.check is None
