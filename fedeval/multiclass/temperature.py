"""FedTemp: temperature scaling trained by federated averaging (seed paper 004, algorithm 2).

Temperature scaling (Guo et al. 2017) divides the logits by one T > 0 fitted by minimising the
negative log-likelihood; it keeps every row's ranking of the classes, so top-1 accuracy cannot
change. In FedTemp each participating client fits its own T_k on its data and sends the update
T_k − T (clipped to |·| ≤ C under DP, appendix B.2); the server averages the updates (weighted
by examples without DP; under DP each client counts once and the sum is divided by the expected
number of participants p·K, so one client's influence is bounded) and steps.

A client's local problem does not depend on the temperature the server broadcasts (it is solved
exactly, from any start), so every client's T_k is computed once, for all clients together, by a
safeguarded Newton method on the inverse temperature s = 1/T, in which the NLL is convex: with
q_i = softmax(s·z_i), d/ds NLL = Σ_i (E_{q_i}[z_i] − z_{i,y_i}), d²/ds² NLL = Σ_i Var_{q_i}[z_i].
`reference_local_temperatures` solves each client's problem on its own with scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from fedeval.multiclass.data import softmax
from fedeval.multiclass.federation import participants
from fedeval.multiclass.privacy import DPStatement

T_MIN, T_MAX = 0.05, 20.0
"""Temperatures are kept in [T_MIN, T_MAX]. A client whose examples are all classified right
with a margin has its NLL minimum at T → 0 (and one whose examples are all wrong at T → ∞); the
bounds keep such clients finite, and no useful global temperature lies outside them."""

NEWTON_TOL = 1e-13
"""Relative change in s at which Newton stops (≈ float64 resolution of the optimum)."""

MAX_ITER = 200


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    """Σ_i −log softmax(z_i / T)[y_i]: the objective temperature scaling minimises."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    return float(np.sum(logsumexp(z, axis=1) - z[np.arange(len(z)), labels]))


def _derivatives(
    z: np.ndarray, z_true: np.ndarray, s_row: np.ndarray, group: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-group first and second derivatives of the NLL in s (summed with bincount)."""
    a = z * s_row[:, None]
    a -= a.max(axis=1, keepdims=True)
    p = np.exp(a)
    p /= p.sum(axis=1, keepdims=True)
    mean = np.einsum("ij,ij->i", p, z)
    dev = z - mean[:, None]
    var = np.einsum("ij,ij->i", p, dev * dev)
    grad = np.bincount(group, mean - z_true, minlength=n_groups)
    hess = np.bincount(group, var, minlength=n_groups)
    return grad, hess


def local_temperatures(
    logits: np.ndarray, labels: np.ndarray, group: np.ndarray, n_groups: int
) -> np.ndarray:
    """The NLL-optimal temperature in [T_MIN, T_MAX] of every group's rows (NaN for an empty
    group), all groups solved together: safeguarded Newton on s = 1/T with a per-group bracket
    (a Newton step leaving the bracket is replaced by bisection)."""
    z = np.asarray(logits, dtype=np.float64)
    z_true = z[np.arange(len(z)), labels]
    lo = np.full(n_groups, 1 / T_MAX)
    hi = np.full(n_groups, 1 / T_MIN)
    g_lo, _ = _derivatives(z, z_true, lo[group], group, n_groups)
    g_hi, _ = _derivatives(z, z_true, hi[group], group, n_groups)
    s = np.clip(np.ones(n_groups), lo, hi)
    done = (g_lo >= 0) | (g_hi <= 0)  # the optimum is at a bound (convexity)
    s = np.where(g_lo >= 0, lo, np.where(g_hi <= 0, hi, s))
    for _ in range(MAX_ITER):
        if done.all():
            break
        g, h = _derivatives(z, z_true, s[group], group, n_groups)
        lo = np.where(~done & (g < 0), s, lo)
        hi = np.where(~done & (g > 0), s, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(h > 0, g / h, np.inf)
        new = s - step
        bad = ~((new > lo) & (new < hi))
        new = np.where(bad, 0.5 * (lo + hi), new)
        converged = (np.abs(new - s) <= NEWTON_TOL * s) | (g == 0) | (hi - lo <= NEWTON_TOL * s)
        s = np.where(done, s, new)
        done |= converged
    sizes = np.bincount(group, minlength=n_groups)
    return np.where(sizes > 0, 1.0 / s, np.nan)


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """Central temperature scaling: the NLL-optimal T in [T_MIN, T_MAX] on all rows."""
    return float(local_temperatures(logits, labels, np.zeros(len(labels), np.int64), 1)[0])


def reference_local_temperatures(
    logits: np.ndarray, labels: np.ndarray, group: np.ndarray, n_groups: int
) -> np.ndarray:
    """`local_temperatures` one group at a time with scipy's bounded scalar minimiser on log T
    (the obviously-correct path; slow for many clients)."""
    out = np.full(n_groups, np.nan)
    for k in range(n_groups):
        rows = group == k
        if not rows.any():
            continue
        z, y = logits[rows], labels[rows]
        res = minimize_scalar(
            lambda u, z=z, y=y: nll(z, y, math.exp(u)),
            bounds=(math.log(T_MIN), math.log(T_MAX)),
            method="bounded",
            options={"xatol": 1e-11},
        )
        out[k] = math.exp(res.x)
    return out


@dataclass(frozen=True)
class TemperatureCalibrator:
    """softmax(z / T): order-preserving, so top-1 predictions never change."""

    temperature: float
    method: str = "fedtemp"

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        return softmax(logits, self.temperature)


@dataclass(frozen=True, eq=False)
class TemperatureFit:
    """The fitted calibrator, the temperature after each round, and the clients' own optima."""

    calibrator: TemperatureCalibrator
    history: np.ndarray
    local: np.ndarray


