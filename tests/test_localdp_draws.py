"""The localdp interval draws have the spread the release really has: cell by cell, and over
ranges of cells that the consistency step answers by combining levels."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from fedeval.privacy.decode import noise_draws
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays

RELEASES = 500
DRAWS = 10


@pytest.fixture(scope="module")
def spread_and_claim() -> dict[str, tuple[float, float]]:
    return measure()


def measure() -> dict[str, tuple[float, float]]:
    """(Σ empirical variance over the releases, Σ the draws' variance averaged over them) of
    the near-empty cells, of the positives' lowest range and of the negatives' top range.

    1,000 rows, h = 8, ε = 5: most of the 512 cells hold 0–3 examples, and the consistency step
    answers a range of them from every level. The draws' variance of each release is unbiased
    (ddof = 1) and averaged over the releases, so its own noise (≈ 3% a cell, DRAWS = 10) is
    small beside the spread's."""
    rng = np.random.default_rng(7)
    n = 1000
    y = (rng.random(n) < 0.3).astype(int)
    s = np.where(y == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))
    data = scored_from_arrays(y, s, keep_scores=False)
    truth = np.stack([np.histogram(s[y == c], bins=256, range=(0, 1))[0] for c in (0, 1)])
    near_empty = truth <= 3
    low = int(np.argmax(np.cumsum(truth[1]) > 3))  # the positives below: at most 3 in all
    top = int((np.cumsum(truth[0][::-1]) <= 3).sum())  # the negatives above: at most 3
    assert near_empty.sum() > 200 and low > 40 and top > 30
    leaves, cells, ranges, range_var = [], [], [], []
    for r in range(RELEASES):
        run = simulate(data, model="localdp", epsilon=5.0, height=8, seed=r, ci_draws=0)
        draws = noise_draws(run.histogram, DRAWS, np.random.default_rng([r, 1]))
        assert draws is not None
        x = run.histogram.leaves
        leaves.append(x)
        cells.append(draws.var(axis=0, ddof=1))
        ranges.append((x[1, :low].sum(), x[0, -top:].sum()))
        sums = np.stack([draws[:, 1, :low].sum(-1), draws[:, 0, -top:].sum(-1)], axis=-1)
        range_var.append(sums.var(axis=0, ddof=1))
    spread = np.var(np.asarray(leaves), axis=0, ddof=1)
    claimed = np.mean(np.asarray(cells), axis=0)
    return {
        "cells": (spread[near_empty].sum(), claimed[near_empty].sum()),
        "ranges": (
            np.var(np.asarray(ranges), axis=0, ddof=1).sum(),
            np.mean(np.asarray(range_var), axis=0).sum(),
        ),
    }


def _bounds() -> tuple[float, float]:
    # The empirical variance of a normal quantity over R releases is σ² χ²_{R-1}/(R-1) (a
    # decoded count is a rescaled sum of many independent bits: close to normal). A ratio
    # Σs² / Σσ̂² over several quantities is a weighted mean of such ratios, so whatever their
    # correlation its spread is at most a single one's: the χ²_{R-1} quantiles at α = 0.001
    # (two-sided) bound it, ≈ [0.81, 1.22] at R = 500.
    df = RELEASES - 1
    lo, hi = chi2.ppf([0.0005, 0.9995], df) / df
    return float(lo), float(hi)


@pytest.mark.slow
def test_localdp_draws_of_near_empty_cells_have_the_releases_spread(spread_and_claim):
    # Draws whose count-dependent variance was taken at the leaves clamped at 0 (which keeps
    # the positive half of an empty cell's noise) are too wide here.
    spread, claimed = spread_and_claim["cells"]
    lo, hi = _bounds()
    assert lo < spread / claimed < hi, (float(spread / claimed), lo, hi)


@pytest.mark.slow
def test_localdp_draws_of_near_empty_ranges_have_the_releases_spread(spread_and_claim):
    # A sum of many near-empty cells (the positives' lowest 40-odd, the negatives' top 30-odd
    # of 256 leaves) combines every level. Its sampling part must be drawn at counts whose
    # range sums are the release's: at the leaves clamped at 0, thousands of phantom examples
    # in a coarse cell covary by −c between levels, where the release's empty cells carry
    # independent OUE noise only, and the draws' spread of the range is 1.4× short in variance
    # (and 2× too wide when each cell's variance is also taken at the clamped leaves).
    spread, claimed = spread_and_claim["ranges"]
    lo, hi = _bounds()
    assert lo < spread / claimed < hi, (float(spread / claimed), lo, hi)
