"""The noisy AP interval's spread: that of the two candidates that bound its span."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.estimate.curves import (
    AP_DRAWS,
    FIT_BIAS_FACTOR,
    leaf_ap,
    leaf_ap_candidates,
    leaf_ap_interval,
    leaf_tails,
    within_leaf_bounds,
)
from fedeval.estimate.uncertainty import bias_aware_interval


def test_ap_interval_takes_the_spread_of_the_candidates_at_its_ends():
    # Point masses on smooth mass at 32 leaves under noise: the tie candidates' Romberg step
    # bounds the span and is noisier than the integral and extrapolated step rules, which alone
    # made σ before (point masses under localdp then covered 0.930 over 600 releases; with the
    # ends' spread 0.948, benchmarks/hard.py).
    rng = np.random.default_rng(3)
    cells = 32
    smooth = rng.normal(0.0, 1.0, 200_000)
    neg = np.histogram(1 / (1 + np.exp(-(smooth - 1))), cells, (0, 1))[0].astype(float)
    pos = np.histogram(1 / (1 + np.exp(-(smooth + 1))), cells, (0, 1))[0].astype(float)
    pos[[6, 20, 29]] += [3000, 9000, 12000]  # tied positives sharing leaves with smooth mass
    neg[[6, 20, 29]] += [6000, 4000, 1000]
    release = np.stack([neg, pos]) + rng.normal(0.0, 400.0, (2, cells))
    draws = rng.normal(0.0, 400.0, (AP_DRAWS, 2, cells))
    estimate = leaf_ap(*leaf_tails(release), "integral")
    _, _, ap_lo, ap_hi = within_leaf_bounds(release)
    lo, hi = leaf_ap_interval(release, estimate, (ap_lo, ap_hi), draws)

    candidates = np.clip(leaf_ap_candidates(release, estimate), ap_lo, ap_hi)
    again = np.array(
        [
            leaf_ap_candidates(release + d, leaf_ap(*leaf_tails(release + d), "integral"))
            for d in draws
        ]
    )
    spread = again.std(axis=0, ddof=1)
    ends = [int(np.argmin(candidates)), int(np.argmax(candidates))]
    assert ends[0] == 3 and spread[3] > 1.04 * spread[[0, 2]].max()  # the case that changed
    fit_bias = FIT_BIAS_FACTOR * (again[:, 0].mean() - estimate)
    span_lo = min(estimate, candidates.min()) - max(fit_bias, 0.0)
    span_hi = max(estimate, candidates.max()) - min(fit_bias, 0.0)
    expected = np.clip(bias_aware_interval(span_lo, span_hi, spread[ends].max()), 0.0, 1.0)
    assert (lo, hi) == pytest.approx(tuple(expected), abs=1e-12)
