"""User-level DP for federated calibration: clipping, Gaussian noise on the secure sum, accounting.

Seed paper 004, section 4.3 and appendix B.1. Each client clips what it sends (one temperature
update to |Δ| ≤ C; each of its 2c one-vs-all histograms to L2 norm C₊ or C₋), the secure sum
hides single clients, and the server adds Gaussian noise of standard deviation σ = C·z to every
released coordinate. A Gaussian release with sensitivity C and noise C·z is 1/(2z²)-zCDP (Bun &
Steinke 2016); k of them compose to ρ = k/(2z²) (Lemma B.6). Scaling releases k = T of them
(one per round), binning k = 2cT (two histograms per class per round), so Lemma B.7's
σ = C·√(k/(2ρ)). ρ is converted to (ε, δ) by Canonne, Kamath & Steinke (2020) — Lemma B.3 —
which is what dp_accounting's RDP accountant does for a composed Gaussian; we use it rather than
a hand-rolled conversion. Participation p < 1 is not credited (no amplification by
subsampling): the guarantee holds for any sampling, and is conservative for Bernoulli(p).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from fedeval.errors import UsageError

MODEL = "user-level DP: clipped client contributions, central Gaussian noise on the secure sum"
UNIT = "client"
ACCOUNTING = (
    "zCDP composition of Gaussian releases (Bun & Steinke 2016), converted to (ε, δ) by "
    "dp_accounting's RDP accountant (Canonne, Kamath & Steinke 2020, seed 004 Lemma B.3); no "
    "amplification by subsampling is claimed"
)

DEFAULT_TEMPERATURE_CLIP = 0.5
"""C for temperature updates: the paper's choice (appendix A.3.2: C < 1 worked best, C = 0.5 in
every DP experiment). A temperature moves by at most C per client per round, which also keeps a
skewed client from dragging the global temperature (appendix A.3.5)."""

DEFAULT_POSITIVE_CLIP = 10.0
DEFAULT_NEGATIVE_CLIP = 50.0
"""C₊, C₋ for the one-vs-all histograms: the paper's [C₊, C₋] = [10, 50] (section 5, RQ3). A
client's class-j positive histogram holds its class-j examples, few and spread over few bins, so
a small C₊ clips little and keeps the noise on the positive counts (which set the map) low
(appendix A.3.4); negatives are c−1 times as many, hence the larger C₋. Raise both for clients
holding thousands of examples each."""

ORDERS = tuple(float(a) for a in 1.0 + np.geomspace(1e-3, 1e5, 2000))
"""Rényi orders α for the conversion: 2,000 log-spaced values of α − 1 from 1e-3 to 1e5 (≈ 1 %
apart), so the minimum over this grid is within ≈ 1e-4 of Lemma B.3's minimum over all α > 1
for any (ε, δ) of practical use (the bound is flat near its optimum)."""

LARGE_EPSILON = 10.0


def _accounting():
    """dp_accounting's RDP accountant and events, imported lazily (an optional dependency)."""
    try:
        from dp_accounting import dp_event, mechanism_calibration
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError:
        raise UsageError(
            "user-level DP calibration needs dp-accounting: pip install 'fedeval[accounting]'"
        ) from None
    return dp_event, mechanism_calibration, rdp_privacy_accountant


def check_budget(epsilon: float, delta: float) -> tuple[float, float]:
    """Validate (ε, δ): ε finite > 0, 0 < δ < 1; warns when ε is unusually large."""
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"--epsilon must be a finite number > 0. Found {epsilon!r}.")
    if not (isinstance(delta, int | float) and 0 < delta < 1):
        raise UsageError(
            f"--delta must be in (0, 1) for user-level Gaussian DP (try 1e-5). Found {delta!r}."
        )
    if epsilon > LARGE_EPSILON:
        warnings.warn(
            f"ε = {epsilon:g} is a weak guarantee (above {LARGE_EPSILON:g}).", stacklevel=3
        )
    return float(epsilon), float(delta)


def epsilon_of(noise_multiplier: float, releases: int, delta: float) -> float:
    """ε at δ of `releases` Gaussian releases of noise σ = C·`noise_multiplier` (dp_accounting)."""
    dp_event, _, rdp = _accounting()
    acc = rdp.RdpAccountant(list(ORDERS))
    acc.compose(dp_event.GaussianDpEvent(noise_multiplier), releases)
    return float(acc.get_epsilon(delta))


