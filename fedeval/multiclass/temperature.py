"""FedTemp: temperature scaling trained by federated averaging (seed paper 004, algorithm 2).

Temperature scaling (Guo et al. 2017) divides the logits by one T > 0 fitted by minimising the
negative log-likelihood; it keeps every row's ranking of the classes, so top-1 accuracy cannot
change. In FedTemp each participating client fits its own T_k on its data and sends an update;
the server averages the updates and steps. fedeval works in u = log T (T > 0 for free, and a
step of ±C is the same factor e^C at any T) and departs from the paper's plain averaging of
T_k − T where that was measured to fail under DP (a T biased low, worse than T = 1 in some
seeds):

- Each client's vote is weighted by how well its data determine its optimum: H_k = ∂²NLL_k/∂u²
  at u_k = log T_k is the Fisher information of u_k, so Var(u_k) ≈ 1/H_k. Without DP the round
  averages u_k with weights H_k — the first-order expansion of Σ_k ∂NLL_k/∂u = 0 around every
  u_k, i.e. ≈ the pooled optimum; a client whose examples are all right with a margin (T_k → 0,
  flat NLL) has H_k ≈ 0 and no say. Under DP every client counts at most once: it sends
  w_k·clip(u_k − u, ±C) with w_k = H_k/(H_k + 1/τ²) ∈ [0, 1), the shrinkage weight of an
  estimate of variance 1/H_k against a spread τ² of clients' optima (empirical Bayes), so the
  L2 sensitivity is C and a small or uninformative client pulls by little.
- Under DP the server adds N(0, σ²) to the sum, divides by the public cohort size m, and its
  step is clipped to ±C (a trust region: a noisy round cannot overshoot). The default schedule
  moves with η = 1 for the first ⌈T/2⌉ rounds (travel: each step ≤ C) and then averages the
  remaining rounds' proposals u_t + Δ_t (Polyak–Ruppert), so the noise left is that of the
  mean of ⌊T/2⌋ rounds and the clipped early rounds (which cannot reach a far optimum) are not
  in the average.
- Clients are scheduled without replacement across rounds (`federation.schedule`): each is in
  at most r = ⌈m·T/K⌉ rounds, and the accountant charges r releases, not T.

A client's local problem does not depend on the temperature the server broadcasts (it is solved
exactly, from any start), so every client's T_k is computed once, for all clients together, by a
safeguarded Newton method on the inverse temperature s = 1/T, in which the NLL is convex: with
q_i = softmax(s·z_i), d/ds NLL = Σ_i (E_{q_i}[z_i] − z_{i,y_i}), d²/ds² NLL = Σ_i Var_{q_i}[z_i].
`reference_local_temperatures` solves each client's problem on its own with scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from fedeval.multiclass.data import softmax
from fedeval.multiclass.federation import cohort_size, schedule
from fedeval.privacy.gaussian import DPStatement

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


@dataclass(frozen=True, eq=False)
class _Rows:
    """Logits prepared once for repeated passes: zc = z − max_j z (so s·zc ≤ 0 for s > 0: no
    overflow, and the largest term of every softmax sum is 1), its square and the true class's."""

    zc: np.ndarray
    zc2: np.ndarray
    true: np.ndarray
    group: np.ndarray

    @classmethod
    def of(cls, logits: np.ndarray, labels: np.ndarray, group: np.ndarray) -> _Rows:
        z = np.asarray(logits, dtype=np.float64)
        zc = z - z.max(axis=1, keepdims=True)
        return cls(zc, zc * zc, zc[np.arange(len(zc)), labels], group)

    def take(self, rows: np.ndarray) -> _Rows:
        return _Rows(self.zc[rows], self.zc2[rows], self.true[rows], self.group[rows])


