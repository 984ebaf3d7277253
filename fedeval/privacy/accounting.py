"""The one accountant: composes DP events (`fedeval.privacy.events`) into an ε, and calibrates
the Gaussian noise of a target (ε, δ).

The ledger's totals (`compose`, `total_epsilon`), the multiclass user-level Gaussian calibration
(`gaussian_epsilon`, `calibrate_gaussian`) and the comparison's composed event all go through
here. Pure ε-DP events compose by summing (exact at δ = 0); anything with a Gaussian event by
Rényi DP (dp-accounting's `RdpAccountant`, the optional 'accounting' extra). Why each, with
sources: `fedeval.privacy.ledger`'s module docstring.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fedeval.core.errors import UsageError
from fedeval.privacy.events import (
    ComposedEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    GaussianEvent,
    NoNoiseEvent,
    PureEvent,
    event_from_dict,
)

RDP_ORDER_GRID = (1e-3, 1e5, 2000)
"""Rényi orders α − 1 of the Gaussian calibration: 2,000 log-spaced values from 1e-3 to 1e5
(≈ 1 % apart), so the minimum over this grid is within ≈ 1e-4 of Lemma B.3's minimum over all
α > 1 for any (ε, δ) of practical use (the bound is flat near its optimum)."""

CALIBRATION_ORDERS = tuple(float(a) for a in 1.0 + np.geomspace(*RDP_ORDER_GRID))
"""The Rényi orders α the Gaussian noise is calibrated on (`RDP_ORDER_GRID`)."""

Leaf = PureEvent | GaussianEvent
"""What composition sees: a pure ε-DP event or k Gaussian releases."""


def _accounting() -> tuple[Any, Any, Any, Any]:
    """dp_accounting's events, accountant base, calibration and RDP accountant (lazily: an
    optional dependency)."""
    try:
        from dp_accounting import dp_event, mechanism_calibration, privacy_accountant
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError:
        raise UsageError(
            "privacy accounting needs dp-accounting: pip install 'fedeval[accounting]' (or pip "
            "install dp-accounting)"
        ) from None
    return dp_event, privacy_accountant, mechanism_calibration, rdp_privacy_accountant


def leaves(event: DpEvent) -> list[Leaf]:
    """The event as a flat list of pure and Gaussian events (a discrete Laplace event is pure
    (a·Δ)-DP). Refuses events that add no noise: they cannot be charged."""
    match event:
        case NoNoiseEvent():
            raise UsageError(
                "this release adds no noise: it cannot be charged to a privacy budget (its ε is "
                "unbounded)."
            )
        case DiscreteLaplaceEvent():
            return [PureEvent(event.epsilon)]
        case PureEvent() | GaussianEvent():
            return [event]
        case ComposedEvent():
            return [leaf for e in event.events for leaf in leaves(e)]
    raise UsageError(f"dp_event: cannot account for {event!r}.")


def event_leaves(event: Any) -> list[Leaf]:
    """The leaves of a document's `dp_event` (a dict): `event_from_dict`, then `leaves`."""
    return leaves(event_from_dict(event))


def entry_events(entries: Iterable[dict[str, Any]]) -> list[DpEvent]:
    """The DP events of ledger entries (each entry's `dp_event`, read once)."""
    return [event_from_dict(e.get("dp_event")) for e in entries]


def _rdp_orders(rdp: Any) -> list[float]:
    """dp_accounting's default orders and the calibration grid: the minimum over a superset of
    the calibration's orders is never larger, so a release calibrated to (ε, δ) is charged at
    most ε."""
    return sorted({float(a) for a in rdp.DEFAULT_RDP_ORDERS} | set(CALIBRATION_ORDERS))


def _rdp_epsilon(flat: Sequence[Leaf], delta: float) -> float:
    """ε at δ of the leaves composed by one dp_accounting RdpAccountant (pure events enter as
    binary randomized response of the same ε, an upper bound on any pure ε-DP mechanism)."""
    dp_event, privacy_accountant, _, rdp = _accounting()
    counts: dict[tuple[str, float], int] = {}
    for leaf in flat:  # identical events composed once, k-fold (in order of first appearance)
        if isinstance(leaf, PureEvent):
            key, k = ("pure", leaf.epsilon), 1
        else:
            key, k = ("gaussian", leaf.noise_multiplier), leaf.count
        counts[key] = counts.get(key, 0) + k
    events = []
    for (kind, value), count in counts.items():
        if kind == "pure":
            # Binary randomized response keeps the input with probability 1 − p/2:
            # ln((1 − p/2)/(p/2)) = ε  ⇔  p = 2/(1 + e^ε) = 2·e^−ε/(1 + e^−ε).
            p = 2 * math.exp(-value) / (1 + math.exp(-value))
            event = dp_event.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=2)
        else:
            event = dp_event.GaussianDpEvent(value)
        events.append(dp_event.SelfComposedDpEvent(event, count))
    # The events are already calibrated to the dataset's own neighbouring relation (Δ and the
    # clipping norm are under that relation); REPLACE_ONE only selects dp_accounting's exact
    # two-point pair for randomized response. The Gaussian's RDP does not depend on it.
    accountant = rdp.RdpAccountant(
        _rdp_orders(rdp), neighboring_relation=privacy_accountant.NeighboringRelation.REPLACE_ONE
    )
    composed = dp_event.ComposedDpEvent(events)
    if not accountant.supports(composed):
        raise UsageError(
            "this dp-accounting cannot compose these events; upgrade: pip install -U dp-accounting"
        )
    accountant.compose(composed)
    return float(accountant.get_epsilon(delta))


