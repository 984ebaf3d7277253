"""Score families the interval tests draw from (the shapes of benchmarks/hard.py): smooth
binormal scores, point masses on smooth scores, and rare positives."""

from __future__ import annotations

import numpy as np

POINT_MASSES = np.array([0.05, 0.2, 0.33, 0.5, 0.61, 0.75, 0.9, 0.97])


def family_scores(family: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(labels as bool, scores in [0, 1]) of one draw: 'smooth' (logit ~ N(±1, 1), half
    positives), 'pointmass' (the same with 40% of rows on POINT_MASSES, label ~ Bernoulli(score))
    or 'rare' (3% positives, Beta(5, 2) against Beta(1, 6))."""
    if family == "rare":
        y = rng.random(n) < 0.03
        return y, np.where(y, rng.beta(5, 2, n), rng.beta(1, 6, n))
    y = rng.random(n) < 0.5
    s = 1 / (1 + np.exp(-rng.normal(np.where(y, 1.0, -1.0), 1.0)))
    if family == "pointmass":
        on = rng.random(n) < 0.4
        s[on] = POINT_MASSES[rng.integers(0, POINT_MASSES.size, on.sum())]
        y[on] = rng.random(on.sum()) < s[on]
    elif family != "smooth":
        raise ValueError(family)
    return y, s
