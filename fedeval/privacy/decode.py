"""Decoding a release: each mechanism's unbiased level estimates, then constrained inference to
consistent leaves; and fresh draws of the release's noise as it reaches those leaves (intervals).

Both are post-processing of the release. The mechanism that made the release knows its own noise
(`decode`, `measurement_noise` of `fedeval.privacy.distdp`, `federated`, `localdp`); the
consistency step is the same for all (`fedeval.core.hierarchy.consistent_leaves`).
"""

from __future__ import annotations

import numpy as np

from fedeval.core.hierarchy import class_variances, consistent_leaves
from fedeval.core.release import Release, ScoreHistogram
from fedeval.privacy.registry import model_of


def decode(release: Release) -> ScoreHistogram:
    """Decode: unbiased level estimates, then constrained inference to consistent leaves."""
    measured, variances = model_of(release.config.model).decode(release)
    leaves = np.stack(
        [
            consistent_leaves(
                [m[c] for m in measured], class_variances(variances, c), release.config.levels
            )
            for c in (0, 1)
        ]
    )
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
    return np.stack(
        [
            consistent_leaves(
                [m[:, c] for m in noise],
                class_variances(hist.level_variances, c),
                hist.config.levels,
            )
            for c in (0, 1)
        ],
        axis=1,
    )
