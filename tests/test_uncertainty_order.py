"""The AP interval from exact leaves (federated): the spread of the order inside the leaves."""

from __future__ import annotations

import numpy as np
import pytest
from families import family_scores
from sklearn.metrics import average_precision_score

from fedeval.estimate.ap_order import shuffled_ap
from fedeval.estimate.average_precision import leaf_ap_interval_parts
from fedeval.estimate.roc_pr import leaf_ap, leaf_tails, within_leaf_bounds

# (negatives, positives) per leaf, lowest leaf first: a top leaf of 3 positives among 60
# negatives (where a first-order variance is off several-fold), mixed leaves below, a pure one.
LEAVES = np.array(
    [
        [40, 25, 30, 12, 8, 0, 9, 60],
        [3, 6, 14, 20, 9, 7, 30, 3],
    ],
    dtype=float,
)


def permuted_aps(leaves: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """AP of `draws` rankings, each with the examples of every leaf in a random order (a slow,
    obviously correct oracle)."""
    neg, pos = leaves.astype(np.int64)
    labels = np.concatenate([np.r_[np.ones(p), np.zeros(n)] for n, p in zip(neg, pos, strict=True)])
    leaf = np.repeat(np.arange(leaves.shape[1]), neg + pos)
    keys = -leaf + rng.random((draws, leaf.size))  # top leaf first, random order inside
    ranked = labels[np.argsort(keys, axis=1)]
    tp = np.cumsum(ranked, axis=1)
    precision = tp / np.arange(1, leaf.size + 1)
    return np.sum(ranked * precision, axis=1) / pos.sum()


def test_random_order_moments_match_permutation_draws():
    # 40,000 permutations: the mean is known to ±4·sd/200 and the sd to about ±1.5% (its
    # relative standard error is ≈ √((κ − 1)/(4D)) ≤ 0.4% for kurtosis κ ≤ 7; 4 of those).
    rng = np.random.default_rng(3)
    aps = permuted_aps(LEAVES, 40_000, rng)
    mean, sd = shuffled_ap(LEAVES)
    assert abs(aps.mean() - mean) <= 4 * aps.std() / np.sqrt(aps.size)
    assert sd == pytest.approx(aps.std(), rel=0.015)


def test_random_order_sd_is_zero_for_pure_leaves_and_the_mean_is_the_exact_ap():
    leaves = np.array([[5, 0, 7, 0], [0, 4, 0, 3]], dtype=float)  # every leaf one class
    y = np.r_[np.zeros(5), np.ones(4), np.zeros(7), np.ones(3)]
    s = np.repeat([0.1, 0.3, 0.6, 0.9], [5, 4, 7, 3]) + 1e-3 * np.arange(19)  # distinct
    mean, sd = shuffled_ap(leaves)
    assert sd == 0.0
    assert mean == pytest.approx(average_precision_score(y, s), abs=1e-12)


def test_closed_form_order_variance_far_below_the_top_matches_the_sum_over_positions(monkeypatch):
    # Leaves of up to ~120 examples far below the top: the closed form against the first-order
    # sum over every position (ORDER_NODES raised so that no quadrature is used). The weights'
    # curvature over a leaf is O(ORDER_LINEAR_BELOW) = 1%, so the spread agrees to ~1e-4; 1e-3
    # fails for a step read at the leaf's top or an (m² − 1)/12 off by one position.
    from fedeval.estimate import ap_order as curves

    rng = np.random.default_rng(5)
    leaves, _ = draw_leaves("smooth", 300_000, 12, rng)
    p, n, a, b = curves._leaf_sums(leaves)
    m, c, r = p + n, a + b, curves.ORDER_LINEAR_BELOW
    far = (a >= curves.ORDER_EXACT_ABOVE) & (m <= r * c) & (p <= r * a) & (p > 0) & (n > 0)
    assert far.sum() > 1000
    monkeypatch.setattr(curves, "ORDER_NODES", 4096)
    terms = curves.OrderTerms(a, c, p, m).at(far)
    summed = curves._first_order_variance(terms)
    closed = curves._linear_order_variance(terms)
    assert closed.sum() == pytest.approx(summed.sum(), rel=1e-3)
    assert np.allclose(closed, summed, rtol=5e-3, atol=0)


def draw_leaves(family: str, n: int, height: int, rng: np.random.Generator):
    """(leaves (2, 2^h), exact AP) of one data draw."""
    y, s = family_scores(family, n, rng)
    cells = 1 << height
    leaf = np.minimum((s * cells).astype(np.int64), cells - 1)
    leaves = np.stack(
        [np.bincount(leaf[~y], minlength=cells), np.bincount(leaf[y], minlength=cells)]
    )
    return leaves.astype(float), average_precision_score(y, s)


def federated_coverage(family: str, n: int, height: int, draws: int, seed: int):
    """(hits, median width over the within-leaf hull's) of the exact-leaves AP interval over
    independent data draws."""
    rng = np.random.default_rng(seed)
    hits, ratio = 0, []
    for _ in range(draws):
        leaves, exact = draw_leaves(family, n, height, rng)
        estimate = leaf_ap(*leaf_tails(leaves), "integral")
        _, _, ap_lo, ap_hi = within_leaf_bounds(leaves)
        (lo, hi), _ = leaf_ap_interval_parts(leaves, estimate, (ap_lo, ap_hi), None)
        hits += lo <= exact <= hi
        ratio.append((hi - lo) / (ap_hi - ap_lo))
    return hits, float(np.median(ratio))


@pytest.mark.slow
@pytest.mark.parametrize(
    "family, n, height", [("smooth", 20_000, 12), ("smooth", 20_000, 6), ("rare", 50_000, 12)]
)
def test_exact_leaves_ap_interval_covers_at_its_level(family, n, height):
    # Over 200 data draws a calibrated 95% interval holds the AP in Binomial(200, 0.95) of them:
    # P(≤ 180) ≈ 0.001 and P(≥ 199) ≈ 4e-4. The within-leaf hull it replaces holds it in all
    # 200 (measured 0.935–0.965 here; hard.py's families likewise), and is 7–16× wider.
    hits, width = federated_coverage(family, n, height, 200, seed=5)
    assert 181 <= hits <= 198, hits
    assert width < 0.25, width


def test_exact_leaves_ap_interval_holds_tied_point_masses():
    # Point masses: the AP of tied scores sits ~12σ of the order's spread below the random-order
    # mean; the tie candidates keep it in (covering every draw: the leaves cannot tell a tie
    # from a narrow peak in random order, so one of the two must be over-covered).
    hits, width = federated_coverage("pointmass", 20_000, 10, 60, seed=6)
    assert hits == 60
    assert width < 0.5, width


@pytest.mark.slow
def test_exact_leaves_ap_estimate_is_the_random_order_mean():
    # Over 200 draws of smooth scores at ~5 examples per leaf, (exact − estimate)/σ has mean 0
    # and sd 1 under the random-order model: the mean of 200 is within ±0.3 and the sd within
    # ±0.2 (4 standard errors; measured −0.06 and 0.97). The integral rule (a continuous mix)
    # sits 3.5σ below the truth here (9–25σ in benchmarks/hard.py at h = 16).
    rng = np.random.default_rng(8)
    z, z_integral = [], []
    for _ in range(200):
        leaves, exact = draw_leaves("smooth", 20_000, 12, rng)
        mean, sd = shuffled_ap(leaves)
        z.append((exact - mean) / sd)
        z_integral.append((exact - leaf_ap(*leaf_tails(leaves), "integral")) / sd)
    assert abs(np.mean(z)) <= 0.3, np.mean(z)
    assert 0.8 <= np.std(z) <= 1.2, np.std(z)
    assert np.mean(z_integral) > 2, np.mean(z_integral)


def test_federated_curves_report_the_random_order_mean():
    from fedeval.api.curves import roc_pr_curves

    rng = np.random.default_rng(9)
    y = rng.random(20_000) < 0.3
    s = np.where(y, rng.beta(4, 2, y.size), rng.beta(2, 4, y.size))
    res = roc_pr_curves(y.astype(int), s, model="federated", quantiles=100)
    leaves = res.run.histogram.leaves
    assert res.average_precision.estimate == pytest.approx(shuffled_ap(leaves)[0], abs=1e-12)
    lo, hi = res.average_precision.ci95
    assert lo <= res.average_precision.estimate <= hi


def test_exact_leaves_interval_takes_the_callers_random_order_mean():
    # The curves pass the random-order mean they already computed as the AP on exact counts:
    # the same interval as computing it again, and it is that mean which the interval uses.
    from fedeval.estimate.ap_order import shuffled_ap_mean

    leaves, _ = draw_leaves("smooth", 20_000, 10, np.random.default_rng(4))
    mean = shuffled_ap_mean(leaves)
    hull = within_leaf_bounds(leaves)[2:]
    again = leaf_ap_interval_parts(leaves, mean, hull, None)[0]
    assert leaf_ap_interval_parts(leaves, mean, hull, None, shuffled_mean=mean)[0] == again
    moved = leaf_ap_interval_parts(leaves, mean, hull, None, shuffled_mean=mean - 0.01)[0]
    assert moved != again
