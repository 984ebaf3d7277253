"""Pairwise masks: they cancel in the cohort's sum, hide a single report, and recover dropouts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedeval import secagg


def all_masks(key, n, k, length, batch=7):
    """Every client's mask, computed in uneven batches as encode does."""
    return np.concatenate(
        [secagg.cohort_masks(key, a, min(a + batch, n), n, k, length) for a in range(0, n, batch)]
    )


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 301])
def test_masks_cancel_in_the_cohort_sum(n):
    key = secagg.round_key(np.random.default_rng(n))
    k = secagg.neighbours_per_side(n)
    masks = all_masks(key, n, k, 9)
    assert not masks.sum(axis=0, dtype=np.uint32).any()
    if n > 1:  # and each client's own mask is not zero
        assert masks.any(axis=1).all()


def test_neighbours_per_side_is_log_n_and_capped():
    assert secagg.neighbours_per_side(1) == 0
    assert secagg.neighbours_per_side(2) == 1
    assert secagg.neighbours_per_side(1000) == 10
    assert secagg.neighbours_per_side(1 << 20) == 20
    assert secagg.neighbours_per_side(5, requested=10) == 4


def test_pair_seeds_are_ordered_and_keyed():
    rng = np.random.default_rng(0)
    key, other = secagg.round_key(rng), secagg.round_key(rng)
    a, b = np.array([3]), np.array([8])
    assert secagg.pair_seeds(key, a, b)[0] != secagg.pair_seeds(key, b, a)[0]
    assert secagg.pair_seeds(key, a, b)[0] != secagg.pair_seeds(other, a, b)[0]
    assert secagg.pair_seeds(key, a, b)[0] == secagg.pair_seeds(key.copy(), a, b)[0]


def _chi2_uniform_p(words: np.ndarray) -> float:
    """χ² goodness of fit of 32-bit words to uniform, on their top 4 and bottom 4 bits."""
    ps = []
    for nibble in (words >> 28, words & 15):
        observed = np.bincount(nibble.astype(np.int64), minlength=16)
        ps.append(stats.chisquare(observed).pvalue)
    return min(ps)


def test_a_single_masked_report_is_uniform():
    # One client's masked report over 4,000 independent rounds (fresh round keys): whatever its
    # counts, each entry must be uniform on Z_2^32. χ² on 16 bins (15 df) with 4,000 × 8 words;
    # a Bonferroni level of 0.001/2 on two nibbles keeps a fixed-seed false alarm unlikely.
    rng = np.random.default_rng(11)
    n, length, rounds = 50, 8, 4000
    counts = np.array([0, 1, 2, 3, 50, 0, 7, 1], np.uint32)  # a client's real report
    words = np.empty((rounds, length), np.uint32)
    for r in range(rounds):
        key = secagg.round_key(rng)
        words[r] = counts + secagg.cohort_masks(key, 0, 1, n, secagg.neighbours_per_side(n), length)
    assert _chi2_uniform_p(words.ravel()) > 0.001
    # The same test has power: the unmasked counts are nowhere near uniform.
    assert _chi2_uniform_p(np.tile(counts, rounds)) < 1e-10
    # And two clients with different counts are indistinguishable (two-sample KS on the words).
    other = np.empty_like(words)
    for r in range(rounds):
        key = secagg.round_key(rng)
        other[r] = secagg.cohort_masks(key, 0, 1, n, secagg.neighbours_per_side(n), length)
    assert stats.ks_2samp(words.ravel(), other.ravel()).pvalue > 0.001


def test_broken_pairs_are_exactly_the_pairs_with_one_end_missing():
    n, k = 23, 3
    missing = np.array([0, 4, 5, 22])
    first, second = secagg.broken_pairs(missing, n, k)
    miss = set(missing.tolist())
    expected = sorted(
        (a, (a + d) % n)
        for a in range(n)
        for d in range(1, k + 1)
        if (a in miss) != ((a + d) % n in miss)
    )
    assert list(zip(first.tolist(), second.tolist(), strict=True)) == expected


@pytest.mark.parametrize("n,dropped", [(40, [3]), (40, [0, 1, 2, 39]), (9, [4, 5]), (2, [1])])
def test_recovery_removes_the_masks_of_dropped_clients(n, dropped):
    rng = np.random.default_rng(n + len(dropped))
    key = secagg.round_key(rng)
    k = secagg.neighbours_per_side(n)
    length = 5
    values = rng.integers(0, 1000, size=(n, length)).astype(np.uint32)
    masked = values + all_masks(key, n, k, length)
    miss = np.zeros(n, bool)
    miss[dropped] = True
    survivors_sum = masked[~miss].sum(axis=0, dtype=np.uint32)
    assert not np.array_equal(survivors_sum, values[~miss].sum(axis=0, dtype=np.uint32))
    first, second = secagg.broken_pairs(np.array(dropped), n, k)
    seeds = secagg.pair_seeds(key, first, second)
    fixed = survivors_sum + secagg.recovery_correction(first, second, seeds, miss, length)
    np.testing.assert_array_equal(fixed, values[~miss].sum(axis=0, dtype=np.uint32))