def _derivatives(rows: _Rows, s_row: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-group first and second derivatives of the NLL in s, summed with bincount:
    Σ_i (E_q[z_i] − z_{i,y_i}) and Σ_i Var_q[z_i] with q_i = softmax(s·z_i) (shift-invariant,
    so the row-shifted zc serves). Var = E[z²] − E[z]² in float64: the Hessian only sets Newton
    steps and information weights, where its relative error (≤ 1e-16·max z²/Var) is harmless."""
    p = rows.zc * s_row[:, None]
    np.exp(p, out=p)
    total = p.sum(axis=1)
    mean = np.einsum("ij,ij->i", p, rows.zc) / total
    var = np.maximum(np.einsum("ij,ij->i", p, rows.zc2) / total - mean * mean, 0.0)
    grad = np.bincount(rows.group, mean - rows.true, minlength=n_groups)
    hess = np.bincount(rows.group, var, minlength=n_groups)
    return grad, hess


NEWTON_QUADRATIC = 1e-7
"""A Newton step smaller than this (relative to s) is taken as the last: Newton converges
quadratically on the strictly convex NLL, so the error after it is of order its square
(≈ 1e-14 relative), below NEWTON_TOL's float64 resolution."""


def local_optima(
    logits: np.ndarray, labels: np.ndarray, group: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """(T_k, H_k) of every group: the NLL-optimal temperature in [T_MIN, T_MAX] of its rows
    (NaN for an empty group) and the information of log T there (`local_information`), all
    groups solved together by safeguarded Newton on s = 1/T, where the NLL is convex.

    One pass at s = 1 gives each group's first Newton step and the side of its optimum; one
    pass at that side's bound settles the groups whose optimum is the bound; then Newton steps
    inside a per-group bracket (a step leaving it is replaced by bisection). A group's rows drop
    out of the passes once it has converged; H_k is read off its last pass (at most a relative
    1e-7 from the optimum, where H is smooth).
    """
    rows = _Rows.of(logits, labels, group)
    sizes = np.bincount(group, minlength=n_groups)
    lo = np.full(n_groups, 1 / T_MAX)
    hi = np.full(n_groups, 1 / T_MIN)
    s = np.ones(n_groups)
    g, h = _derivatives(rows, s[group], n_groups)
    h_last, s_last = h.copy(), s.copy()
    bound = np.where(g < 0, hi, lo)  # g < 0: the optimum has s > 1
    g_b, h_b = _derivatives(rows, bound[group], n_groups)
    at_bound = np.where(g < 0, g_b <= 0, g_b >= 0) | (sizes == 0)
    h_last = np.where(at_bound, h_b, h_last)
    s_last = np.where(at_bound, bound, s_last)
    lo = np.where(g < 0, s, np.where(g > 0, bound, lo))
    hi = np.where(g > 0, s, np.where(g < 0, bound, hi))
    done = at_bound | (g == 0)
    s = np.where(at_bound, bound, s)
    active, n_done = rows, -1
    for it in range(MAX_ITER):
        if it:  # the first step uses the pass at s = 1
            if done.all():
                break
            if done.sum() != n_done:  # drop the rows of groups that have converged
                n_done = int(done.sum())
                keep = ~done[group]
                active = rows if keep.all() else rows.take(np.flatnonzero(keep))
            g, h = _derivatives(active, s[active.group], n_groups)
            h_last = np.where(done, h_last, h)
            s_last = np.where(done, s_last, s)
            lo = np.where(~done & (g < 0), s, lo)
            hi = np.where(~done & (g > 0), s, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(h > 0, g / h, np.inf)
        new = s - step
        bad = ~((new > lo) & (new < hi))
        new = np.where(bad, 0.5 * (lo + hi), new)
        converged = (
            (np.abs(new - s) <= NEWTON_TOL * s)
            | (~bad & (np.abs(step) <= NEWTON_QUADRATIC * s))
            | (g == 0)
            | (hi - lo <= NEWTON_TOL * s)
        )
        s = np.where(done, s, new)
        done |= converged
    info = np.where(sizes > 0, s_last * s_last * h_last, 0.0)
    return np.where(sizes > 0, 1.0 / s, np.nan), info


def local_temperatures(
    logits: np.ndarray, labels: np.ndarray, group: np.ndarray, n_groups: int
) -> np.ndarray:
    """The NLL-optimal temperature in [T_MIN, T_MAX] of every group's rows (NaN for an empty
    group); see `local_optima`."""
    return local_optima(logits, labels, group, n_groups)[0]


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


def local_information(
    logits: np.ndarray,
    labels: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    temperatures: np.ndarray,
) -> np.ndarray:
    """H_k = s²·Σ_i Var_{q_i}[z_i] at s = 1/T_k: the Fisher information of u = log T in each
    group's NLL at its optimum (∂²NLL/∂u² = s²·∂²NLL/∂s² + s·∂NLL/∂s, the second term 0 at an
    interior optimum); 0 for an empty group."""
    s = np.where(
        np.isfinite(temperatures), 1.0 / np.where(np.isfinite(temperatures), temperatures, 1.0), 1.0
    )
    _, h = _derivatives(_Rows.of(logits, labels, group), s[group], n_groups)
    information: np.ndarray = s * s * h
    return information


@dataclass(frozen=True)
class TemperatureCalibrator:
    """softmax(z / T): order-preserving, so top-1 predictions never change."""

    temperature: float
    method: str = "fedtemp"

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        return softmax(logits, self.temperature)


DEFAULT_SPREAD = 0.5
"""τ: the spread of clients' log-temperature optima around the global one that the DP weights
w_k = H_k/(H_k + 1/τ²) assume. A client whose own optimum is known to ±0.1 in log T (H_k = 100)
gets w ≈ 0.96; one with a handful of examples (H_k ≈ 1) gets w = 0.2."""


@dataclass(frozen=True, eq=False)
class TemperatureFit:
    """The fitted calibrator, log T after each round, and the clients' own optima.

    `history` holds the temperature after each round; `local` each client's T_k (NaN: no
    data), `information` its H_k; `schedule` (T, K) which client took part in which round.
    """

    calibrator: TemperatureCalibrator
    history: np.ndarray
    local: np.ndarray
    information: np.ndarray
    schedule: np.ndarray


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
    spread: float = DEFAULT_SPREAD,
    per_client: bool = False,
) -> TemperatureFit:
    """Algorithm 2 with A = 1/T, b = 0, over `rounds` rounds, in u = log T (module docstring).

    Round t: the cohort S_t of `federation.schedule` (m = round(p·K) clients, without
    replacement across rounds) sends its updates; without DP the proposal is the H-weighted mean
    v_t = Σ H_k u_k / Σ H_k (each update clipped to ±`clip` around u_t if given); under DP
    v_t = u_t + clip((Σ w_k·clip(u_k − u_t, ±C) + N(0, σ²)) / m, ±C).
    `server_lr` None: without DP u_{t+1} is the H-weighted mean over every round so far (the
    pooled estimate of all clients seen); under DP η = 1 for the first ⌈T/2⌉ rounds, then the
    mean of the later rounds' proposals. A number η: u_{t+1} = u_t + η·(v_t − u_t), the last
    iterate is released. `per_client` solves each participating client's problem with scipy in
    every round (the reference path).
    """
    if dp is not None:
        clip = dp.clip["temperature"]
    plan = schedule(n_clients, rounds, participation, participation_rng)
    sizes = np.bincount(client, minlength=n_clients)
    m = cohort_size(n_clients, participation)
    # Each client's own optimum T_k and information H_k: computed once here, or (reference
    # path) per round from the participants' data and once more at the end.
    optima = None if per_client else local_optima(logits, labels, client, n_clients)
    u_now = math.log(initial)
    history = np.empty(rounds)
    travel = -(-rounds // 2)
    acc_num = acc_den = 0.0  # running sums of the default schedule's average
    for r in range(rounds):
        part = plan[r] & (sizes > 0)
        if optima is None:
            mine = part[client]
            t_k = reference_local_temperatures(logits[mine], labels[mine], client[mine], n_clients)
            h_k = local_information(logits[mine], labels[mine], client[mine], n_clients, t_k)
            u_k, h_k = np.log(t_k[part]), h_k[part]
        else:
            u_k, h_k = np.log(optima[0][part]), optima[1][part]
        d_k = u_k - u_now
        if clip is not None:
            d_k = np.clip(d_k, -clip, clip)
        if dp is not None:
            if noise_rng is None:
                raise ValueError("a DP fit needs `noise_rng` to draw its noise from")
            c_t = dp.clip["temperature"]
            w_k = h_k / (h_k + 1.0 / (spread * spread))
            noise = dp.sigma["temperature"] * noise_rng.standard_normal()
            step = float(np.clip((w_k @ d_k + noise) / m, -c_t, c_t))
            weight = 1.0
        elif h_k.sum() > 0:
            step = float(h_k @ d_k / h_k.sum())
            weight = float(h_k.sum())
        else:
            step, weight = 0.0, 0.0
        proposal = u_now + step
        if server_lr is not None:
            u_now += server_lr * step
        elif dp is None:
            acc_num += weight * proposal
            acc_den += weight
            u_now = acc_num / acc_den if acc_den > 0 else u_now
        elif r < travel:
            u_now = proposal
        else:
            acc_num += proposal
            acc_den += 1.0
            u_now = acc_num / acc_den
        u_now = float(np.clip(u_now, math.log(T_MIN), math.log(T_MAX)))
        history[r] = math.exp(u_now)
    if optima is None:
        local = reference_local_temperatures(logits, labels, client, n_clients)
        optima = (local, local_information(logits, labels, client, n_clients, local))
    return TemperatureFit(TemperatureCalibrator(math.exp(u_now)), history, *optima, plan)


DEFAULT_EVALUATION_CLIP = 2.0
"""C_e: under DP each client's held-out NLL gain, summed over its held-out rows, is clipped to
±C_e nats before the noisy sum. A sum rather than a mean: a client with many rows can say more
than one with two, and one with none says nothing (a mean over the public K would be diluted by
clients without data: measured, the 2-class β = 0.1 case then never passed). 2 nats is the gain
of 10–40 rows of an overconfident model, so most clients saturate and the check is about a
clipped vote of the clients, each as loud as C_e, against noise z·C_e."""

SAFEGUARD_Z = 1.6448536269514722
"""One-sided 95 % normal quantile: the fitted T is kept only if the estimated gain minus 1.645
of its noise SD is above 0, i.e. a calibrator with no gain passes with probability ≤ 5 %."""


@dataclass(frozen=True)
class Safeguard:
    """The held-out check of a fitted temperature against the identity (T = 1).

    `gain` (> 0: the calibrator helps): without DP the exact mean over held-out rows of the NLL
    at T = 1 minus the NLL at the fitted T (nats per example); under DP the mean over the K
    enrolled clients of each client's such gain summed over its held-out rows and clipped to
    ±C_e (nats per client), plus N(0, σ_e²)/K. `sd`: the noise SD of `gain` (0 without DP).
    `kept`: gain − 1.645·sd > 0; else the released temperature is 1 (the model's own
    probabilities).
    """

    fitted: float
    released: float
    gain: float
    sd: float
    kept: bool
    private: bool = False

    @property
    def lower(self) -> float:
        """One-sided 95 % lower bound on the gain."""
        return self.gain - SAFEGUARD_Z * self.sd

    @property
    def unit(self) -> str:
        return "nats per client (clipped sums)" if self.private else "nats per example"

    def to_dict(self) -> dict[str, Any]:
        metric = (
            "held-out NLL at T = 1 minus at the fitted T, summed over each client's held-out "
            "rows, clipped to ±C_evaluation, averaged over the K enrolled clients, plus "
            "Gaussian noise (nats per client; > 0 helps)"
            if self.private
            else "held-out NLL per example at T = 1 minus at the fitted T (nats; > 0 helps)"
        )
        return {
            "metric": metric,
            "fitted_temperature": self.fitted,
            "released_temperature": self.released,
            "gain": self.gain,
            "noise_sd": self.sd,
            "lower_95": self.lower,
            "kept": self.kept,
            "rule": "keep the fitted temperature if gain − 1.645·noise_sd > 0, else release "
            "T = 1 (the identity)",
        }


def nll_gain(logits: np.ndarray, labels: np.ndarray, temperature: float) -> np.ndarray:
    """Per-example NLL at T = 1 minus NLL at `temperature` (n,): with zc = z − max_j z,
    NLL_T = log Σ_j exp(zc_j/T) − zc_y/T (every sum's largest term is 1: no overflow)."""
    rows = _Rows.of(logits, labels, np.zeros(len(labels), np.int64))
    at_one = np.log(np.exp(rows.zc).sum(axis=1)) - rows.true
    at_t = np.log(np.exp(rows.zc / temperature).sum(axis=1)) - rows.true / temperature
    gain: np.ndarray = at_one - at_t
    return gain


def check_temperature(
    logits: np.ndarray,
    labels: np.ndarray,
    client: np.ndarray,
    n_clients: int,
    temperature: float,
    *,
    dp: DPStatement | None = None,
    noise_rng: np.random.Generator | None = None,
) -> Safeguard:
    """The DP (or, without `dp`, exact) held-out NLL check of `temperature` (see `Safeguard`).

    Under DP each enrolled client sends clip(Σ gain over its held-out rows, ±C_e) (0 if it
    holds none): L2 sensitivity C_e, one Gaussian release with σ_e = C_e·z, divided by the
    public K.
    """
    gain = nll_gain(logits, labels, temperature)
    if dp is None:
        est, sd = float(gain.mean()), 0.0
    else:
        if noise_rng is None:
            raise ValueError("a DP check needs `noise_rng` to draw its noise from")
        ce = dp.clip["evaluation"]
        per = np.bincount(client, gain, minlength=n_clients)
        total = float(np.clip(per, -ce, ce).sum())
        est = (total + dp.sigma["evaluation"] * noise_rng.standard_normal()) / n_clients
        sd = dp.sigma["evaluation"] / n_clients
    kept = est - SAFEGUARD_Z * sd > 0
    released = temperature if kept else 1.0
    return Safeguard(temperature, released, est, sd, bool(kept), dp is not None)
