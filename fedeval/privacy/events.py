"""DP events: what one release spends, as small frozen records (dp_accounting's `dp_event.py`).

A mechanism states its event (`fedeval.privacy.mechanism.Mechanism.event`,
`fedeval.privacy.gaussian.GaussianMechanism.event`); every document stores it as the
`dp_event` field of its privacy section (`to_dict`); the ledger reads it back once, at the
boundary (`event_from_dict`), and hands the records to the one accountant
(`fedeval.privacy.accounting`). Nothing else builds or parses the dicts.

Compatibility contract: `to_dict()` is the `dp_event` of the privacy section of every
fedeval document and ledger entry. Within a document schema version its fields are never
removed or given a new meaning; new event types and new optional fields may appear.

| record | `type` | fields | privacy loss |
|---|---|---|---|
| `NoNoiseEvent` | `none` | — | unbounded (exact sums): not chargeable |
| `DiscreteLaplaceEvent` | `discrete_laplace` | `parameter` a, `sensitivity` Δ | pure (a·Δ)-DP |
| `PureEvent` | `pure` | `epsilon` | pure ε-DP (e.g. OUE local DP) |
| `GaussianEvent` | `gaussian` | `noise_multiplier` z, `count` k | k Gaussian releases, σ = z·Δ₂ |
| `ComposedEvent` | `composed` | `events` | their composition |
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from fedeval.core.errors import UsageError

__all__ = [
    "ComposedEvent",
    "DiscreteLaplaceEvent",
    "DpEvent",
    "GaussianEvent",
    "NoNoiseEvent",
    "PureEvent",
    "event_from_dict",
]


class DpEvent(ABC):
    """A release's privacy spending: a frozen record holding only what accounting needs."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The event as stored in a document's privacy section (`dp_event`)."""

    @abstractmethod
    def describe(self) -> str:
        """The event in a few words (the ledger's table)."""


@dataclass(frozen=True)
class NoNoiseEvent(DpEvent):
    """A release that adds no noise (secure aggregation only): its ε is unbounded."""

    def to_dict(self) -> dict[str, Any]:
        return {"type": "none"}

    def describe(self) -> str:
        return "none"


@dataclass(frozen=True)
class DiscreteLaplaceEvent(DpEvent):
    """Discrete Laplace noise P(k) ∝ exp(−`parameter`·|k|) on counts of L1 sensitivity
    `sensitivity`: pure (parameter·sensitivity)-DP (Cormode & Markov, section 2.2).

    `colluders` (distdp) is the number of colluding clients per cohort whose shares the noise
    survives; it does not change the event's ε and is stored only when non-zero.
    """

    parameter: float
    sensitivity: int
    colluders: int = 0

    @property
    def epsilon(self) -> float:
        # Pure (a·Δ)-DP: the privacy loss a·(|x + Δ| − |x|) lies in [−a·Δ, a·Δ].
        return self.parameter * self.sensitivity

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "discrete_laplace",
            "parameter": self.parameter,
            "sensitivity": self.sensitivity,
        }
        if self.colluders:
            out["colluders"] = self.colluders
        return out

    def describe(self) -> str:
        return f"DLap Δ={self.sensitivity}"


@dataclass(frozen=True)
class PureEvent(DpEvent):
    """Any pure ε-DP mechanism (localdp: each unit's OUE reports compose to ε)."""

    epsilon: float

    def to_dict(self) -> dict[str, Any]:
        return {"type": "pure", "epsilon": self.epsilon}

    def describe(self) -> str:
        return "pure"


@dataclass(frozen=True)
class GaussianEvent(DpEvent):
    """`count` Gaussian releases, each of noise σ = `noise_multiplier` × its L2 sensitivity."""

    noise_multiplier: float
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"type": "gaussian", "noise_multiplier": self.noise_multiplier, "count": self.count}

    def describe(self) -> str:
        return f"Gauss z={self.noise_multiplier}×{self.count}"


@dataclass(frozen=True)
class ComposedEvent(DpEvent):
    """The events of releases about the same units, in the order they were made."""

    events: tuple[DpEvent, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "composed", "events": [e.to_dict() for e in self.events]}

    def describe(self) -> str:
        return " + ".join(e.describe() for e in self.events)


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError(f"dp_event: {what} must be a finite number. Found {value!r}.")
    return float(value)


def _discrete_laplace(event: dict[str, Any]) -> DiscreteLaplaceEvent:
    a = _finite(event.get("parameter"), "discrete_laplace parameter")
    sensitivity = event.get("sensitivity")
    if isinstance(sensitivity, float) and sensitivity.is_integer():
        sensitivity = int(sensitivity)
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) or sensitivity < 1:
        raise UsageError(
            f"dp_event: discrete_laplace sensitivity must be a positive integer. "
            f"Found {event.get('sensitivity')!r}."
        )
    if not a > 0:
        raise UsageError(f"dp_event: discrete_laplace parameter must be > 0. Found {a!r}.")
    colluders = event.get("colluders", 0)
    if isinstance(colluders, bool) or not isinstance(colluders, int) or colluders < 0:
        raise UsageError(
            f"dp_event: discrete_laplace colluders must be an integer ≥ 0. Found {colluders!r}."
        )
    return DiscreteLaplaceEvent(a, sensitivity, colluders)


def _pure(event: dict[str, Any]) -> PureEvent:
    eps = _finite(event.get("epsilon"), "pure epsilon")
    if not eps > 0:
        raise UsageError(f"dp_event: pure epsilon must be > 0. Found {eps!r}.")
    return PureEvent(eps)


def _gaussian(event: dict[str, Any]) -> GaussianEvent:
    z = _finite(event.get("noise_multiplier"), "gaussian noise_multiplier")
    count = event.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise UsageError(f"dp_event: gaussian count must be a positive integer. Found {count!r}.")
    if not z > 0:
        raise UsageError(f"dp_event: gaussian noise_multiplier must be > 0. Found {z!r}.")
    return GaussianEvent(z, count)


def _composed(event: dict[str, Any]) -> ComposedEvent:
    events = event.get("events")
    if not isinstance(events, list) or not events:
        raise UsageError("dp_event: a composed event needs a non-empty list of events.")
    return ComposedEvent(tuple(event_from_dict(e) for e in events))


def event_from_dict(event: Any) -> DpEvent:
    """The record a document's `dp_event` states; refuses unknown or malformed events (a
    `UsageError` naming the field, what was expected and what was found).

    Lenient where older documents were: a whole-number float sensitivity is read as an integer,
    and a Gaussian without `count` is one release.
    """
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise UsageError(f"dp_event must be an object with a 'type'. Found {event!r}.")
    match event["type"]:
        case "none":
            return NoNoiseEvent()
        case "discrete_laplace":
            return _discrete_laplace(event)
        case "pure":
            return _pure(event)
        case "gaussian":
            return _gaussian(event)
        case "composed":
            return _composed(event)
    raise UsageError(
        f"dp_event: unknown type {event['type']!r} (known: discrete_laplace, pure, gaussian, "
        "composed, none)."
    )
