"""Who holds what, and who takes part when: clients, held-out rows, per-round participation.

Seed paper 004, appendix A.2 (Dirichlet(β) label skew, via
`fedeval.protocol.partition.assign_clients`)
and algorithms 1–2 (each round the server samples every client independently with probability
p). Randomness only through the `numpy.random.Generator` passed in.
"""

from __future__ import annotations

import math

import numpy as np

from fedeval.core.errors import UsageError
from fedeval.protocol.partition import Scheme, assign_clients

MAX_ROUNDS = 1000
"""More rounds than any of the papers' runs (≤ 100) by a wide margin; beyond it a run would
only spin (each round reads every sampled client)."""


def check_rounds(rounds: object) -> int:
    if isinstance(rounds, bool) or not isinstance(rounds, int | np.integer) or rounds < 1:
        raise UsageError(f"`rounds` must be a whole number ≥ 1. Found {rounds!r}.")
    if rounds > MAX_ROUNDS:
        raise UsageError(f"`rounds` must be at most {MAX_ROUNDS}. Found {rounds}.")
    return int(rounds)


def check_participation(p: object) -> float:
    if not (isinstance(p, int | float) and not isinstance(p, bool) and 0 < p <= 1):
        raise UsageError(
            f"`participation` (the share of clients sampled each round) must be in (0, 1]. "
            f"Found {p!r}."
        )
    return float(p)


def assign(
    labels: np.ndarray, n_clients: int, beta: float | None, rng: np.random.Generator
) -> np.ndarray:
    """Client codes 0..n_clients−1: Dirichlet(β) label skew (appendix A.2), or IID if β is None."""
    if beta is None:
        return assign_clients(labels, n_clients, Scheme.IID, rng)
    return assign_clients(labels, n_clients, Scheme.DIRICHLET, rng, beta=beta)


def holdout_mask(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A random set of round(fraction·n) rows held out for measuring (True = held out).

    The paper splits each client's local data into calibration and test sets (section 3); a
    uniform split of rows does that in expectation for every client.
    """
    if not (isinstance(fraction, int | float) and 0 <= fraction < 1 and math.isfinite(fraction)):
        raise UsageError(f"`holdout` must be in [0, 1). Found {fraction!r}.")
    mask = np.zeros(n, bool)
    k = round(fraction * n)
    if k >= n:
        raise UsageError(
            f"`holdout` {fraction:g} of {n} rows leaves none to calibrate on; hold out less."
        )
    if k:
        mask[rng.permutation(n)[:k]] = True
    return mask


def participants(n_clients: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """One round's participation set: each client independently with probability p (bool mask).

    At p = 1 every client takes part (no draw is spent, so a full-participation run does not
    depend on the generator's state).
    """
    if p >= 1:
        return np.ones(n_clients, bool)
    return rng.random(n_clients) < p


def cohort_size(n_clients: int, p: float) -> int:
    """m = max(1, round(p·K)) clients a round asks for."""
    return max(1, min(n_clients, round(p * n_clients)))


def max_client_rounds(n_clients: int, rounds: int, p: float) -> int:
    """r = ⌈m·T/K⌉: the most rounds any one client takes part in under `schedule` (public: it
    depends on K, T and p only). r = 1 when m·T ≤ K: every client's data are used once."""
    return -(-cohort_size(n_clients, p) * rounds // n_clients)


def schedule(n_clients: int, rounds: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Which clients take part in which round, as a (T, K) bool matrix: sampling without
    replacement across rounds.

    The rounds take consecutive blocks of m = round(p·K) from a stream of independent random
    permutations of the K clients (a client repeated within one block, where it straddles two
    permutations, takes part once). Each client is in at most one place per permutation, so in
    at most r = ⌈m·T/K⌉ rounds (`max_client_rounds`); with m·T ≤ K every client is used at
    most once and the rounds' cohorts are disjoint. The schedule is drawn before any data are
    touched and does not depend on them, which is what lets the accountant charge a client for r
    rounds rather than T (parallel composition over disjoint cohorts).
    """
    m = cohort_size(n_clients, p)
    r = max_client_rounds(n_clients, rounds, p)
    stream = np.concatenate([rng.permutation(n_clients) for _ in range(r)])
    out = np.zeros((rounds, n_clients), bool)
    rows = np.repeat(np.arange(rounds), m)
    out[rows, stream[: rounds * m]] = True
    return out
