"""The Gaussian mechanism (user-level DP for federated calibration): clipping, Gaussian noise on
the secure sum, its calibration and its claim.

Seed paper 004, section 4.3 and appendix B.1. Each client clips what it sends (one update of
log T to |Δ| ≤ C; its one-vs-all histograms to L2 norms C₊ and C₋), the secure sum hides single
clients, and the server adds Gaussian noise of standard deviation σ = C·z to every released
coordinate. A Gaussian release with sensitivity C and noise C·z is 1/(2z²)-zCDP (Bun & Steinke
2016); k of them compose to ρ = k/(2z²) (Lemma B.6), so Lemma B.7's σ = C·√(k/(2ρ)). What
counts is k, the releases one client's data can touch — not the releases of the run: the
rounds' cohorts are drawn without replacement (`federation.schedule`, fixed before any data are
read), so a client is in at most r = ⌈m·T/K⌉ rounds, and a round it is not in does not depend
on its data (parallel composition over disjoint cohorts, adaptive rounds included). FedTemp
charges k = r (+ 1 for its held-out check); binning sums each sampled client's histograms once
and unmasks one noisy total, k = 2c (2 when the classes are pooled). The paper charges T and
2cT. ρ is converted to (ε, δ) by Canonne, Kamath & Steinke (2020) — Lemma B.3 —
which is what dp_accounting's RDP accountant does for a composed Gaussian; we use it rather than
a hand-rolled conversion. Participation p < 1 is not credited (no amplification by
subsampling): the guarantee holds for any sampling, and is conservative for Bernoulli(p).

`GaussianMechanism` states the claim — relation, unit, sensitivity, noise, guarantee, what the
server and the analyst learn, and the DP event (`fedeval.privacy.events.GaussianEvent`) the
ledger composes — in the shape of the binary `fedeval.privacy.mechanism.Mechanism`; every
document and the CLI print what it says. `fedeval.multiclass` uses it (the clip norms it
defaults to are its own: `fedeval.multiclass.privacy`). The
noise comes from the run's generator, seeded from the OS CSPRNG unless a seed is given; a seeded
run is a reproducible simulation and its claim says it is NOT private.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from fedeval.core.config import PrivacyModel, check_epsilon
from fedeval.core.errors import UsageError
from fedeval.privacy.accounting import calibrate_gaussian
from fedeval.privacy.events import DpEvent, GaussianEvent, NoNoiseEvent
from fedeval.privacy.generator import NAME as GENERATOR_NAME
from fedeval.privacy.generator import SEEDED_NAME
from fedeval.privacy.mechanism import NOT_PRIVATE

MODEL = "multiclass-gaussian"
"""The privacy model in every document's section (binary: federated, distdp, localdp)."""
FEDERATED = "federated"
UNIT = "client"
RELATION = "add-remove"
ACCOUNTING = (
    "zCDP composition of Gaussian releases (Bun & Steinke 2016), converted to (ε, δ) by "
    "dp_accounting's RDP accountant (Canonne, Kamath & Steinke 2020); no amplification by "
    "subsampling is claimed"
)

LARGE_EPSILON = 10.0


def check_epsilon_delta(epsilon: float, delta: float) -> tuple[float, float]:
    """Validate (ε, δ): ε by the rule every fedeval release shares
    (`fedeval.core.config.check_epsilon`:
    finite and > 0), δ here (0 < δ < 1: the binary releases are pure DP and have none); warns when
    ε is unusually large."""
    number = not isinstance(epsilon, bool) and isinstance(epsilon, int | float)
    try:
        check_epsilon(PrivacyModel.DISTDP, epsilon if number else math.nan)
    except UsageError:
        raise UsageError(
            f"`epsilon` must be a positive finite number for `multiclass` user-level DP. "
            f"Found {epsilon!r}."
        ) from None
    if isinstance(delta, bool) or not (isinstance(delta, int | float) and 0 < delta < 1):
        raise UsageError(
            f"`delta` must be in (0, 1) for user-level Gaussian DP (try 1e-5). Found {delta!r}."
        )
    if epsilon > LARGE_EPSILON:
        warnings.warn(
            f"ε = {epsilon:g} is a weak guarantee (above {LARGE_EPSILON:g}).", stacklevel=3
        )
    return float(epsilon), float(delta)


