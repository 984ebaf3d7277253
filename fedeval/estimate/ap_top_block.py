"""The AP's lowest world at the release's top: negatives the noise hides among the top
positives (the mirror of `fedeval.estimate.average_precision.top_block_high`).

Post-processing of the release and fresh draws of its noise; no count of the data is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedeval.estimate.roc_pr import leaf_ap, leaf_tails
from fedeval.estimate.uncertainty import Z95, noise_sd


@dataclass(frozen=True)
class TopTails:
    """The release's tails from the top, FP_k and TP_k above the k-th edge (`leaf_tails`), with
    their noise over fresh draws: `noise` (D, 2, L) the top k leaves' sum in each class, `s_neg`
    and `s_pos` its spread. What both worlds of the top block (`top_block_low` and
    `fedeval.estimate.average_precision.top_block_high`) read; made once a release."""

    fp: np.ndarray
    tp: np.ndarray
    noise: np.ndarray
    s_neg: np.ndarray
    s_pos: np.ndarray

    @classmethod
    def of(cls, leaves: np.ndarray, draws: np.ndarray) -> TopTails:
        """From the leaves (2, L) and draws (D, 2, L) of the release's noise."""
        fp, tp = leaf_tails(leaves)
        noise = np.cumsum(draws[:, :, ::-1], axis=-1)
        return cls(fp, tp, noise, noise_sd(noise[:, 0]), noise_sd(noise[:, 1]))

    def block(self, z: float) -> int:
        """The top block: the most leaves, counted from the top, whose negatives are within
        z·s_k of none (0 where the top leaf shows negatives already)."""
        clear = self.fp[1:] > z * self.s_neg  # the release shows negatives above the k-th edge
        return int(np.argmax(clear)) if clear.any() else clear.size


def top_block_low(top: TopTails) -> float | None:
    """The AP where the release's top block holds as many negatives as its noise may hide,
    mixed with its positives: a floor for the AP interval's low end (the interval already
    holds the noise, so the floor is not widened again); None where the release shows
    negatives in its top leaf already.

    The top block: the most leaves, counted from the top, whose negatives (the fitted tail
    FP_k above the k-th edge) are within z·s_k of none (z = Z95: the one-sided 97.5% bound an
    end of a 95% interval takes; s_k the spread of the top k leaves' negatives' noise over
    the draws, `TopTails`). The world: z·s_k negatives (FP_k where the fit reads more) uniformly
    mixed with the block's TP_k positives, the leaves below as released. Its AP: the integral
    rule's. Where the fit reads about z·s_k negatives in the block already (smooth data: the
    block ends where the negatives become clear) the world is about the release; where it
    reads none (a few negatives tied with many positives, the fit clamped at 0) it is below.

    Why: where a few negatives tie with many positives at the top and the noise is as large
    as they are, the fit reads none there and every candidate, and their re-noised spread (a
    bootstrap around the release, not the truth), sits at AP ≈ 1: 709 rows, 8.5% on one score
    at 96% positives with 2–3 negatives among them, localdp ε = 5, held the AP in 0.890 of 200
    releases (distdp ε = 1: 0.915), every miss an interval above the truth
    (`benchmarks/hard.py`'s tiedtop family, found by `benchmarks/shapes.py`); 1.000 and 1.000
    with this floor. As a span end (the noise added below it again) and at z = Z90 it held as
    well, at 1.18–1.25× the AP's width on smooth scores; as a floor, 1.03–1.08×. Where the
    positives all sit above the negatives (`hard.py`'s separated family) the floor widens the
    interval 1.5–1.7×: the release cannot tell that top from one with z·s_k negatives hidden
    in it, so that width is owed.

    >>> leaves = np.array([[0.0, 0.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0]])  # positives only
    >>> draws = np.random.default_rng(0).normal(0.0, 2.0, (200, 2, 4))
    >>> ap = top_block_low(TopTails.of(leaves, draws))
    >>> 0.5 < ap < 0.9  # the hidden negatives (≈ 1.96·2·√4 ≈ 7.8) among 20 positives
    True
    """
    fp, tp, s_neg = top.fp, top.tp, top.s_neg
    k = top.block(Z95)
    if k == 0 or not tp[-1] > 0 or not np.isfinite(s_neg[k - 1]):
        return None
    hidden = max(Z95 * float(s_neg[k - 1]) - float(fp[k]), 0.0)
    fp_world = np.concatenate([[0.0], fp[k:] + hidden])
    tp_world = np.concatenate([[0.0], tp[k:]])
    return leaf_ap(fp_world, tp_world, "integral")
