"""The aggregate release: summed client reports, mergeable, and its decoding to score histograms.

A `Release` is what the aggregator holds after secure aggregation: integer sums of client reports
over every released node (level k, class, cell), plus how many reports went into each level. Two
releases over disjoint clients of the same protocol add up to the release of their union, so a
`Release` can sit inside any distributed reduction (``sum(releases)`` works). Decoding (removing
the local-DP bias, constrained inference) happens once, on the complete sum.

Node layout: levels in the order of `PrivacyConfig.levels`; within a level, class 0 (negatives)
cells then class 1 (positives) cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedeval.config import PrivacyConfig, PrivacyModel
from fedeval.errors import ReleaseError
from fedeval.hierarchy import consistent_leaves


def level_offsets(config: PrivacyConfig) -> np.ndarray:
    """Start of each released level in the flat node vector, and the total length at the end."""
    sizes = [2 << k for k in config.levels]  # two classes × 2^k cells
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def example_nodes(cells: np.ndarray, labels: np.ndarray, config: PrivacyConfig) -> np.ndarray:
    """Node ids (n_examples, n_levels) that each example's one-hot report sets, one per level.

    `cells` are leaf indices at `config.height`; `labels` are 0/1.
    """
    offsets = level_offsets(config)[:-1]
    h = config.height
    cols = [
        offsets[i] + (labels.astype(np.int64) << k) + (cells >> (h - k))
        for i, k in enumerate(config.levels)
    ]
    return np.stack(cols, axis=1)


@dataclass(frozen=True, eq=False)
class Release:
    """Summed client reports of one protocol run (or of a part of its clients).

    Attributes
    ----------
    config : the privacy configuration every report was made under.
    population : the number of clients the protocol was set up for; under ``distdp`` each
        client's noise share is calibrated to it, so only the sum over all of them is private.
    counts : int64, one entry per released node (see the module docstring for the layout).
    reporters : int64, per released level, the number of example reports summed into it.
    n_clients : clients whose reports are in this sum.
    """

    config: PrivacyConfig
    population: int
    counts: np.ndarray
    reporters: np.ndarray
    n_clients: int

    def __post_init__(self) -> None:
        expected = int(level_offsets(self.config)[-1])
        if self.counts.shape != (expected,):
            raise ReleaseError(
                f"release counts must have {expected} entries for {self.config}. "
                f"Found shape {self.counts.shape}."
            )
        if self.reporters.shape != (len(self.config.levels),):
            raise ReleaseError("release reporters must hold one count per released level.")

    @classmethod
    def empty(cls, config: PrivacyConfig, population: int) -> Release:
        """The identity of `+`: no clients yet."""
        n = int(level_offsets(config)[-1])
        return cls(
            config, population, np.zeros(n, np.int64), np.zeros(len(config.levels), np.int64), 0
        )

    def __add__(self, other: Release) -> Release:
        if not isinstance(other, Release):
            return NotImplemented
        if other.config != self.config or other.population != self.population:
            raise ReleaseError(
                "cannot merge releases made under different parameters: "
                f"{self.config} (population {self.population}) and "
                f"{other.config} (population {other.population})."
            )
        return Release(
            self.config,
            self.population,
            self.counts + other.counts,
            self.reporters + other.reporters,
            self.n_clients + other.n_clients,
        )

    def __radd__(self, other: object) -> Release:
        if other == 0:  # lets builtin sum() start from 0
            return self
        return NotImplemented

    @property
    def examples(self) -> int:
        """Examples whose reports are summed in: under OUE each reports one level, otherwise
        every example reports on every level."""
        if self.config.model is PrivacyModel.LOCALDP:
            return int(self.reporters.sum())
        return int(self.reporters[0]) if len(self.reporters) else 0

    @property
    def complete(self) -> bool:
        """Whether every client of the population has reported."""
        return self.n_clients == self.population

    def level_counts(self) -> list[np.ndarray]:
        """Counts per released level, each of shape (2, 2^k): [negatives, positives]."""
        off = level_offsets(self.config)
        return [
            self.counts[off[i] : off[i + 1]].reshape(2, 1 << k)
            for i, k in enumerate(self.config.levels)
        ]

    def histogram(self) -> ScoreHistogram:
        """Decode: unbiased level estimates, then constrained inference to consistent leaves.

        Refuses an incomplete distdp release: with clients missing, the summed noise is smaller
        than the discrete Laplace the privacy claim rests on.
        """
        from fedeval.privacy import mechanism_for

        if self.config.model is PrivacyModel.DISTDP and not self.complete:
            raise ReleaseError(
                f"the release holds {self.n_clients} of {self.population} clients' reports; under "
                "distdp the noise is only complete (and ε-DP holds) once every client has reported."
            )
        measured, variances = mechanism_for(self.config.model).decode(self)
        leaves = np.stack(
            [
                consistent_leaves([m[c] for m in measured], variances, self.config.levels)
                for c in (0, 1)
            ]
        )
        return ScoreHistogram(self.config, leaves, tuple(variances), tuple(self.reporters.tolist()))


@dataclass(frozen=True, eq=False)
class ScoreHistogram:
    """Consistent, unbiased estimates of the per-class leaf counts, shape (2, 2^h).

    `leaves[0]` are negatives, `leaves[1]` positives; counts may be negative or fractional under
    noise (clamping would bias every sum over many cells, so it is left to the final metric).
    `level_variances` is the noise variance of one measured count at each released level (the
    constrained-inference weights); `reporters` the example reports summed into each level.
    """

    config: PrivacyConfig
    leaves: np.ndarray
    level_variances: tuple[float, ...]
    reporters: tuple[int, ...] = ()

    def noise_draws(self, n_draws: int, rng: np.random.Generator) -> np.ndarray | None:
        """`n_draws` fresh draws of the release's noise as it reaches the consistent leaves,
        shape (n_draws, 2, 2^h); None without noise.

        Constrained inference is linear and keeps consistent counts unchanged, so the leaves of
        (released counts + fresh noise) are these leaves + consistency(noise): adding the draws
        to `leaves` resamples the whole release (a parametric bootstrap over the known noise).
        """
        from fedeval.privacy import mechanism_for

        noise = mechanism_for(self.config.model).measurement_noise(self, n_draws, rng)
        if noise is None:
            return None
        return np.stack(
            [
                consistent_leaves(
                    [m[:, c] for m in noise], self.level_variances, self.config.levels
                )
                for c in (0, 1)
            ],
            axis=1,
        )

    @property
    def negatives(self) -> float:
        return float(self.leaves[0].sum())

    @property
    def positives(self) -> float:
        return float(self.leaves[1].sum())
