"""Noisy frequencies shrunk toward the identity by their noise, and kept only where they help.

A calibration map read off a noisy release estimates, per bin, the frequency g of positives
among examples whose score (or probability) is near c. The release gives a noisy estimate r of
g with variance V; the identity (the score itself) is c. Both the binary maps (`calibration`)
and the multiclass one-vs-all maps (`fedeval.multiclass.denoise`) post-process r the same way:

- the spread τ² of the gaps g − c across bins by the moment estimator of DerSimonian & Laird
  (1986) with prior mean 0: E Σ (r − c)²/V = k + τ²·Σ 1/V over k bins, τ² = max(·, 0);
- each bin's weight w = τ²/(τ² + V_fit) of the posterior mean (Efron & Morris 1973), V_fit the
  variance of the value the map would use (pooled by a monotone fit, it is smaller than V):
  1 as the noise vanishes, 0 where the bins show no more spread than noise;
- the map's value e = w·fit + (1 − w)·c, and Stein's unbiased risk estimate (Stein 1981) of its
  gain over the identity in mass-weighted squared gap: per bin,
  gain = (c − r)² − (e − r)² − 2·V·∂e/∂r (unbiased for (g − c)² − (g − e)² when r ~ (g, V)),
  SD ≈ 2|e − c|·√V; the map is kept only if Σ mass·gain − 1.645·SD > 0 (one-sided 95 %).

All of it reads the noisy release only: post-processing, no privacy cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

GAIN_Z = 1.6448536269514722
"""One-sided 95 % normal quantile: a map is kept if its estimated gain over the identity is
above 1.645 of that estimate's SD (the rule of FedTemp's held-out check)."""


def ratio_variance(
    g: np.ndarray, mass: np.ndarray, var_pos: np.ndarray, var_neg: np.ndarray
) -> np.ndarray:
    """Variance of P̃/(P̃ + Ñ) at frequency g: the delta method on X/(X + Y) with independent
    noise of variances `var_pos`, `var_neg` ((1 − g)²·v₊ + g²·v₋)/A², plus binomial sampling
    g(1 − g)/A, A = `mass` > 0."""
    noise = ((1 - g) ** 2 * var_pos + g**2 * var_neg) / mass**2
    variance: npt.NDArray[np.float64] = noise + g * (1 - g) / mass
    return variance


@dataclass(frozen=True)
class Shrunk:
    """Weights w and values e = w·fit + (1 − w)·c per bin; `gain` and `gain_var`: the summed
    mass-weighted SURE gain over the identity and its variance; `mass`: the summed mass."""

    weights: np.ndarray
    values: np.ndarray
    gain: float
    gain_var: float
    mass: float

    @property
    def gain_per_mass(self) -> float:
        return self.gain / self.mass if self.mass > 0 else 0.0

    @property
    def sd_per_mass(self) -> float:
        return math.sqrt(self.gain_var) / self.mass if self.mass > 0 else 0.0

    @property
    def kept(self) -> bool:
        """Gain − 1.645·SD > 0: the map shows it beats the identity."""
        return self.gain_per_mass - GAIN_Z * self.sd_per_mass > 0


def shrink_toward_identity(
    raw: np.ndarray,
    fit: np.ndarray,
    var: np.ndarray,
    fit_var: np.ndarray,
    fit_share: np.ndarray,
    ident: np.ndarray,
    mass: np.ndarray,
) -> Shrunk:
    """The shrinkage and its SURE gain (module docstring) for k bins: `raw` r (the noisy
    frequencies), `fit` (the values the map would use, e.g. their isotonic fit), `var` V of r,
    `fit_var` the variance of `fit`, `fit_share` ∂fit/∂r (a bin's share of its pooled block),
    `ident` c, `mass` the bins' noisy masses (> 0)."""
    k = len(raw)
    if k == 0:
        return Shrunk(np.zeros(0), np.zeros(0), 0.0, 0.0, 0.0)
    prec = 1.0 / var
    q = float(np.sum(prec * (raw - ident) ** 2))
    tau2 = max((q - k) / float(prec.sum()), 0.0)
    w = tau2 / (tau2 + fit_var)
    e = w * fit + (1 - w) * ident
    gain = (ident - raw) ** 2 - (e - raw) ** 2 - 2 * var * w * fit_share
    return Shrunk(
        w,
        e,
        float(np.sum(mass * gain)),
        float(np.sum(mass**2 * 4 * (e - ident) ** 2 * var)),
        float(mass.sum()),
    )


def kept_rows(
    raw: np.ndarray,
    fit: np.ndarray,
    var: np.ndarray,
    ident: np.ndarray,
    mass: np.ndarray,
    ok: np.ndarray,
) -> np.ndarray:
    """`shrink_toward_identity(raw, fit, var, var, 1, ident, mass).kept` of each row of a stack
    (R, k) over its bins where `ok` (R, k): the same formulas, each row's sums over its own bins
    (masked, so summed in another order: equal to within a few ulps). A row with no bin is not
    kept."""
    prec = np.where(ok, 1.0 / np.where(ok, var, 1.0), 0.0)
    k = ok.sum(axis=-1)
    q = np.sum(prec * np.where(ok, raw - ident, 0.0) ** 2, axis=-1)
    total_prec = prec.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau2 = np.maximum((q - k) / total_prec, 0.0)[:, None]
        w = tau2 / (tau2 + var)
    e = w * fit + (1 - w) * ident
    gain = (ident - raw) ** 2 - (e - raw) ** 2 - 2 * var * w
    m = np.where(ok, mass, 0.0)
    total_gain = np.sum(np.where(ok, m * gain, 0.0), axis=-1)
    gain_var = np.sum(np.where(ok, m**2 * 4 * (e - ident) ** 2 * var, 0.0), axis=-1)
    total_mass = m.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = total_gain / total_mass - GAIN_Z * np.sqrt(gain_var) / total_mass
    worth: npt.NDArray[np.bool_] = (k > 0) & (total_mass > 0) & (score > 0)
    return worth
