"""What a privacy model of the binary release is: the `ReleaseModel` protocol.

A model is one module of `fedeval.privacy` (`federated`, `distdp`, `localdp`) that carries
everything that depends on it: the pipeline's four steps (the fast draw of a cohort's sum, the
per-client encoder, the decoder and the fresh noise of the intervals), the numbers its claim is
made of (sensitivity, ε of the tree and of the probe) and the claim's model-specific parts (the
noise's parameters, the DP event, the guarantee in words, what the server learns). The module
itself is the implementation (mypy checks it against this protocol where
`fedeval.privacy.registry` lists it); `fedeval.privacy.mechanism.Mechanism` holds what every
model shares and asks the model for the rest, so nothing outside the model's module branches
on it.

The multiclass calibration's Gaussian mechanism (`fedeval.privacy.gaussian`) releases other
statistics (clipped client updates), so it does not draw a histogram; it states its claim in the
same shape, the `PrivacyClaim` protocol every document's privacy section is read from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from fedeval.core.config import ModelTraits, PrivacyConfig, Relation
from fedeval.privacy.events import DpEvent

if TYPE_CHECKING:  # annotations only: the mechanism asks the models, not the reverse
    from fedeval.core.release import Probe, Release, ScoreHistogram
    from fedeval.privacy.mechanism import Mechanism


def counts_public(config: PrivacyConfig) -> bool:
    """Whether the number of units (clients taking part, or examples under unit example) may
    appear in a release: yes without DP and under replace, never under add-remove."""
    return config.relation is not Relation.ADD_REMOVE


CLASSES = ("negatives", "positives")
"""The two classes of a release, in the order of its counts (for messages)."""


def first_cell(mask: np.ndarray) -> tuple[int, int]:
    """(class, cell) of the first True of a (2, 2^k) mask."""
    c, j = np.argwhere(mask)[0]
    return int(c), int(j)


@dataclass(frozen=True)
class ClientBatch:
    """A batch of examples of clients 0..n_clients−1, as the per-client encoders read it: each
    example's leaf cell, label (1: positive) and client index (relative to the batch)."""

    cells: np.ndarray
    labels: np.ndarray
    client: np.ndarray
    n_clients: int
    taken: np.ndarray | None = None
    """Report slots per client a probe round used already (localdp: not padded again)."""

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(cells, labels, client, n_clients), as `fedeval.privacy.localdp.padded` takes them."""
        return self.cells, self.labels, self.client, self.n_clients


@dataclass(frozen=True)
class SavedCounts:
    """A saved release's counts as `fedeval.documents.consistency` read them, every one an
    integer: per level (2, 2^k), the reports per level (None where not stated), the clients
    stated, and the probe of a two-phase release."""

    config: PrivacyConfig
    levels: list[np.ndarray]
    reporters: np.ndarray | None
    n_clients: int | None
    probe: Probe | None = None


class PrivacyClaim(Protocol):
    """The privacy claim of a release, read by every document, the CLI header and the ledger
    (`fedeval.privacy.mechanism.Mechanism`, `fedeval.privacy.gaussian.GaussianMechanism`)."""

    @property
    def seeded(self) -> bool: ...

    def neighbouring(self) -> str | None: ...

    def parameters(self) -> dict[str, Any]: ...

    def event(self) -> DpEvent: ...

    def dp_event(self) -> dict[str, Any]: ...

    def guarantee(self) -> str: ...

    def server_learns(self) -> str: ...

    def analyst_learns(self) -> str: ...

    def section(self) -> dict[str, Any]: ...


class ReleaseModel(Protocol):
    """A privacy model of the binary release: one module of `fedeval.privacy`.

    The numbers of the claim take the configuration (None where the model has no such number);
    the words take the `Mechanism` that asks (its shared parts: the neighbouring relation in
    words, whether counts are public, the seed). The pipeline's functions are documented in
    `fedeval.privacy` (the package docstring)."""

    @property
    def TRAITS(self) -> ModelTraits:
        """The model's name and what the protocol does with it (`ModelTraits`)."""

    # --- the numbers the claim is made of ------------------------------------------------------
    def sensitivity(self, config: PrivacyConfig) -> int | None:
        """L1 sensitivity Δ of the released counts to one unit (a model that adds count noise)."""

    def tree_epsilon(self, config: PrivacyConfig) -> float | None:
        """ε the tree of counts is released at (None without DP)."""

    def count_alpha(self, config: PrivacyConfig) -> float | None:
        """Discrete Laplace α = exp(−ε/Δ) on every count (distdp), else None."""

    def oue_epsilon(self, config: PrivacyConfig) -> float | None:
        """ε of one OUE report (localdp), else None."""

    def probe_epsilon(self, config: PrivacyConfig) -> float | None:
        """ε of the probe round of a two-phase release (None without a probe)."""

    def probe_sensitivity(self, config: PrivacyConfig) -> int | None:
        """Δ of the probe's histogram where noise is added to it (distdp), else None."""

    def sampler_delta(self, mech: Mechanism) -> float | None:
        """δ the samplers' floating point costs the release (None where not accounted)."""

    # --- the claim's words and records ---------------------------------------------------------
    def parameters(self, mech: Mechanism) -> dict[str, Any]:
        """The noise and its parameters, as every document stores them."""

    def probe_parameters(self, mech: Mechanism) -> dict[str, Any] | None:
        """The probe round's model-specific parameters (None without a probe)."""

    def event(self, mech: Mechanism) -> DpEvent:
        """The DP event the accountant composes."""

    def claim(self, mech: Mechanism) -> str:
        """The guarantee in words (without the seed's warning, which the mechanism adds)."""

    def server_learns(self, mech: Mechanism) -> str:
        """What the aggregator learns in a deployment (honest-but-curious)."""

    # --- the model's parameter choices and costs ----------------------------------------------
    def error_rates(self) -> tuple[str, str]:
        """The papers' error rates (Table 1) of P/R/A and the AUC, shown for orientation."""

    def binning_buckets(self, n: float, epsilon: float | None) -> float:
        """B for histogram binning of n examples, before rounding and clamping."""

    def probe_words(self, config: PrivacyConfig) -> str:
        """What the probe of a two-phase `auto` takes, in words ("" without a probe)."""

    def report_bytes(self, config: PrivacyConfig) -> float:
        """Payload one client sends per report (bytes)."""

    def batch_width(self, config: PrivacyConfig) -> int:
        """Entries one client's reports hold, for sizing batches of clients."""

    def check_counts(self, saved: SavedCounts, fail: Callable[[str], Exception]) -> None:
        """Raise `fail(what)` if a saved release's integer counts cannot have come from this
        model (`fedeval.documents.consistency`)."""

    # --- the pipeline ----------------------------------------------------------------------
    def draw(
        self,
        leaf_counts: np.ndarray,
        n_clients: int,
        config: PrivacyConfig,
        rng: np.random.Generator,
    ) -> Release:
        """The fast path: one cohort of all clients, its sum drawn at once."""

    def client_reports(
        self, rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The per-client encoder: every client's report, and its report counts (localdp)."""

    def chunk_sum(
        self, rows: ClientBatch, config: PrivacyConfig, cohort_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The sum of `client_reports` over the clients, drawn exactly as they are."""

    def decode(self, release: Release) -> tuple[list[np.ndarray], list[Any]]:
        """Unbiased per-level estimates and their per-count noise variance."""

    def measurement_noise(
        self, hist: ScoreHistogram, n_draws: int, rng: np.random.Generator
    ) -> list[np.ndarray] | None:
        """Fresh noise as the release got it, per level (n_draws, 2, 2^k); None without."""
