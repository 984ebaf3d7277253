"""The privacy budget ledger: every release charged against a total ε, composed by an accountant.

A ledger is a JSON Lines file, one release per line (model, unit, neighbouring relation, ε, δ,
mechanism and its parameters, what the release covered, time). Before a release is shown, its
cost is composed with everything already in the ledger and the run is refused if the total would
exceed the budget; checking and appending happen under a file lock, so concurrent runs cannot
both slip under the budget or lose an entry.

Composition uses Google's dp_accounting (the accountant Flower and PipelineDP use) with its
privacy-loss-distribution accountant at δ = 0: fedeval's releases are pure ε-DP, where basic
composition (ε adds up) is exact. A distdp release is a `DiscreteLaplaceDpEvent` (parameter
ε/Δ, sensitivity Δ, the noise actually added); an OUE (localdp) release, for which
dp_accounting has no event, is charged as a discrete Laplace event of the same pure ε, which
composes identically at δ = 0. Federated releases add no noise and cannot be charged to a budget.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fedeval.errors import FedevalError, InputError, UsageError

SCHEMA = "fedeval.ledger-entry/1"
TOLERANCE = 1e-9
"""Relative slack when comparing a total with the budget (float rounding only)."""


class BudgetExceeded(FedevalError):
    """The release would take the ledger past its budget; nothing was released."""


def _accounting():
    try:
        from dp_accounting import dp_event
        from dp_accounting.pld import pld_privacy_accountant
    except ImportError:
        raise UsageError(
            "the privacy ledger needs dp-accounting: pip install 'fedeval[accounting]'"
        ) from None
    return dp_event, pld_privacy_accountant


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        from filelock import FileLock
    except ImportError:
        raise UsageError(
            "the privacy ledger needs filelock: pip install 'fedeval[accounting]'"
        ) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=60):
        yield


def read_ledger(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The entries of a ledger (an absent file is an empty ledger)."""
    path = Path(path)
    if not path.exists():
        return []
    entries = []
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"ledger '{path}', line {i}: not valid JSON ({e}).") from None
            if not isinstance(entry, dict) or entry.get("schema") != SCHEMA:
                raise InputError(f"ledger '{path}', line {i}: not a fedeval ledger entry.")
            entries.append(entry)
    return entries


def _event(entry: dict[str, Any]):
    dp_event, _ = _accounting()
    eps = entry.get("epsilon")
    if eps is None:
        raise UsageError(
            f"a {entry.get('model')} release adds no noise: it cannot be charged to a privacy "
            "budget (its ε is unbounded)."
        )
    mech = entry.get("mechanism") or {}
    if entry["model"] == "distdp":
        sensitivity = int(mech["sensitivity"])
        return dp_event.DiscreteLaplaceDpEvent(
            noise_parameter=eps / sensitivity, sensitivity=sensitivity
        )
    # Pure ε-DP without a dedicated event: a discrete Laplace event of the same pure ε, whose
    # privacy loss dp_accounting represents exactly (a continuous Laplace event's PLD puts tail
    # mass at infinity, which makes ε at δ = 0 infinite).
    return dp_event.DiscreteLaplaceDpEvent(noise_parameter=eps, sensitivity=1)


def total_epsilon(entries: list[dict[str, Any]]) -> float:
    """ε of all entries composed (δ = 0) by dp_accounting's PLD accountant."""
    if not entries:
        return 0.0
    dp_event, pld = _accounting()
    accountant = pld.PLDAccountant()
    accountant.compose(dp_event.ComposedDpEvent([_event(e) for e in entries]))
    return float(accountant.get_epsilon(0.0))


def make_entry(
    doc: dict[str, Any], *, command: str, covered: str, source: str | None
) -> dict[str, Any]:
    """A ledger entry for a release described by a report document's privacy section."""
    p = doc["privacy"]
    return {
        "schema": SCHEMA,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "source": source,
        "model": p["model"],
        "unit": p["unit"],
        "neighbouring": p["neighbouring"],
        "epsilon": p["epsilon"],
        "delta": p["delta"],
        "mechanism": p["mechanism"] | {"height": p["height"], "shape": p["shape"]},
        "covered": covered,
        "seed": (doc.get("run") or {}).get("seed"),
        "fedeval_version": doc.get("fedeval_version"),
    }


def charge(path: str | os.PathLike, entry: dict[str, Any], budget: float) -> float:
    """Append `entry` if the composed total stays within `budget`; return the new total.

    Raises `BudgetExceeded` (and writes nothing) if it would not.
    """
    if not budget > 0:
        raise UsageError(f"--budget must be a positive ε. Found {budget}.")
    path = Path(path)
    _event(entry)  # refuse unchargeable releases before taking the lock
    with _locked(path):
        entries = read_ledger(path)
        before = total_epsilon(entries)
        after = total_epsilon([*entries, entry])
        if after > budget * (1 + TOLERANCE):
            raise BudgetExceeded(
                f"this release (ε = {entry['epsilon']:g}) would take the ledger '{path}' from "
                f"ε = {before:g} to {after:g}, over its budget of {budget:g}; nothing was "
                "released."
            )
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return after
