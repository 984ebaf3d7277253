"""Privacy configuration: which model, which budget, which release shape.

Frozen records with Enums for choices, so a configuration can be stored in a report and compared.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from enum import StrEnum

from fedeval.errors import UsageError


class PrivacyModel(StrEnum):
    """Trust model under which the score histograms are released (DESIGN.md, privacy models)."""

    FEDERATED = "federated"  # secure aggregation, exact sums
    DISTDP = "distdp"  # distributed DP: Pólya shares summing to discrete Laplace
    LOCALDP = "localdp"  # local DP: Optimal Unary Encoding per client


class Unit(StrEnum):
    """Whom the guarantee protects: one example (the papers' setting), or one client with all its
    examples (contributions capped at `max_examples` per client, noise scaled to match)."""

    EXAMPLE = "example"
    CLIENT = "client"


class Shape(StrEnum):
    """Which levels of the dyadic hierarchy are released.

    ``hierarchy`` releases levels 1..h (cheap long range queries, sensitivity h under distdp);
    ``flat`` releases only the leaf level h (sensitivity 1; better for AUC up to 2^h ≈ h³).
    """

    HIERARCHY = "hierarchy"
    FLAT = "flat"


def check_epsilon(model: PrivacyModel, epsilon: float | None) -> None:
    """ε must be absent under federated and a positive finite number otherwise."""
    if model is PrivacyModel.FEDERATED:
        if epsilon is not None:
            raise UsageError(
                "`epsilon` does not apply to --model federated (secure aggregation adds no "
                "noise); drop --epsilon or choose --model distdp/localdp."
            )
    elif epsilon is None or not (epsilon > 0 and math.isfinite(epsilon)):
        raise UsageError(
            f"`epsilon` must be a positive finite number under --model {model}. Found {epsilon}."
        )


def check_unit(unit: Unit | str, max_examples: int | None) -> Unit:
    """`--unit client` needs `--max-examples L ≥ 1`; `--unit example` takes no cap."""
    try:
        unit = Unit(unit)
    except ValueError:
        raise UsageError(f"unknown unit {unit!r}; choose example or client.") from None
    if unit is Unit.CLIENT:
        if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
            found = "" if max_examples is None else f" Found {max_examples!r}."
            raise UsageError(
                "--unit client needs --max-examples L (an integer ≥ 1): each client's "
                f"contribution is capped at L examples and the noise scaled to it.{found}"
            )
    elif max_examples is not None:
        raise UsageError(
            "--max-examples applies to --unit client only (under --unit example every example "
            "is protected on its own)."
        )
    return unit


MAX_HEIGHT = 20
"""Finest leaf height: 2^20 cells per class, the resolution data is reduced to while streaming."""

DEFAULT_EPSILON = {PrivacyModel.DISTDP: 1.0, PrivacyModel.LOCALDP: 5.0}
"""The papers' experiment settings (Cormode & Markov, PVLDB 2023, section 7)."""


@dataclass(frozen=True)
class PrivacyConfig:
    """Everything that determines the noise in a release.

    Attributes
    ----------
    model : the trust model.
    epsilon : total ε of the release (pure ε-DP, add/remove-one-example neighbours);
        ``None`` under ``federated``.
    height : h; leaves are the 2^h equal cells of [0, 1].
    shape : which levels are released.
    unit : whom ε protects: one example, or one client (then `max_examples` is L, the cap on
        each client's examples, and the noise is scaled to a client's whole contribution).
    """

    model: PrivacyModel
    height: int
    shape: Shape
    epsilon: float | None = None
    unit: Unit = Unit.EXAMPLE
    max_examples: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.height <= MAX_HEIGHT:
            raise UsageError(f"`height` must be between 1 and {MAX_HEIGHT}. Found {self.height}.")
        check_epsilon(self.model, self.epsilon)
        object.__setattr__(self, "unit", check_unit(self.unit, self.max_examples))
        if self.epsilon is not None:
            if self.epsilon > 10:
                warnings.warn(
                    f"epsilon={self.epsilon} is unusually large: the privacy guarantee is weak.",
                    stacklevel=2,
                )

    @property
    def examples_per_unit(self) -> int:
        """How many examples one protected unit may contribute: 1, or L under unit client."""
        return self.max_examples if self.unit is Unit.CLIENT else 1

    @property
    def levels(self) -> tuple[int, ...]:
        """The released levels k (level k has 2^k cells)."""
        if self.shape is Shape.FLAT:
            return (self.height,)
        return tuple(range(1, self.height + 1))

    @property
    def n_leaves(self) -> int:
        return 1 << self.height


def config_dict(config: PrivacyConfig) -> dict:
    """The configuration as stored in report directories and saved aggregates."""
    return {
        "model": config.model.value,
        "epsilon": config.epsilon,
        "height": config.height,
        "shape": config.shape.value,
        "levels": list(config.levels),
        "unit": config.unit.value,
        "max_examples": config.max_examples,
    }


def config_from_dict(p: dict) -> PrivacyConfig:
    """Read `config_dict`'s output back (KeyError, ValueError or UsageError if malformed); files
    written before units existed have no unit and mean one example."""
    return PrivacyConfig(
        model=PrivacyModel(p["model"]),
        height=int(p["height"]),
        shape=Shape(p["shape"]),
        epsilon=None if p["epsilon"] is None else float(p["epsilon"]),
        unit=Unit(p.get("unit", "example")),
        max_examples=None if p.get("max_examples") is None else int(p["max_examples"]),
    )
