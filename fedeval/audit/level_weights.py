"""The tree's part of a distdp likelihood ratio when its ε may be split over the levels
(`fedeval.privacy.level_split`), for the two-phase audit (`scenarios.distdp_two_phase_statistic`).

Under discrete Laplace α_k on level k's counts the log-likelihood ratio of D over D′ is
Σ_k ln(1/α_k)·Λ_k, Λ_k = Σ_{i in level k} |x_i − c′_i| − |x_i − c_i| (`laplace_statistic` per
level). The split's rule gives every level ≤ f one α and every finer level another, so the
ratio is w_c·Λ_coarse + w_f·Λ_fine with two weights; the even tree is the same with w_c = w_f
(and f = 0: no coarse part). The weights are the claim's (ε_k/Δ_k from the stated shares),
never the mechanism's own α's: the auditor tests what is claimed against what is drawn, and
also scans each group weighed as if it had the whole ε_tree (`scenarios._two_phase_bound`), so
a group noised for more ε than the claim charges it shows where the claim's weights would
hide it."""

from __future__ import annotations

import math

import numpy as np

from fedeval.core.config import PrivacyConfig
from fedeval.core.release import level_offsets
from fedeval.privacy import distdp, level_split
from fedeval.privacy.mechanism import Mechanism


def claimed_weights(cfg: PrivacyConfig) -> tuple[np.ndarray, float, float]:
    """(which entries of the node vector are levels ≤ `cfg.split_level`, the claim's
    ln(1/α) of those levels' counts, of the finer levels'): ln(1/α) of every count for the
    even tree, ε_k/Δ_k (= ln(1/α_k)) of each group under a split."""
    off = level_offsets(cfg)
    coarse = np.zeros(int(off[-1]), bool)
    for i, k in enumerate(cfg.levels):
        coarse[off[i] : off[i + 1]] = k <= cfg.split_level
    if not cfg.level_split:
        alpha = Mechanism(cfg).alpha
        assert alpha is not None
        w = -math.log(alpha)
        return coarse, w, w
    sens = level_split.level_sensitivity(cfg)
    eps = level_split.level_epsilons(cfg, distdp.tree_epsilon(cfg))
    by_group = {
        side: {
            e / sens for e, k in zip(eps, cfg.levels, strict=True) if (k <= cfg.split_level) == side
        }
        for side in (True, False)
    }
    if any(len(w) != 1 for w in by_group.values()):
        raise AssertionError(f"a split whose levels of one side differ: {eps}")
    return coarse, by_group[True].pop(), by_group[False].pop()


def group_statistic(
    x: np.ndarray,
    c: np.ndarray,
    c_prime: np.ndarray,
    weights: tuple[np.ndarray, float, float],
) -> tuple[float, float]:
    """(w_c·Λ_coarse, w_f·Λ_fine) of one released node vector `x` (exact counts c on D, c′ on
    D′): the tree's log-likelihood ratio of D over D′ is their sum (module docstring)."""
    coarse, w_coarse, w_fine = weights
    d = np.abs(np.asarray(x, np.int64) - c_prime) - np.abs(np.asarray(x, np.int64) - c)
    return w_coarse * float(d[coarse].sum()), w_fine * float(d[~coarse].sum())


def split_statistics(
    on_d: np.ndarray, on_dp: np.ndarray, cfg: PrivacyConfig
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The tree's statistics the audit scans beside the claim's sum, for a release whose
    configuration splits ε (none for the even tree): each group alone (w·Λ_coarse, w·Λ_fine:
    columns 1 and 2 of `on_d` and `on_dp`, the two-phase statistic's parts), and the sum with
    one group weighed as if it had the whole ε_tree (×1/s the levels ≤ f, ×1/(1 − s) the
    finer ones): a group noised for more ε than it is charged leaks by more than its claimed
    weight says, and only a statistic that weighs it by what it leaks shows it."""
    if not cfg.split_share:
        return []
    s = cfg.split_share
    return [
        (on_d[:, 1], on_dp[:, 1]),
        (on_d[:, 2], on_dp[:, 2]),
        (on_d[:, 1] / s + on_d[:, 2], on_dp[:, 1] / s + on_dp[:, 2]),
        (on_d[:, 1] + on_d[:, 2] / (1 - s), on_dp[:, 1] + on_dp[:, 2] / (1 - s)),
    ]