def compose_leaves(flat: Sequence[Leaf], delta: float) -> float:
    """ε of the leaves composed: Σ ε_i at δ = 0 if all are pure (exact), else the smaller of
    one RDP accountant over all of them and basic composition Σ ε_pure + ε_Gaussian(δ)."""
    if not flat:
        return 0.0
    pure = [leaf.epsilon for leaf in flat if isinstance(leaf, PureEvent)]
    if len(pure) == len(flat):
        return math.fsum(pure)  # exact at δ = 0 (see fedeval.privacy.ledger)
    if not delta > 0:
        raise UsageError(
            "a Gaussian release has no finite ε at δ = 0, and this total is kept at δ = 0: "
            "charge it to a ledger created with a δ > 0."
        )
    joint = _rdp_epsilon(flat, delta)
    gaussian = [leaf for leaf in flat if isinstance(leaf, GaussianEvent)]
    basic = math.fsum(pure) + _rdp_epsilon(gaussian, delta) if pure else joint
    eps = min(joint, basic)
    if not math.isfinite(eps):  # cannot happen for finite, positive parameters
        raise UsageError(f"the composed ε at δ = {delta:g} is not finite.")
    return eps


def compose(events: Iterable[DpEvent], delta: float) -> float:
    """ε at `delta` of `events` composed (releases about the same units)."""
    return compose_leaves([leaf for e in events for leaf in leaves(e)], delta)


def is_pure(events: Iterable[DpEvent]) -> bool:
    """Whether every event is pure ε-DP (their ε add up exactly, at δ = 0)."""
    return all(isinstance(leaf, PureEvent) for e in events for leaf in leaves(e))


def check_same_units(entries: list[dict[str, Any]], what: str) -> None:
    kinds = {(e.get("unit"), e.get("relation")) for e in entries}
    if len(kinds) > 1:
        listed = " and ".join(f"unit {u}, relation {r}" for u, r in sorted(kinds, key=str))
        raise UsageError(
            f"{what} mixes {listed}: a composed total must refer to one unit of privacy and "
            "one neighbouring relation."
        )


def total_epsilon(entries: list[dict[str, Any]], delta: float = 0.0) -> float:
    """ε of `entries` composed: Σ ε_i at δ = 0 if every event is pure (exact), else ε at `delta`
    by one RDP accountant over every event. The entries must share unit and relation."""
    check_same_units(entries, "these entries")
    return compose(entry_events(entries), delta)


def composition(entries: list[dict[str, Any]], delta: float = 0.0) -> str:
    """How `total_epsilon` composes `entries`, in words."""
    if is_pure(entry_events(entries)):
        return "pure ε-DP: ε adds up exactly (δ = 0)"
    return f"Rényi DP (dp_accounting RdpAccountant, all events) at δ = {delta:g}"


def describe_event(event: Any) -> str:
    """A document's `dp_event` in a few words (for tables); "?" if it is not one."""
    try:
        return event_from_dict(event).describe()
    except UsageError:
        return "?" if not isinstance(event, dict) else str(event.get("type"))


# --- the Gaussian mechanism's calibration ------------------------------------------------------


def gaussian_epsilon(noise_multiplier: float, count: int, delta: float) -> float:
    """ε at δ of `count` Gaussian releases of noise σ = `noise_multiplier` × sensitivity, by
    dp_accounting's RDP accountant on `CALIBRATION_ORDERS` (Canonne, Kamath & Steinke 2020)."""
    dp_event, _, _, rdp = _accounting()
    acc = rdp.RdpAccountant(list(CALIBRATION_ORDERS))
    acc.compose(dp_event.GaussianDpEvent(noise_multiplier), count)
    return float(acc.get_epsilon(delta))


def calibrate_gaussian(epsilon: float, delta: float, count: int) -> float:
    """The smallest noise multiplier z (σ = z × sensitivity) for which `count` Gaussian releases
    are (ε, δ)-DP, found by dp_accounting's mechanism calibration."""
    dp_event, _, mc, rdp = _accounting()
    if count < 1:
        raise UsageError(f"the number of releases must be ≥ 1. Found {count}.")
    z = mc.calibrate_dp_mechanism(
        lambda: rdp.RdpAccountant(list(CALIBRATION_ORDERS)),
        lambda m: dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(m), count),
        epsilon,
        delta,
        mc.LowerEndpointAndGuess(1e-3, math.sqrt(count)),
        tol=1e-7,
    )
    # The search brackets the threshold; never return a z whose ε exceeds the target (that
    # would claim more privacy than the noise gives), so step up until it holds.
    while gaussian_epsilon(z, count, delta) > epsilon:
        z *= 1 + 1e-9
    return float(z)
