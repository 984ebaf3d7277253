"""The worker of tests/test_ledger.py's race: one process charging ε = 1 against a budget of 5.

It lives apart from the test module so that each spawned process imports only the ledger (about
0.2 CPU-s), not the test module with dp_accounting and the rest of the suite's imports (about
1.6 CPU-s each, eight times over); the race it takes part in is the same."""

from __future__ import annotations

from typing import Any

from fedeval.privacy.ledger import BudgetExceeded, charge


def charge_one(path: str, entry: dict[str, Any], results: Any, start: Any) -> None:
    """Once every worker is at the `start` barrier, charge `entry` to the ledger at `path`
    (budget 5 if this run creates it); put "ok" or "refused" on `results`. The barrier lines
    the processes up after their imports, so that their charges overlap rather than follow
    one another as the processes happen to finish starting."""
    start.wait(timeout=60)
    try:
        charge(path, entry, budget=5.0)
        results.put("ok")
    except BudgetExceeded:
        results.put("refused")
