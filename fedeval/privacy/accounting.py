"""Composition of DP events: the leaves (mechanism, parameter, sensitivity) of each release's DP
event, composed by Rényi DP (dp-accounting's accountant, the optional 'accounting' extra) or,
for pure ε-DP events, by summing; and the events in words."""

from __future__ import annotations

import math
from typing import Any

from fedeval.core.errors import UsageError

RDP_ORDER_GRID = (1e-3, 1e5, 2000)
"""Rényi orders α − 1 the ledger adds to dp_accounting's defaults: 2,000 log-spaced values from
1e-3 to 1e5, the grid `fedeval.multiclass.privacy` calibrates its noise on. The minimum over a
superset of its orders is never larger, so a release calibrated to (ε, δ) is charged at most ε."""


def _accounting():
    try:
        from dp_accounting import dp_event, privacy_accountant
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError:
        raise UsageError(
            "the privacy ledger needs dp-accounting: pip install dp-accounting (or fedeval's "
            "'accounting' extra)"
        ) from None
    return dp_event, privacy_accountant, rdp_privacy_accountant


def finite_number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError(f"dp_event: {what} must be a finite number. Found {value!r}.")
    return float(value)


def event_leaves(event: Any) -> list[tuple]:
    """The event as a flat list of ("pure", ε) and ("gaussian", z, k) leaves.

    Refuses unknown or malformed events, and events that add no noise.
    """
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise UsageError(f"dp_event must be an object with a 'type'. Found {event!r}.")
    kind = event["type"]
    if kind == "none":
        raise UsageError(
            "this release adds no noise: it cannot be charged to a privacy budget (its ε is "
            "unbounded)."
        )
    if kind == "discrete_laplace":
        a = finite_number(event.get("parameter"), "discrete_laplace parameter")
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
        # Pure (a·Δ)-DP: the privacy loss a·(|x + Δ| − |x|) lies in [−a·Δ, a·Δ].
        return [("pure", a * sensitivity)]
    if kind == "pure":
        eps = finite_number(event.get("epsilon"), "pure epsilon")
        if not eps > 0:
            raise UsageError(f"dp_event: pure epsilon must be > 0. Found {eps!r}.")
        return [("pure", eps)]
    if kind == "gaussian":
        z = finite_number(event.get("noise_multiplier"), "gaussian noise_multiplier")
        count = event.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise UsageError(
                f"dp_event: gaussian count must be a positive integer. Found {count!r}."
            )
        if not z > 0:
            raise UsageError(f"dp_event: gaussian noise_multiplier must be > 0. Found {z!r}.")
        return [("gaussian", z, count)]
    if kind == "composed":
        events = event.get("events")
        if not isinstance(events, list) or not events:
            raise UsageError("dp_event: a composed event needs a non-empty list of events.")
        return [leaf for e in events for leaf in event_leaves(e)]
    raise UsageError(
        f"dp_event: unknown type {kind!r} (known: discrete_laplace, pure, gaussian, composed, "
        "none)."
    )


def all_leaves(entries: list[dict[str, Any]]) -> list[tuple]:
    return [leaf for e in entries for leaf in event_leaves(e.get("dp_event"))]


def _rdp_orders(rdp) -> list[float]:
    import numpy as np

    grid = (float(a) for a in 1.0 + np.geomspace(*RDP_ORDER_GRID))
    return sorted({float(a) for a in rdp.DEFAULT_RDP_ORDERS} | set(grid))


def _rdp_epsilon(leaves: list[tuple], delta: float) -> float:
    """ε at δ of the leaves composed by one dp_accounting RdpAccountant (pure events enter as
    binary randomized response of the same ε, an upper bound on any pure ε-DP mechanism)."""
    dp_event, privacy_accountant, rdp = _accounting()
    counts: dict[tuple, int] = {}
    for leaf in leaves:  # identical events composed once, k-fold
        key = leaf[:2]
        counts[key] = counts.get(key, 0) + (1 if leaf[0] == "pure" else leaf[2])
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
    event = dp_event.ComposedDpEvent(events)
    if not accountant.supports(event):
        raise UsageError(
            "this dp-accounting cannot compose these events; upgrade: pip install -U dp-accounting"
        )
    accountant.compose(event)
    return float(accountant.get_epsilon(delta))


def compose(leaves: list[tuple], delta: float) -> float:
    if not leaves:
        return 0.0
    pure = [leaf[1] for leaf in leaves if leaf[0] == "pure"]
    if len(pure) == len(leaves):
        return math.fsum(pure)  # exact at δ = 0 (see the module docstring)
    if not delta > 0:
        raise UsageError(
            "a Gaussian release has no finite ε at δ = 0, and this total is kept at δ = 0: "
            "charge it to a ledger created with a δ > 0."
        )
    joint = _rdp_epsilon(leaves, delta)
    gaussian = [leaf for leaf in leaves if leaf[0] == "gaussian"]
    basic = math.fsum(pure) + _rdp_epsilon(gaussian, delta) if pure else joint
    eps = min(joint, basic)
    if not math.isfinite(eps):  # cannot happen for finite, positive parameters
        raise UsageError(f"the composed ε at δ = {delta:g} is not finite.")
    return eps


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
    return compose(all_leaves(entries), delta)


def composition(entries: list[dict[str, Any]], delta: float = 0.0) -> str:
    """How `total_epsilon` composes `entries`, in words."""
    if all(leaf[0] == "pure" for leaf in all_leaves(entries)):
        return "pure ε-DP: ε adds up exactly (δ = 0)"
    return f"Rényi DP (dp_accounting RdpAccountant, all events) at δ = {delta:g}"


def describe_event(event: Any) -> str:
    """A DP event in a few words (for tables)."""
    if not isinstance(event, dict):
        return "?"
    match event.get("type"):
        case "discrete_laplace":
            return f"DLap Δ={event.get('sensitivity')}"
        case "pure":
            return "pure"
        case "gaussian":
            return f"Gauss z={event.get('noise_multiplier')}×{event.get('count', 1)}"
        case "composed":
            return " + ".join(describe_event(e) for e in event.get("events") or [])
    return str(event.get("type"))
