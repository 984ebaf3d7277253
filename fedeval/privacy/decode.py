"""Decoding a release: each mechanism's unbiased level estimates, then constrained inference to
consistent leaves; and fresh draws of the release's noise as it reaches those leaves (intervals).

Both are post-processing of the release. The mechanism that made the release knows its own noise
(`decode`, `measurement_noise` of `fedeval.privacy.distdp`, `federated`, `localdp`); the
consistency step is the same for all (`fedeval.core.hierarchy.consistent_leaves`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedeval.core.hierarchy import class_variances, consistent_leaves
from fedeval.core.release import Release, ScoreHistogram
from fedeval.privacy.registry import model_of


def decode(release: Release) -> ScoreHistogram:
    """Decode: unbiased level estimates, then constrained inference to consistent leaves."""
    measured, variances = model_of(release.config.model).decode(release)
    leaves = _both_classes(measured, variances, release.config.levels, 0)
    reporters = () if release.reporters is None else tuple(release.reporters.tolist())
    return ScoreHistogram(
        release.config,
        leaves,
        tuple(variances),
        reporters,
        release.cohorts,
        release.probe_reports,
        None if release.probe is None else release.probe.cells.bit_length() - 1,
    )


def noise_draws(hist: ScoreHistogram, n_draws: int, rng: np.random.Generator) -> np.ndarray | None:
    """`n_draws` fresh draws of the release's noise as it reaches the consistent leaves,
    shape (n_draws, 2, 2^h); None without noise.

    Constrained inference is linear and keeps consistent counts unchanged, so the leaves of
    (released counts + fresh noise) are these leaves + consistency(noise): adding the draws
    to `leaves` resamples the whole release (a parametric bootstrap over the known noise).
    """
    noise = model_of(hist.config.model).measurement_noise(hist, n_draws, rng)
    if noise is None:
        return None
    return _both_classes(noise, hist.level_variances, hist.config.levels, 1)


def _both_classes(
    measured: Sequence[np.ndarray],
    variances: Sequence[float | np.ndarray],
    levels: Sequence[int],
    axis: int,
) -> np.ndarray:
    """Both classes' consistent leaves, the class on `axis` of each level's counts as of the
    result. Where every level has one variance for both classes (a number), in one pass over
    both: the passes are elementwise, so each class's leaves are the same, value for value, as
    a pass of its own gives, at half the passes' per-level overhead (most trees are small: a
    distdp release's 2^8 leaves, 202 → 97 µs). Per-cell variances: class by class
    (`fedeval.core.hierarchy.class_variances`)."""
    if all(np.ndim(v) == 0 for v in variances):
        return np.array(consistent_leaves(measured, variances, levels), dtype=np.float64)
    return np.stack(
        [
            consistent_leaves(
                [np.take(m, c, axis=axis) for m in measured], class_variances(variances, c), levels
            )
            for c in (0, 1)
        ],
        axis=axis,
    )
