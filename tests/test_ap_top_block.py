"""The AP interval's floor at the release's top (`fedeval.estimate.ap_top_block`): negatives
the noise can hide among many tied positives."""

from __future__ import annotations

import numpy as np
import pytest

import fedeval
from fedeval.estimate.ap_top_block import TopTails, top_block_low
from fedeval.estimate.roc_pr import leaf_ap, leaf_tails
from fedeval.estimate.uncertainty import Z95


def _tied_top() -> tuple[np.ndarray, np.ndarray]:
    """709 rows: 57 positives and 3 negatives tied on 0.967 at the top, 644 negatives near
    0.05 and 5 positives anywhere (logits N(−3.06, 0.53) and N(0.41, 1.7))."""
    rng = np.random.default_rng(20)
    y = np.repeat([True, False, False, True], [57, 3, 644, 5])
    logit = np.concatenate([rng.normal(-3.06, 0.53, 644), rng.normal(0.41, 1.7, 5)])
    s = np.concatenate([np.full(60, 0.967), 1.0 / (1.0 + np.exp(-logit))])
    return y, s


def test_the_floor_is_the_release_where_the_top_shows_its_negatives() -> None:
    # every leaf holds clear negatives: nothing hides, no floor
    leaves = np.array([[500.0, 400.0, 300.0, 200.0], [10.0, 20.0, 30.0, 40.0]])
    draws = np.random.default_rng(0).normal(0.0, 2.0, (200, 2, 4))
    assert top_block_low(TopTails.of(leaves, draws)) is None


def test_the_floor_mixes_the_negatives_the_noise_can_hide_into_the_top_block() -> None:
    # leaves from the bottom: the top two show positives only, 30 each
    leaves = np.array([[300.0, 200.0, 0.0, 0.0], [5.0, 5.0, 30.0, 30.0]])
    draws = np.random.default_rng(1).normal(0.0, 2.0, (4000, 2, 4))
    floor = top_block_low(TopTails.of(leaves, draws))
    assert floor is not None
    # The block: the top two leaves (the third's 200 negatives are clear of the noise);
    # hidden: Z95 · s_2, s_2 ≈ 2√2 the noise sd of two leaves' negatives, among 60
    # positives; the leaves below as released, each FP tail shifted by the hidden count.
    hidden = Z95 * float(np.std(draws[:, 0, 2:].sum(axis=1), ddof=1))
    fp = np.array([0.0, hidden, 200 + hidden, 500 + hidden])
    tp = np.array([0.0, 60.0, 65.0, 70.0])
    assert floor == pytest.approx(leaf_ap(fp, tp, "integral"), rel=1e-12)
    assert floor < leaf_ap(*leaf_tails(leaves), "integral")


def test_a_few_negatives_tied_with_the_top_positives_are_held_under_local_dp() -> None:
    # The release mostly shows no negative at the top and the AP estimate sits near 1; the
    # truth is 0.950. Without the floor 87 of 100 releases held it (every miss above the
    # truth): ≈ 5.2 misses expected in 40, P(≤ 1) ≈ 0.03 (6 at these seeds); with it 100 of
    # 100, so more than one miss in 40 is as unlikely.
    y, s = _tied_top()
    misses = 0
    for seed in range(40):
        ev = fedeval.evaluate(
            y, s, model="localdp", epsilon=5.0, seed=seed, thresholds=[0.1, 0.3, 0.5, 0.7, 0.9]
        )
        ap = ev.curves.average_precision
        lo, hi = ap.ci95
        misses += not lo <= ap.exact <= hi
    assert misses <= 1
