"""The AUC's Richardson step read from the data it corrects: its own sampling error is part of
the interval's spread (`fedeval.estimate.richardson.step_variance`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata

from fedeval.estimate.interval_parts import leaf_auc_parts
from fedeval.estimate.metrics import auc_from_buckets
from fedeval.estimate.richardson import step_variance

HEIGHT, ROWS, DRAWS = 5, 2_000, 800


def test_exact_leaves_err_by_the_order_and_the_steps_sampling():
    """Binormal scores, 30% positives, 32 exact leaves (the federated release), fresh data per
    draw: the truth's distance from the corrected end of the AUC's range, over the interval's
    σ, has sd 1 (the order inside leaves and the step's sampling, independent given the
    counts). With the order's σ alone it is √(1 + ⅓) = 1.155 for leaves that halve their
    parents (the step's variance is a third of the order's). Over DRAWS = 800 draws the sd of
    z has a relative SE of 1/√(2·800) = 2.5%: the band ±0.075 is 3 SE, and the order alone
    (1.155) sits 3 SE beyond it."""
    rng = np.random.default_rng(20261127)
    z, z_order = np.empty(DRAWS), np.empty(DRAWS)
    cells = 2**HEIGHT
    for i in range(DRAWS):
        y = rng.random(ROWS) < 0.3
        s = 1.0 / (1.0 + np.exp(-rng.normal(np.where(y, 1.0, -1.0), 1.0)))
        cell = np.minimum((s * cells).astype(np.int64), cells - 1)
        leaves = np.stack(
            [np.bincount(cell[~y], minlength=cells), np.bincount(cell[y], minlength=cells)]
        ).astype(float)
        parts = leaf_auc_parts(leaves, None)
        assert parts.step_sd > 0
        assert parts.sd == pytest.approx(np.hypot(parts.order_sd, parts.step_sd), rel=1e-12)
        raw = float(auc_from_buckets(leaves[0], leaves[1]))
        corrected = parts.low if abs(parts.low - raw) > abs(parts.high - raw) else parts.high
        ranks = rankdata(s)
        p, n = int(y.sum()), int((~y).sum())
        truth = (ranks[y].sum() - p * (p + 1) / 2) / (p * n)
        z[i], z_order[i] = (truth - corrected) / parts.sd, (truth - corrected) / parts.order_sd
    assert abs(z.mean()) < 4 / np.sqrt(DRAWS), z.mean()  # the step removes the bias
    assert 0.925 <= z.std() <= 1.075, z.std()
    assert z_order.std() > 1.075, z_order.std()


def test_step_variance_is_the_binomial_split_of_each_parent():
    """Given a parent's totals, p·n_U − n·p_U has variance n²·Var(p_U) + p²·Var(n_U): drawn
    here as binomial splits of fixed parents, the variance of the step Σ(p_L n_U − p_U n_L)/
    (6PN) over 20,000 draws matches the formula's mean within 5% (the variance's relative SE
    is √(2/20,000) = 1%)."""
    rng = np.random.default_rng(7)
    p = np.array([40, 25, 10, 3, 0, 60])
    n = np.array([5, 30, 50, 80, 20, 1])
    q_pos, q_neg = (
        np.array([0.3, 0.5, 0.6, 0.5, 0.5, 0.45]),
        np.array([0.5, 0.4, 0.5, 0.7, 0.5, 0.5]),
    )
    draws = 20_000
    pl = rng.binomial(p, q_pos, size=(draws, p.size)).astype(float)
    nl = rng.binomial(n, q_neg, size=(draws, n.size)).astype(float)
    pos = np.stack([pl, p - pl], axis=-1).reshape(draws, -1)
    neg = np.stack([nl, n - nl], axis=-1).reshape(draws, -1)
    total = 6.0 * p.sum() * n.sum()
    step = ((pl * (n - nl) - (p - pl) * nl) / total).sum(axis=-1)
    predicted = step_variance(neg, pos, None, float(p.sum() * n.sum()))
    assert predicted.shape == (draws,)
    np.testing.assert_allclose(step.var(), predicted.mean(), rtol=0.05)