def fed_temperature(
    logits: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    n_clients: int,
    *,
    rounds: int,
    participation: float,
    participation_rng: np.random.Generator,
    noise_rng: np.random.Generator | None = None,
    dp: DPStatement | None = None,
    clip: float | None = None,
    server_lr: float | None = None,
    initial: float = 1.0,
    per_client: bool = False,
) -> TemperatureFit:
    """Algorithm 2 with A = 1/T, b = 0, over `rounds` rounds.

    Each round the sampled clients send T_k − T (clipped to `clip`, or to the DP clip norm),
    the server forms the average update (plus N(0, σ²)/(p·K) under DP) and steps by the server
    learning rate η_t. `server_lr` None means η_t = 1/t: the temperature is then the running
    mean of the rounds' estimates, so T rounds pool T rounds' clients, and under DP the noise
    left in the result does not grow with T (σ ∝ √T per round, averaged over T rounds). A fixed
    η = 1 is the paper's plain averaging: the result is the last round's average.
    `per_client` solves each participating client's problem with scipy in every round.
    """
    if dp is not None:
        clip = dp.clip["temperature"]
    sizes = np.bincount(client, minlength=n_clients).astype(np.float64)
    has_data = sizes > 0
    local = None
    if not per_client:
        local = local_temperatures(logits, labels, client, n_clients)
    t_now = float(initial)
    history = np.empty(rounds)
    for r in range(rounds):
        part = participants(n_clients, participation, participation_rng) & has_data
        if per_client:
            mine = part[client]
            sub_local = reference_local_temperatures(
                logits[mine], labels[mine], client[mine], n_clients
            )
            t_k = sub_local[part]
        else:
            t_k = local[part]
        update = t_k - t_now
        if clip is not None:
            update = np.clip(update, -clip, clip)
        if dp is not None:
            # Each client counts once, divided by the public expected count p·K (B.2).
            total = update.sum() + dp.sigma["temperature"] * noise_rng.standard_normal()
            step = total / (participation * n_clients)
        elif part.any():
            w = sizes[part]
            step = float(w @ update / w.sum())
        else:
            step = 0.0
        lr = 1.0 / (r + 1) if server_lr is None else server_lr
        t_now = float(np.clip(t_now + lr * step, T_MIN, T_MAX))
        history[r] = t_now
    if local is None:
        local = reference_local_temperatures(logits, labels, client, n_clients)
    return TemperatureFit(TemperatureCalibrator(t_now), history, local)
