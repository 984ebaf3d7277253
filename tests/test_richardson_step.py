"""The AUC's Richardson step read from the data it corrects: its own sampling error is part of
the interval's spread (`fedeval.estimate.richardson.step_variance`), and where the step is
still far from its rate the Romberg step is the range's far end (`romberg_step`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm, rankdata

from fedeval.core.axis import threshold_axis
from fedeval.estimate import interval_parts
from fedeval.estimate.interval_parts import leaf_auc_parts
from fedeval.estimate.richardson import richardson_shares, step_variance
from fedeval.estimate.smoothness import RICHARDSON_MIN_CELLS, auc_parts, departures

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
        raw, bias, _, _ = auc_parts(leaves, departures(leaves, None, None, RICHARDSON_MIN_CELLS))
        corrected = float(raw - bias)
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


SQUEEZED = (0.47, 0.49, 0.5, 0.51, 0.53)


def _population_leaves(
    rows: float, height: int, thresholds: tuple[float, ...], lo: float, width: float
) -> tuple[np.ndarray, np.ndarray]:
    """(leaves (2, 2^height), edges) of the expected counts of `rows` binormal scores (logits
    N(±1, 1), 30% positives) mapped into [lo, lo + width], on the axis the thresholds warp: a
    release of data whose AUC is the population's, Φ(√2) (the map is monotone), with no
    sampling error in the Richardson or Romberg steps."""
    edges = np.asarray(threshold_axis((0.0, 1.0), thresholds).leaf_edges(2**height))
    u = np.clip((edges - lo) / width, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        logit = np.log(u) - np.log1p(-u)
    counts = [
        rows * share * np.diff(norm.cdf(logit - mu)) for share, mu in ((0.7, -1.0), (0.3, 1.0))
    ]
    return np.stack(counts), edges


def _without_romberg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        interval_parts, "_romberg", lambda leaves, *_: np.zeros(np.shape(leaves)[:-2])
    )


def test_a_step_far_from_its_rate_reaches_to_the_romberg_end(monkeypatch: pytest.MonkeyPatch):
    """Scores squeezed into [0.45, 0.55] with thresholds 0.47 … 0.53, 256 leaves (h = 8): the
    data sit in a few dozen leaves, and the Richardson-corrected AUC R₁ still errs by 1.9e-5
    (its error falls 26-fold from h = 7, not 16-fold), 6.5σ of a 10M-row release's order
    spread (2.9e-6). The Romberg end R₁ + (R₁(h) − R₁(h−1))/15 overshoots by 1.3e-5, so the
    range [raw, R₂] holds the truth; without it the interval misses (its far end 5.6e-6 short:
    the data behind `benchmarks/hard.py --families squeezed --models federated --height 8`,
    0.850 of 400 draws at 100k rows). Expected counts: no randomness to tune against."""
    truth = float(norm.cdf(np.sqrt(2.0)))
    leaves, edges = _population_leaves(1e7, 8, SQUEEZED, 0.45, 0.1)
    lo, hi = leaf_auc_parts(leaves, None, edges).interval()
    assert lo <= truth <= hi, (lo - truth, hi - truth)
    _without_romberg(monkeypatch)
    lo, hi = leaf_auc_parts(leaves, None, edges).interval()
    assert hi < truth, hi - truth


def test_a_step_at_its_rate_moves_nothing(monkeypatch: pytest.MonkeyPatch):
    """The same scores over the whole [0, 1] axis (no thresholds), where 256 leaves read the
    density smooth: R₁(h) − R₁(h−1) is the O(w⁴) remainder (2e-10 here), and the interval is
    the same to 1e-4 of its width as without the Romberg end."""
    truth = float(norm.cdf(np.sqrt(2.0)))
    leaves, edges = _population_leaves(1e7, 8, (), 0.0, 1.0)
    shares, coarse = richardson_shares(edges), richardson_shares(edges[::2])
    departing = departures(leaves, None, edges, RICHARDSON_MIN_CELLS)
    parts = leaf_auc_parts(leaves, None, edges)
    step = float(interval_parts._romberg(leaves, departing, shares, coarse))
    assert abs(step) < 1e-3 * parts.sd
    lo, hi = parts.interval()
    assert lo <= truth <= hi
    _without_romberg(monkeypatch)
    old_lo, old_hi = leaf_auc_parts(leaves, None, edges).interval()
    assert hi - lo == pytest.approx(old_hi - old_lo, rel=1e-4)
