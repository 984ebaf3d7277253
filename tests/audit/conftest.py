"""Audit budget: `make test` runs a fast audit (a few thousand trials per side, seconds per
mechanism); `make audit` sets FEDEVAL_AUDIT=full for T = 20,000 per side (shared AUDIT.md)."""

from __future__ import annotations

import os

import pytest

FULL = os.environ.get("FEDEVAL_AUDIT") == "full"


@pytest.fixture(scope="session")
def trials() -> int:
    """Trials per side of the ε lower bound."""
    return 20_000 if FULL else 2_000


@pytest.fixture(scope="session")
def scan_runs() -> int:
    """Repeated unseeded runs per side of the deterministic leak scan. A field the noise moves
    only rarely (the number of distinct curve knots of a tiny release) can look constant on both
    sides by chance (seen with 4 runs: not a leak, the count is post-processing of the noisy
    release); more runs make that rarer."""
    return 8 if FULL else 6
