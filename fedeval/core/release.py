"""The aggregate release: summed client reports, mergeable, and the score histograms it decodes to.

A `Release` is what the aggregator holds after secure aggregation: integer sums of client reports
over every released node (level k, class, cell), plus how many reports went into each level. Two
releases over disjoint clients of the same protocol add up to the release of their union, so a
`Release` can sit inside any distributed reduction (``sum(releases)`` works). Decoding (removing
the local-DP bias, constrained inference) happens once, on the complete sum, in
`fedeval.privacy.decode` (each mechanism knows its own noise).

Node layout: levels in the order of `PrivacyConfig.levels`; within a level, class 0 (negatives)
cells then class 1 (positives) cells.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from fedeval.core.config import PrivacyConfig, PrivacyModel, Unit
from fedeval.core.errors import ReleaseError

_Summed = TypeVar("_Summed", np.ndarray, int)


def level_offsets(config: PrivacyConfig) -> np.ndarray:
    """Start of each released level in the flat node vector, and the total length at the end."""
    sizes = [2 << k for k in config.levels]  # two classes × 2^k cells
    return np.array([0, *itertools.accumulate(sizes)], dtype=np.int64)


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


def level_totals(counts: np.ndarray, config: PrivacyConfig) -> np.ndarray:
    """Each released level's counts summed: without noise, the examples per level (every
    example reports on every level, so the count needs no report field of its own)."""
    return np.add.reduceat(counts.astype(np.int64), level_offsets(config)[:-1])


@dataclass(frozen=True, eq=False)
class Probe:
    """Round 1 of a two-phase release (`fedeval.privacy.probe`): the noisy per-class histogram
    that chose the height, as released.

    `counts` are 2·C counts, the negatives' C cells then the positives' (C = 2^k cells of the
    score axis, k the probe level; C = 1 is the two class totals of releases made before the
    probe held a histogram): exact counts plus discrete Laplace (distdp), or the sums of the
    probe reports' 2·C OUE bits (localdp); `reports` is the number of probe reports under
    localdp (public, as every report count is there), None under distdp."""

    counts: np.ndarray
    reports: int | None = None

    def __post_init__(self) -> None:
        counts = np.asarray(self.counts)
        cells = counts.size // 2
        if (
            counts.ndim != 1
            or counts.size < 2
            or counts.size % 2
            or cells & (cells - 1)
            or counts.dtype.kind not in "iu"
        ):
            raise ReleaseError(
                "a probe holds 2·2^k integer counts (the two classes' cells). "
                f"Found {self.counts!r}."
            )
        object.__setattr__(self, "counts", counts.astype(np.int64))
        r = self.reports
        if r is not None and (isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 0):
            raise ReleaseError(f"a probe's reports must be a count ≥ 0. Found {r!r}.")
        if r is not None:
            object.__setattr__(self, "reports", int(r))

    @property
    def cells(self) -> int:
        """C, the probe's cells per class (1: class totals only)."""
        return self.counts.size // 2

    @property
    def histogram(self) -> np.ndarray:
        """The counts as (2, C): row 0 the negatives', row 1 the positives'."""
        return self.counts.reshape(2, self.cells)

    def same(self, other: Probe | None) -> bool:
        return (
            other is not None
            and np.array_equal(self.counts, other.counts)
            and self.reports == other.reports
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"counts": self.counts.tolist()}
        if self.reports is not None:
            out["reports"] = self.reports
        return out