def calibrate_noise(epsilon: float, delta: float, releases: int) -> float:
    """The smallest noise multiplier z (σ = C·z) for which `releases` Gaussian releases are
    (ε, δ)-DP, found by dp_accounting's mechanism calibration."""
    dp_event, mc, rdp = _accounting()
    if releases < 1:
        raise UsageError(f"the number of releases must be ≥ 1. Found {releases}.")
    z = mc.calibrate_dp_mechanism(
        lambda: rdp.RdpAccountant(list(ORDERS)),
        lambda m: dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(m), releases),
        epsilon,
        delta,
        mc.LowerEndpointAndGuess(1e-3, math.sqrt(releases)),
        tol=1e-7,
    )
    # The search brackets the threshold; never return a z whose ε exceeds the target (that
    # would claim more privacy than the noise gives), so step up until it holds.
    while epsilon_of(z, releases, delta) > epsilon:
        z *= 1 + 1e-9
    return float(z)


@dataclass(frozen=True)
class DPStatement:
    """The full privacy claim of a calibration run, and the noise it needs.

    `releases` Gaussian releases (T for scaling, 2cT for binning), each with sensitivity its
    clip norm and noise σ = clip·`noise_multiplier`; `rho` = releases / (2·z²) (zCDP).
    `clip` and `sigma` are keyed by what they bound: "temperature", or "positive"/"negative".
    """

    epsilon: float
    delta: float
    rho: float
    noise_multiplier: float
    releases: int
    clip: dict[str, float] = field(hash=False)
    sigma: dict[str, float] = field(hash=False)
    rounds: int
    participation: float
    model: str = MODEL
    unit: str = UNIT
    accounting: str = ACCOUNTING

    def describe(self) -> str:
        clip = ", ".join(f"C_{k} = {v:g}" for k, v in self.clip.items())
        sig = ", ".join(f"σ_{k} = {v:.4g}" for k, v in self.sigma.items())
        return (
            f"({self.epsilon:g}, {self.delta:g})-DP per {self.unit} (ρ = {self.rho:.4g}-zCDP) "
            f"over {self.rounds} rounds at participation {self.participation:g}; {clip}; {sig}"
        )

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "unit": self.unit,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "noise_multiplier": self.noise_multiplier,
            "gaussian_releases": self.releases,
            "clip": dict(self.clip),
            "sigma": dict(self.sigma),
            "rounds": self.rounds,
            "participation": self.participation,
            "accounting": self.accounting,
            "guarantee": self.describe(),
        }


def dp_statement(
    epsilon: float,
    delta: float,
    *,
    releases: int,
    clip: dict[str, float],
    rounds: int,
    participation: float,
) -> DPStatement:
    """Calibrate the noise for `releases` Gaussian releases at (ε, δ) and state the claim."""
    epsilon, delta = check_budget(epsilon, delta)
    for key, c in clip.items():
        if not (isinstance(c, int | float) and math.isfinite(c) and c > 0):
            raise UsageError(f"the {key} clip norm must be a finite number > 0. Found {c!r}.")
    z = calibrate_noise(epsilon, delta, releases)
    return DPStatement(
        epsilon=epsilon,
        delta=delta,
        rho=releases / (2 * z * z),
        noise_multiplier=z,
        releases=releases,
        clip={k: float(v) for k, v in clip.items()},
        sigma={k: float(v) * z for k, v in clip.items()},
        rounds=rounds,
        participation=participation,
    )


def no_dp_statement() -> dict:
    """The claim when no noise is added."""
    return {
        "model": "federated (secure aggregation, no differential privacy)",
        "unit": UNIT,
        "epsilon": None,
        "delta": None,
        "guarantee": (
            "no differential privacy: secure aggregation hides each client's contribution but "
            "the released sums are exact"
        ),
    }


def clip_scalars(x: np.ndarray, bound: float) -> np.ndarray:
    """Clip each value to [−bound, bound]: the L2 clip of a 1-D update."""
    return np.clip(x, -bound, bound)


def clip_factors(norm_sq: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
    """min(1, bound/‖h‖₂) for each vector given its squared norm: scaling by it clips the vector
    to L2 norm `bound` (1 for a vector already inside, including the zero vector)."""
    norm = np.sqrt(norm_sq)
    return np.where(norm > bound, bound / np.where(norm > 0, norm, 1.0), 1.0)