@dataclass(frozen=True)
class DPStatement:
    """The noise a DP calibration run needs for its (ε, δ): the parameters, not the claim (the
    claim is `GaussianMechanism`'s, which reads them).

    `releases` Gaussian releases (T for scaling, 2cT for binning), each with L2 sensitivity its
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
    per_round: int = 0
    """Gaussian releases a participating client contributes to in one round (0: releases/T)."""
    composition: str = ""
    """How `releases` is counted, in words (empty: releases/T per round over T rounds)."""

    @property
    def releases_per_round(self) -> int:
        return self.per_round or self.releases // self.rounds


def dp_statement(
    epsilon: float,
    delta: float,
    *,
    releases: int,
    clip: dict[str, float],
    rounds: int,
    participation: float,
    per_round: int = 0,
    composition: str = "",
) -> DPStatement:
    """Calibrate the noise for `releases` Gaussian releases at (ε, δ): `releases` is what one
    client's data can touch (a client in r of the T rounds touches r rounds' releases, plus any
    evaluation release), which is what composes."""
    epsilon, delta = check_epsilon_delta(epsilon, delta)
    for key, c in clip.items():
        if not (isinstance(c, int | float) and math.isfinite(c) and c > 0):
            raise UsageError(f"the {key} clip norm must be a finite number > 0. Found {c!r}.")
    z = calibrate_gaussian(epsilon, delta, releases)
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
        per_round=per_round,
        composition=composition,
    )


_WHAT = {
    "temperature": "each client's update of log T (the log of its local optimum T_k minus the "
    "broadcast log T, shrunk by its size), one per round it takes part in",
    "evaluation": "each client's held-out NLL gain of the fitted T over T = 1, summed over its "
    "held-out rows (nats), once",
    "positive": "each client's histogram of its class-j positives (one per class)",
    "negative": "each client's histogram of its class-j negatives (one per class)",
}


@dataclass(frozen=True)
class GaussianMechanism:
    """The privacy claim of a multiclass calibration run, in the shape of the binary
    `fedeval.privacy.mechanism.Mechanism`: its `section()` is the privacy section of every
    document (the map, the JSON report, the ledger entry) and the CLI prints its `guarantee()`.

    `dp` is the calibrated noise (None: no DP, secure aggregation only). `seeded` marks a
    reproducible simulation (--seed): the noise can be regenerated from the seed, so the run is
    not private whatever ε says (the guarantee says so; the ledger refuses it).

    Why add-remove of one client: every client's contribution to one release (one temperature
    update, or one histogram) is clipped to L2 norm C, and a client with no data sends nothing.
    Adding or removing all of one client's examples therefore moves each release by at most C in
    L2 norm, and Gaussian noise σ = z·C on each gives 1/(2z²)-zCDP per release, composed over
    the k releases one client's data can touch (the schedule bounds the rounds a client is in;
    the others' releases do not depend on it). The number of enrolled clients K, whom the server
    samples from, is part of the protocol (FedTemp divides by the public cohort size m and the
    check by K), not a statistic of the data.
    """

    dp: DPStatement | None
    seeded: bool = False

    @property
    def model(self) -> str:
        return FEDERATED if self.dp is None else MODEL

    def neighbouring(self) -> str | None:
        """The neighbouring relation in words (None without DP)."""
        if self.dp is None:
            return None
        return (
            "add or remove one client's whole contribution (all its examples, however many: "
            "every update it sends is clipped), among the public number K of enrolled clients "
            "the server samples from"
        )

    def parameters(self) -> dict[str, Any]:
        """The noise and its parameters, as stored in every document."""
        dp = self.dp
        if dp is None:
            return {
                "name": "secure aggregation",
                "noise": "none",
                "note": "exact sums; no differential privacy: an adversary who knows every "
                "other client's data can recover the remaining one",
            }
        return {
            "name": "Gaussian noise on the secure sum of clipped client contributions",
            "clip": dict(dp.clip),
            "clipped": {k: _WHAT[k] for k in dp.clip},
            "sensitivity": "L2 norm of one release's change when one client is added or "
            "removed: its clip norm",
            "noise_multiplier": dp.noise_multiplier,
            "sigma": dict(dp.sigma),
            "rounds": dp.rounds,
            "releases_per_round": dp.releases_per_round,
            "releases": dp.releases,
            "participation": dp.participation,
            "composition": dp.composition
            or f"{dp.releases_per_round} per round over {dp.rounds} rounds",
            "rho": dp.rho,
            "accounting": ACCOUNTING,
        }

    def event(self) -> DpEvent:
        """The DP event the accountant composes: `releases` Gaussian releases of noise
        multiplier z (σ = z × sensitivity)."""
        if self.dp is None:
            return NoNoiseEvent()
        return GaussianEvent(self.dp.noise_multiplier, self.dp.releases)

    def dp_event(self) -> dict[str, Any]:
        """The DP event as every document's privacy section stores it."""
        return self.event().to_dict()

    def _claim(self) -> str:
        dp = self.dp
        if dp is None:
            return (
                "no differential privacy: secure aggregation hides each client's contribution "
                "but the released sums are exact"
            )
        clip = ", ".join(f"C_{k} = {v:g}" for k, v in dp.clip.items())
        sig = ", ".join(f"σ_{k} = {v:.4g}" for k, v in dp.sigma.items())
        how = dp.composition or f"{dp.releases_per_round} per round over {dp.rounds} rounds"
        return (
            f"({dp.epsilon:g}, {dp.delta:g})-DP per client (user-level) for the whole run; "
            f"neighbouring datasets {self.neighbouring()}; {dp.releases} Gaussian releases "
            f"({how}), each of L2 "
            f"sensitivity its clip norm ({clip}) with noise {sig} (z = {dp.noise_multiplier:.4g}), "
            f"compose to ρ = {dp.rho:.4g}-zCDP; participation p = {dp.participation:g} is not "
            "credited (no amplification by subsampling); the number K of enrolled clients is "
            "public (fixed by the protocol, not a statistic of the data), and so is what the "
            "documents derive from it: the cohort size m = round(p·K) and noise scales such as "
            "σ/K; no count of examples, of clients holding data or of per-class examples is "
            "released; holds if the noise is added to the secure sum before anyone sees it"
        )

    def guarantee(self) -> str:
        """The privacy claim in words: exactly what the added noise supports."""
        if self.seeded and self.dp is not None:
            return f"{NOT_PRIVATE}. Without --seed: {self._claim()}"
        return self._claim()

    def server_learns(self) -> str:
        """What the aggregator learns in a deployment (honest-but-curious)."""
        if self.dp is None:
            return (
                "which clients take part in each round, and the exact sums of their "
                "contributions; a single client's contribution stays hidden by secure "
                "aggregation"
            )
        return (
            "which clients take part in each round and the noisy sums; clipped per-client "
            "contributions are hidden by secure aggregation. A server that adds the noise "
            "itself also sees the exact sums: the guarantee then holds against whoever receives "
            "the map, not against that server"
        )

    def analyst_learns(self) -> str:
        """What whoever receives only the map learns."""
        if self.dp is None:
            return "a calibrator fitted on the exact sums (no DP)"
        return (
            "the calibrator (a temperature, or binning values and class weights): "
            f"post-processing of the ({self.dp.epsilon:g}, {self.dp.delta:g})-DP noisy sums"
        )

    def section(self) -> dict[str, Any]:
        """The privacy section every document carries (the ledger reads it); the keys of the
        binary `Mechanism.section()`."""
        dp = self.dp
        return {
            "model": self.model,
            "epsilon": None if dp is None else dp.epsilon,
            "delta": None if dp is None else dp.delta,
            "unit": UNIT,
            "max_examples": None,
            "relation": None if dp is None else RELATION,
            "neighbouring": self.neighbouring(),
            "mechanism": self.parameters(),
            "dp_event": self.dp_event(),
            "height": None,
            "shape": None,
            "levels": None,
            "guarantee": self.guarantee(),
            "server_learns": self.server_learns(),
            "analyst_learns": self.analyst_learns(),
            "reproducible_simulation": self.seeded,
            "randomness": None if dp is None else SEEDED_NAME if self.seeded else GENERATOR_NAME,
            # The Gaussian's own δ is stated; its floating-point tails are not accounted here.
            "sampler_delta": None,
        }


def clip_scalars(x: np.ndarray, bound: float) -> np.ndarray:
    """Clip each value to [−bound, bound]: the L2 clip of a 1-D update."""
    return cast(np.ndarray, np.clip(x, -bound, bound))


def clip_factors(norm_sq: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
    """min(1, bound/‖h‖₂) for each vector given its squared norm: scaling by it clips the vector
    to L2 norm `bound` (1 for a vector already inside, including the zero vector)."""
    norm = np.sqrt(norm_sq)
    return np.where(norm > bound, bound / np.where(norm > 0, norm, 1.0), 1.0)


MulticlassMechanism = GaussianMechanism
"""The name `fedeval.multiclass` has always used for this mechanism."""
