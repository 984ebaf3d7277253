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


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def user_family(family: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(labels as bool, scores) of the shapes users' data have (benchmarks/hard.py's
    `user_scores`, the same laws): 'grid' (a logistic model's scores rounded to 0.01, 5%
    positives), 'tree' (70% of rows on 40 leaf values, label ~ Bernoulli(value)), 'clipped'
    (binormal clipped at exactly 0 and 1), 'squeezed' (smooth scores in [0.45, 0.55], 30%
    positives), 'bimodal' (two bumps per class), 'tiny' (smooth, 20% positives; meant for a
    few thousand rows), 'ultrarare' (0.2% positives, Beta(5, 2) against Beta(1, 6)),
    'onevalue' (every positive on 0.8, negatives Beta(4, 3))."""
    if family == "grid":
        y = rng.random(n) < 0.05
        z = rng.normal(np.where(y, -0.5, -3.5), np.where(y, 1.5, 1.2))
        return y, np.round(_sigmoid(z), 2)
    if family == "tree":
        values = np.sort(_sigmoid(rng.normal(-1.0, 1.6, 40)))
        on = rng.random(n) < 0.7
        s = np.empty(n)
        s[on] = values[rng.integers(0, values.size, on.sum())]
        y = np.empty(n, bool)
        y[on] = rng.random(on.sum()) < s[on]
        y[~on] = rng.random((~on).sum()) < 0.1
        s[~on] = _sigmoid(rng.normal(np.where(y[~on], 1.0, -1.5), 1.0))
        return y, s
    if family == "clipped":
        y = rng.random(n) < 0.4
        return y, np.clip(rng.normal(np.where(y, 0.7, 0.3), 0.3), 0.0, 1.0)
    if family == "squeezed":
        y = rng.random(n) < 0.3
        return y, 0.45 + 0.1 * _sigmoid(rng.normal(np.where(y, 1.0, -1.0), 1.0))
    if family == "bimodal":
        y = rng.random(n) < 0.25
        hi = rng.random(n) < 0.5
        centre = np.where(y, np.where(hi, 0.9, 0.45), np.where(hi, 0.6, 0.15))
        return y, np.clip(rng.normal(centre, 0.05), 0.0, 1.0)
    if family == "tiny":
        y = rng.random(n) < 0.2
        return y, _sigmoid(rng.normal(np.where(y, 1.0, -1.0), 1.0))
    if family in ("ultrarare", "rare-small"):
        y = rng.random(n) < (0.002 if family == "ultrarare" else 0.015)
        return y, np.where(y, rng.beta(5.0, 2.0, n), rng.beta(1.0, 6.0, n))
    if family == "logistic-rare":
        y = rng.random(n) < 0.02
        return y, _sigmoid(2.0 * y + rng.standard_normal(n) - 2.5)
    if family == "onevalue":
        y = rng.random(n) < 0.1
        return y, np.where(y, 0.8, rng.beta(4.0, 3.0, n))
    raise ValueError(family)