@dataclass(frozen=True, eq=False)
class Release:
    """Summed client reports of one protocol run: one or more cohorts' unmasked sums.

    Attributes
    ----------
    config : the privacy configuration every report was made under.
    counts : int64, one entry per released node (see the module docstring for the layout).
    reporters : int64, per released level, the number of reports summed into it, where that
        number is known and public: exact under federated, the (public) number of OUE reports
        under localdp; None under distdp, where no exact count is released.
    n_clients : clients whose reports are in the sum, where public (None otherwise).
    cohorts : secure sums (cohorts) added together; under distdp each carries its own full
        discrete Laplace noise, so the noise variance of a count is `cohorts` times one.
    seeded : the noise came from a user-given seed (a reproducible simulation, not private).
    probe : the probe round that chose the height (a two-phase release, `config.probed`), else
        None. Cohorts of one run share it.
    """

    config: PrivacyConfig
    counts: np.ndarray
    reporters: np.ndarray | None
    n_clients: int | None
    cohorts: int = 1
    seeded: bool = False
    probe: Probe | None = None

    def __post_init__(self) -> None:
        expected = sum(2 << k for k in self.config.levels)  # level_offsets(config)[-1]
        if self.counts.shape != (expected,):
            raise ReleaseError(
                f"release counts must have {expected} entries for {self.config}. "
                f"Found shape {self.counts.shape}."
            )
        if self.reporters is not None and self.reporters.shape != (len(self.config.levels),):
            raise ReleaseError("release reporters must hold one count per released level.")
        if isinstance(self.cohorts, bool) or not isinstance(self.cohorts, int) or self.cohorts < 1:
            raise ReleaseError(f"a release sums at least one cohort. Found {self.cohorts!r}.")
        if self.config.probed != (self.probe is not None):
            raise ReleaseError(
                "a two-phase release (probe_share > 0) carries its probe, and only it does."
            )
        if self.probe is not None and (self.probe.reports is None) != (
            self.config.model is not PrivacyModel.LOCALDP
        ):
            raise ReleaseError("a probe counts its reports under localdp, and only there.")

    @classmethod
    def of_cohort(
        cls,
        config: PrivacyConfig,
        counts: np.ndarray,
        reporters: np.ndarray | None,
        n_clients: int,
        probe: Probe | None = None,
        *,
        clients_public: bool,
    ) -> Release:
        """The release of one cohort's summed reports, keeping only the exact counts the
        mechanism may publish: the reports per level under localdp (public under replace),
        every total without DP (taken from the counts themselves), nothing exact under distdp;
        the number of clients only where it is public (`clients_public`, as the mechanism's
        claim states it: `fedeval.privacy.mechanism.Mechanism.clients_public`)."""
        match config.model:
            case PrivacyModel.FEDERATED:
                reporters = level_totals(counts, config)
            case PrivacyModel.DISTDP:
                reporters = None
        kept = n_clients if clients_public else None
        return cls(config, counts, reporters, kept, 1, False, probe)

    def __add__(self, other: Release) -> Release:
        """Merge the releases of disjoint cohorts of one protocol run."""
        if not isinstance(other, Release):
            return NotImplemented
        if other.config != self.config:
            raise ReleaseError(
                "cannot merge releases made under different parameters: "
                f"{self.config} and {other.config}."
            )

        if self.probe is not None and not self.probe.same(other.probe):
            raise ReleaseError("cannot merge releases whose heights were chosen by other probes.")

        def both(a: _Summed | None, b: _Summed | None) -> _Summed | None:
            return None if a is None or b is None else a + b

        return Release(
            self.config,
            self.counts + other.counts,
            both(self.reporters, other.reporters),
            both(self.n_clients, other.n_clients),
            self.cohorts + other.cohorts,
            self.seeded or other.seeded,
            self.probe,
        )

    def __radd__(self, other: object) -> Release:
        if other == 0:  # lets builtin sum() start from 0
            return self
        return NotImplemented

    @property
    def examples(self) -> int | None:
        """Examples whose reports are summed in, where that count is exact and public: under
        federated every example reports on every level; under localdp with unit example each
        sends one report. None where it is not released (distdp; localdp unit client, whose
        reports include empty padding)."""
        if self.reporters is None:
            return None
        if self.config.model is PrivacyModel.LOCALDP:
            if self.config.unit is Unit.CLIENT:
                return None
            return self.total_reports
        return int(self.reporters[0]) if len(self.reporters) else 0

    @property
    def probe_reports(self) -> int:
        """Reports the probe round took (localdp), else 0."""
        return 0 if self.probe is None or self.probe.reports is None else self.probe.reports

    @property
    def total_reports(self) -> int:
        """Every report summed in (localdp): the tree's and the probe's."""
        return (0 if self.reporters is None else int(self.reporters.sum())) + self.probe_reports

    def level_counts(self) -> list[np.ndarray]:
        """Counts per released level, each of shape (2, 2^k): [negatives, positives]."""
        off = level_offsets(self.config)
        return [
            self.counts[off[i] : off[i + 1]].reshape(2, 1 << k)
            for i, k in enumerate(self.config.levels)
        ]


@dataclass(frozen=True, eq=False)
class ScoreHistogram:
    """Consistent, unbiased estimates of the per-class leaf counts, shape (2, 2^h).

    `leaves[0]` are negatives, `leaves[1]` positives; counts may be negative or fractional under
    noise (clamping would bias every sum over many cells, so it is left to the final metric).
    `level_variances` is the noise variance of one measured count at each released level, or of
    each of its cells, (2, 2^k) (the constrained-inference weights); `reporters` the example
    reports summed into each level; `probe_reports` those the probe round took (localdp), over
    the cells of level `probe_level`.
    """

    config: PrivacyConfig
    leaves: np.ndarray
    level_variances: tuple[float | np.ndarray, ...]
    reporters: tuple[int, ...] = ()
    cohorts: int = 1
    probe_reports: int = 0
    probe_level: int | None = None
    """k of the probe's 2^k cells per class (a two-phase release), else None."""

    @property
    def total_reports(self) -> int:
        """Every report of the run (localdp): the levels' and the probe's."""
        return sum(self.reporters) + self.probe_reports

    @cached_property
    def negatives(self) -> float:
        """The negatives' estimated total (summed once: estimators ask for it many times)."""
        return float(self.leaves[0].sum())

    @cached_property
    def positives(self) -> float:
        """The positives' estimated total (summed once)."""
        return float(self.leaves[1].sum())
