"""Why precision, recall and accuracy are read from the consistent leaves at every height, not
from a coarser level of the same release."""

from __future__ import annotations

import numpy as np

from fedeval.core.hierarchy import consistent_leaves


def test_a_coarser_level_of_the_same_release_reads_no_threshold_better():
    # A count ≥ t at an edge of level f is a linear query, and the consistent leaves are the
    # least-variance linear unbiased reading of all released levels (Hay et al. 2010), so
    # reading it from level f's own measurements, or from levels 1 … f of the same release
    # made consistent alone, can only add variance: only a coarser tree (a smaller Δ under
    # distdp, more reports per level under localdp) lowers P/R/A's noise. Levels 1 … 9, one
    # variance per count (the distdp tree); 4,000 draws give each variance to 2.2%
    # (√(2/4000)), so ≤ 1.07× is 3 sds. Measured: 0.35-1.16 against 0.53-1.49 (levels 1 … 4
    # alone) and 0.99-15.1 (level 4 alone), in units of one count's variance.
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
