"""The audit's statistics: Clopper–Pearson bounds, the ε lower bound from two samples of a
likelihood-ratio statistic, and χ² and correlation intervals for the per-cohort noise."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds (lower, upper), each at `confidence`, for k of n."""
    alpha = 1.0 - confidence
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class EpsilonBound:
    """The best lower bound on ε found, the event that gave it, and the trials behind it."""

    epsilon_lb: float
    event: str
    trials: int


def epsilon_lower_bound(
    stat_d: np.ndarray,
    stat_dp: np.ndarray,
    *,
    confidence: float = 0.999,
    thresholds: Iterable[float] | None = None,
) -> EpsilonBound:
    """ε lower bound from a test statistic of runs on D (`stat_d`) and on D′ (`stat_dp`).

    Events S = {stat ≥ τ} (evidence for D) and {stat ≤ τ} (evidence for D′, with the roles
    swapped), for every τ in `thresholds` (default: every distinct value seen); the confidence of
    each bound is Bonferroni-corrected for the number of events tried, so the reported bound
    holds at `confidence` overall.
    """
    stat_d = np.asarray(stat_d, float)
    stat_dp = np.asarray(stat_dp, float)
    taus = (
        sorted(set(np.concatenate([stat_d, stat_dp]).tolist()))
        if thresholds is None
        else list(thresholds)
    )
    events = 2 * len(taus)
    per_event = 1.0 - (1.0 - confidence) / (2 * max(events, 1))  # two bounds per event
    n_d, n_dp = len(stat_d), len(stat_dp)
    best = EpsilonBound(0.0, "none", n_d + n_dp)
    for tau in taus:
        for name, a, n_a, b, n_b in (
            (f"stat ≥ {tau:g} (D over D′)", int((stat_d >= tau).sum()), n_d,
             int((stat_dp >= tau).sum()), n_dp),
            (f"stat ≤ {tau:g} (D′ over D)", int((stat_dp <= tau).sum()), n_dp,
             int((stat_d <= tau).sum()), n_d),
        ):  # fmt: skip
            lo, _ = clopper_pearson(a, n_a, per_event)
            _, hi = clopper_pearson(b, n_b, per_event)
            if lo > 0 and hi > 0:
                eps = math.log(lo / hi)
                if eps > best.epsilon_lb:
                    best = EpsilonBound(eps, name, n_d + n_dp)
    return best


def laplace_statistic(x: np.ndarray, c: np.ndarray, c_prime: np.ndarray) -> np.ndarray:
    """Λ(x) = Σ_i |x_i − c′_i| − |x_i − c_i| per row of `x` (released counts, one run per
    row): proportional to the log-likelihood ratio of D (exact counts c) over D′ (c′) under
    discrete Laplace noise, so thresholds of Λ are the optimal events."""
    x = np.asarray(x, float)
    statistic: np.ndarray = (np.abs(x - c_prime) - np.abs(x - c)).sum(axis=1)
    return statistic


def variance_interval(samples: np.ndarray, confidence: float = 0.999) -> tuple[float, float]:
    """Two-sided χ² interval for the variance of (nearly normal or not) noise samples.

    For heavy-ish tails (discrete Laplace has kurtosis 6 + …) the plain χ² interval is too
    narrow; the interval uses the sample kurtosis (the large-sample variance of s² is
    σ⁴(κ − 1)/n), which is what makes it honest for Laplace noise."""
    x = np.asarray(samples, float).ravel()
    n = len(x)
    s2 = float(x.var(ddof=1))
    kurt = float(stats.kurtosis(x, fisher=False)) if n > 3 else 3.0
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    half = z * s2 * math.sqrt(max(kurt - 1.0, 2.0) / n)
    return max(s2 - half, 0.0), s2 + half


def correlation_bound(samples: np.ndarray, confidence: float = 0.999) -> tuple[float, float]:
    """(largest |correlation| between the noise of two released counts, the bound it must stay
    under if the noise on different counts is independent), over runs (axis 0).

    Independent noise gives sample correlations ≈ N(0, 1/T); the bound is Bonferroni-corrected
    over the pairs. Noise reused across counts (one draw added to every level, say) leaves each
    count's variance right but correlates them, which neither the variance check nor a
    per-field scan sees.
    """
    x = np.asarray(samples, float)
    t, k = x.shape
    if k < 2:
        return 0.0, 1.0
    r = np.corrcoef(x, rowvar=False)
    worst = float(np.max(np.abs(r[np.triu_indices(k, 1)])))
    pairs = k * (k - 1) / 2
    z = float(stats.norm.ppf(1 - (1 - confidence) / (2 * pairs)))
    return worst, z / math.sqrt(t)
