"""The AUC read from noisy leaves where wide score ranges are empty (issue 25, hard.py's
tworanges, lowrange): the noise of every empty leaf enters the ½-counting with the weight of its
place in the ranking, so any clamping of the counts before the AUC (at 0, a monotone fit) moves
both ends of the interval's range by far more than their spread. The release's counts are read
as they are (unbiased, `fedeval.estimate.metrics.auc_from_buckets`), and so the range's ends
are unbiased on such data too."""

import math

import numpy as np

from fedeval.estimate.smoothness import auc_parts
from fedeval.privacy.decode import noise_draws
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays

DRAWS = 1000
# |mean error| within 4 standard errors of the mean over DRAWS independent draws: a false failure
# once in ~16,000 seeds; the AUC of the counts clamped at 0 errs by 4.7e-3 here, ~160 of them.
SES = 4.0


def _two_ranges(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """hard.py's tworanges: 80% of rows on [0, 0.2] with 5% positives, the rest on [0.5, 1] with
    60% positives; within each, positives score higher (Beta(3, 2) against Beta(2, 3))."""
    low = rng.random(n) < 0.8
    y = rng.random(n) < np.where(low, 0.05, 0.6)
    u = np.where(y, rng.beta(3.0, 2.0, n), rng.beta(2.0, 3.0, n))
    return y, np.where(low, 0.2 * u, 0.5 + 0.5 * u)


def test_auc_range_ends_are_unbiased_under_noise_on_empty_score_ranges():
    # 100,000 rows at 512 leaves, distdp ε = 1: 337 of the 1,024 class leaves are empty (the gap
    # [0.2, 0.5] in both classes), each carrying noise of sd ≈ 10 counts. The two ends of the
    # range (raw ½-counting, and raw less the Richardson step) over DRAWS fresh releases of the
    # same data (the exact leaves plus the release's noise law as it reaches the consistent
    # leaves, `noise_draws`) average to the exact leaves' own values.
    y, s = _two_ranges(100_000, np.random.default_rng(0))
    data = scored_from_arrays(y, s, keep_scores=False)
    exact = simulate(data, model="federated", height=9).histogram.leaves
    hist = simulate(data, model="distdp", epsilon=1.0, height=9, seed=0, ci_draws=0).histogram
    assert (exact == 0).sum() > 300
    noise = noise_draws(hist, DRAWS, np.random.default_rng(1))
    assert noise is not None
    raw0, bias0, _, _ = auc_parts(exact, np.zeros_like(exact))
    raw, bias, _, _ = auc_parts(exact + noise, np.zeros_like(noise), order_variance=False)
    for name, end, end0 in (("raw", raw, raw0), ("corrected", raw - bias, raw0 - bias0)):
        err = end - end0
        se = float(err.std()) / math.sqrt(DRAWS)
        assert abs(float(err.mean())) <= SES * se, (name, float(err.mean()), se)
