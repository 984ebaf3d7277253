"""The AP's noise pull and spread read at two added noise levels (`simex_pull`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedeval.estimate.ap_simex import SIMEX_SCALES, SIMEX_WEIGHTS, simex_pull

OLD_FACTOR = 1.0 / (math.sqrt(2.0) - 1.0)
"""The constant the pull was read with before: a pull linear in the noise's sd."""


def _levels(curve, draws: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(AP of the release, AP re-noised once and twice) where the mean AP at total noise sd u
    (in the release's) is `curve(u)` and each draw moves it by `draws` per unit of added sd."""
    u_once, u_twice = (math.sqrt(1.0 + a * a) for a in SIMEX_SCALES)
    once = curve(u_once) + SIMEX_SCALES[0] * draws
    twice = curve(u_twice) + SIMEX_SCALES[1] * draws
    return curve(1.0), once, twice


def test_weights_read_a_quadratic_in_the_noise_sd_at_none():
    assert SIMEX_WEIGHTS.sum() == pytest.approx(1.0, abs=1e-12)
    assert SIMEX_WEIGHTS == pytest.approx([8.08, -13.16, 6.08], abs=0.01)
    draws = np.random.default_rng(1).normal(0.0, 1e-3, 200)
    draws -= draws.mean()
    for a, b, c in ((0.8, -3e-3, 0.0), (0.8, -2e-3, -1e-3), (0.5, 1e-3, 4e-4)):
        estimate, once, twice = _levels(lambda u, a=a, b=b, c=c: a + b * u + c * u * u, draws)
        pull, pull_sd, _ = simex_pull(estimate, once, twice)
        assert pull == pytest.approx(estimate - a, abs=1e-12)
        # the common draws: the per-draw sums' spread over √D (weights −13.16 + √2·6.08)
        expected_sd = abs(SIMEX_WEIGHTS[1] + SIMEX_SCALES[1] * SIMEX_WEIGHTS[2])
        assert pull_sd == pytest.approx(expected_sd * draws.std(ddof=1) / math.sqrt(200))
    # linear in the sd: the old constant's reading, which SIMEX keeps
    estimate, once, twice = _levels(lambda u: 0.8 - 3e-3 * u, draws)
    old = OLD_FACTOR * (once.mean() - estimate)
    assert simex_pull(estimate, once, twice)[0] == pytest.approx(old, rel=1e-9)


def test_a_pull_growing_slower_than_the_noise_is_read_closer_than_the_old_constant():
    # Scores in [0, 0.01] on the [0, 1] axis (100k rows, distdp ε = 1, h = 14, 100 releases):
    # the mean AP moved as −3.44e-3·u^0.75 over u = 1 … 2.2 (rms 2e-5), so the release carries
    # a pull of −3.44e-3. The old constant reads 28% short of it (−2.47e-3), the quadratic in
    # u 19% short (−2.77e-3): closer, not all of it (a curve with infinite slope at u = 0).
    draws = np.zeros(60)
    estimate, once, twice = _levels(lambda u: 0.79 - 3.44e-3 * u**0.75, draws)
    truth_pull = -3.44e-3
    old = OLD_FACTOR * (once.mean() - estimate)
    pull = simex_pull(estimate, once, twice)[0]
    assert old / truth_pull < 0.72
    assert 0.8 < pull / truth_pull < 0.82


def test_the_spread_at_the_release_is_read_where_sd_per_added_noise_falls():
    # sd(a)/a linear in the added sd a: 4.57e-3 at a = 1, 4.36e-3 at a = √2 (the same data):
    # at a = 0, 5.08e-3, the spread over releases there 5.03e-3.
    rng = np.random.default_rng(2)
    z = rng.standard_normal(400)
    z = (z - z.mean()) / z.std(ddof=1)
    once, twice = 0.79 + 4.57e-3 * z, 0.79 + math.sqrt(2.0) * 4.36e-3 * z
    factor = simex_pull(0.79, once, twice)[2]
    at_zero = 4.57e-3 + (4.57e-3 - 4.36e-3) / (math.sqrt(2.0) - 1.0)
    assert factor == pytest.approx(at_zero / 4.57e-3, rel=1e-9)
    assert factor * 4.57e-3 == pytest.approx(5.08e-3, abs=1e-5)
    # a spread that grows per unit of added noise is never read below the measured one
    assert simex_pull(0.79, 0.79 + 4e-3 * z, 0.79 + math.sqrt(2.0) * 5e-3 * z)[2] == 1.0
    # undefined draws are left out; fewer than two defined: no pull, no spread, factor 1
    nan = np.full(5, np.nan)
    assert simex_pull(0.79, nan, nan) == (0.0, 0.0, 1.0)
