"""The localdp interval draws have, cell by cell, the spread the release really has."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the draws' OUE and sampling variance is taken at the leaves clamped at 0 (ratio "
    "0.83); taking it at the unclamped or the monotone-fit leaves passes here but drops "
    "onevalue localdp recall coverage to 0.90-0.92 (benchmarks/hard.py --quick): the "
    "inflation was hiding a miss there (issue 25)",
)
def test_localdp_draws_of_near_empty_cells_have_the_releases_spread():
    # 1,000 rows, h = 4, ε = 5: the positives' lowest cells and the negatives' top cells hold
    # 0–3 examples. Over R = 1,500 releases, each cell's empirical variance s² is σ² χ²_{R-1}/(R-1)
    # (a decoded count is a rescaled sum of many independent bits: close to normal); the pooled
    # ratio Σs² / Σσ̂² over those cells is a weighted mean of such ratios, so whatever the cells'
    # correlation its spread is at most a single cell's, and the χ²_{R-1} quantiles at
    # α = 0.001 (two-sided) bound it: ≈ [0.88, 1.13]. σ̂² is the draws' variance averaged over
    # the releases (100 draws each: its own noise is negligible). Draws whose count-dependent
    # variance was taken at the leaves clamped at 0 give 0.83 here (1.2× too wide).
    rng = np.random.default_rng(7)
    n, releases = 1000, 1500
    y = (rng.random(n) < 0.3).astype(int)
    s = np.where(y == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))
    data = scored_from_arrays(y, s, keep_scores=False)
    truth = np.stack([np.histogram(s[y == c], bins=16, range=(0, 1))[0] for c in (0, 1)])
    near_empty = truth <= 3
    assert near_empty[1, :3].all() and near_empty[0, -3:].all()
    leaves, draw_var = [], []
    for r in range(releases):
        run = simulate(data, model="localdp", epsilon=5.0, height=4, seed=r, ci_draws=100)
        assert run.noise_draws is not None
        leaves.append(run.histogram.leaves)
        draw_var.append(run.noise_draws.var(axis=0, ddof=1))
    spread = np.var(np.asarray(leaves), axis=0, ddof=1)
    claimed = np.mean(np.asarray(draw_var), axis=0)
    ratio = spread[near_empty].sum() / claimed[near_empty].sum()
    df = releases - 1
    lo, hi = chi2.ppf([0.0005, 0.9995], df) / df
    assert lo < ratio < hi, (ratio, lo, hi)
