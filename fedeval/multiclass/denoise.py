"""Binning maps from noisy histograms: monotone, shrunk by each bin's noise, or the identity.

Under user-level DP the server holds, per class j (or once, pooled) and bin m, the noisy sums
P̃_m = P_m + e₊ and Ñ_m = N_m + e₋ of the clients' clipped positive and negative histograms, with
Gaussian noise of known standard deviation. Read as frequencies, P̃/(P̃ + Ñ) are noise where the
bins hold little: a bin may map to 0 or 1 for no reason the data give. A calibrator built on them
should never be worse than the model's own probabilities (the identity), and this module builds
one by post-processing the release alone (no further privacy cost):

1. **Bins the noise can read.** Released bins are gathered from the top down into groups, each
   closed once its noisy mass Ã = P̃ + Ñ is MASS_Z = 4 of its noise SDs above 0 (a ratio with a
   denominator nearer its noise has no usable variance); bins left over below the last group,
   and bins not released, carry no estimate and keep the identity. Where the noise is small
   every bin is its own group: plain binning.
2. **Per-group estimate and its variance.** r = clip(P̃/Ã, 0, 1) with
   V = ((1 − g)²·v₊ + g²·v₋)/Ã² + g(1 − g)/Ã (delta method on X/(X + Y) with independent noise
   of variances v₊, v₋ summed over the group, plus binomial sampling), taken at the larger of
   g = the fit and g = the group's identity value c (its bins' midpoints weighted by their
   noisy mass): at a noisy g of 0 or 1 one noise term would vanish and the group look precise.
3. **Monotone.** Isotonic regression (pool adjacent violators) of r over the groups, weighted by
   1/V — inverse noise variance, so a group drowned in noise barely moves its neighbours; the
   weights are recomputed once at the fit. A pooled block's estimate has variance 1/Σ 1/V.
4. **Shrunk toward the identity by its noise.** The gap g − c has a spread τ² across groups,
   estimated by the moment estimator of DerSimonian & Laird (1986) with prior mean 0:
   E Σ (r − c)²/V = k + τ²·Σ 1/V over the k groups. Each group keeps the weight
   w = τ²/(τ² + V_block) of the posterior mean (Efron & Morris 1973): 1 as the noise vanishes,
   0 where the groups hold no more spread than noise (τ² = 0: the identity everywhere). The
   calibrated output is w·g + (1 − w)·p for the example's own probability p (the caller keeps
   w·g + (1 − w)·(bin midpoint) non-decreasing over the bins: `binning.monotone_values`).
5. **Kept only where it helps.** Stein's unbiased risk estimate (Stein 1981) of the
   mass-weighted squared gap, map against identity: per group, with the map's value
   e = w·g + (1 − w)·c, gain = (c − r)² − (e − r)² − 2·V·∂e/∂r, ∂e/∂r = w·(1/V)/Σ_block 1/V;
   its SD ≈ 2|e − c|·√V. The map is kept if Σ Ã·gain − 1.645·SD > 0 (one-sided 95 %, the rule
   FedTemp's held-out check uses); otherwise every weight is 0 — the identity — and the map says
   so (`NoisyBinning.to_dict`, the map's ``safeguard``).

FedBBQ under DP is the same map: BBQ's Beta-Binomial evidence needs counts, and noisy sums are
not counts; the grouping of step 1 is its merging of bins, chosen by the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression

from fedeval.estimate.shrinkage import GAIN_Z, ratio_variance, shrink_toward_identity

MASS_Z = 4.0
"""A bin's noisy mass must be this many of its noise SDs above 0 to carry an estimate: nearer 0
the ratio P̃/Ã has no usable variance (its denominator may be noise alone)."""

WEIGHT_FLOOR = 1e-12
"""Weights below this are 0 (a bin without an estimate)."""


@dataclass(frozen=True, eq=False)
class NoisyBinning:
    """The post-processed binning of one release.

    `values` (c, B): g_j(m) ∈ [0, 1]; `weights` (c, B): w_j(m) ∈ [0, 1], the calibrated output
    being w·g + (1 − w)·p. `gain`: the estimated reduction of the mass-weighted mean squared
    calibration gap (map against identity; > 0 helps), `gain_sd` its SD; `kept`: gain − 1.645·SD
    > 0, else every weight is 0 (the identity).
    """

    values: np.ndarray
    weights: np.ndarray
    gain: float
    gain_sd: float
    kept: bool

    @property
    def lower(self) -> float:
        return self.gain - GAIN_Z * self.gain_sd

    def to_dict(self) -> dict[str, Any]:
        """The map's ``safeguard`` section for a binning map fitted under DP."""
        out: dict[str, Any] = {
            "metric": "estimated reduction, from the noisy sums alone, of the mass-weighted mean "
            "squared gap between each bin's frequency and its mean confidence, the map against "
            "the identity (Stein's unbiased risk estimate; > 0 helps)",
            "gain": self.gain,
            "noise_sd": self.gain_sd,
            "lower_95": self.lower,
            "kept": self.kept,
            "rule": "keep the binning if gain − 1.645·noise_sd > 0, else release the identity "
            "(every bin weight 0: the model's own probabilities)",
            "post_processing": "bin values made monotone (isotonic regression on the noisy "
            "counts, weighted by their inverse noise variance) and shrunk toward the identity "
            "by each bin's noise variance (empirical Bayes); every step reads only the noisy "
            "release: no further privacy cost",
        }
        return out


def _blocks(values: np.ndarray) -> np.ndarray:
    """Block id of each entry of an isotonic fit: runs of equal values."""
    blocks: np.ndarray = np.r_[0, np.cumsum(np.diff(values) != 0)]
    return blocks


@dataclass(frozen=True)
class _Row:
    """One class's denoised bins (intermediate): values g, weights w, SURE gain and variance
    terms (mass-weighted sums, not yet normalised)."""

    g: np.ndarray
    w: np.ndarray
    gain: float
    gain_var: float
    mass: float


def _groups(mass: np.ndarray, var: np.ndarray, released: np.ndarray) -> np.ndarray:
    """Group id of each bin: released bins taken from the top down are gathered until the
    group's noisy mass is MASS_Z of its noise SDs (√ of the summed variances) above 0; the bins
    of a last group short of it, and bins not released, get −1 (no estimate: the identity). A
    loop over the B bins of one class (where a group ends depends on what it has gathered)."""
    out = np.full(len(mass), -1, np.int64)
    gid, acc_m, acc_v, members = 0, 0.0, 0.0, []
    for m in range(len(mass) - 1, -1, -1):
        if not released[m]:
            continue
        members.append(m)
        acc_m, acc_v = acc_m + mass[m], acc_v + var[m]
        if acc_m > MASS_Z * math.sqrt(acc_v):
            out[members] = gid
            gid, acc_m, acc_v, members = gid + 1, 0.0, 0.0, []
    top = out.max()
    return np.where(out >= 0, top - out, -1)  # number the groups upward


def _denoise_row(
    pos: np.ndarray,
    neg: np.ndarray,
    var_pos: np.ndarray,
    var_neg: np.ndarray,
    ident: np.ndarray,
    released: np.ndarray,
) -> _Row:
    """Steps 1–4 of the module docstring on one class's bins (no fallback decided here)."""
    n = len(pos)
    group = _groups(pos + neg, var_pos + var_neg, released)
    g_out = ident.copy()
    w_out = np.zeros(n)
    if group.max() < 0:
        return _Row(g_out, w_out, 0.0, 0.0, 0.0)
    sel = group >= 0
    k = int(group.max()) + 1
    gs = group[sel]
    p = np.bincount(gs, pos[sel], minlength=k)
    a = p + np.bincount(gs, neg[sel], minlength=k)
    vp = np.bincount(gs, var_pos[sel], minlength=k)
    vn = np.bincount(gs, var_neg[sel], minlength=k)
    mass_fine = np.clip(pos + neg, 0.0, None)[sel]
    cm = np.bincount(gs, mass_fine, minlength=k)
    c = np.where(
        cm > 0,
        np.bincount(gs, mass_fine * ident[sel], minlength=k) / np.where(cm > 0, cm, 1.0),
        np.bincount(gs, ident[sel], minlength=k) / np.bincount(gs, minlength=k),
    )
    r = np.clip(p / a, 0.0, 1.0)
    var_c = ratio_variance(c, a, vp, vn)
    var = var_c
    fit = r
    for _ in range(2):  # weights at the identity, then at the fit
        fit = isotonic_regression(r, weights=1.0 / var).x
        var = np.maximum(ratio_variance(fit, a, vp, vn), var_c)
    prec = 1.0 / var
    block = _blocks(fit)
    block_prec = np.bincount(block, prec)[block]
    s = shrink_toward_identity(r, fit, var, 1.0 / block_prec, prec / block_prec, c, a)
    g_out[sel], w_out[sel] = fit[gs], s.weights[gs]
    return _Row(g_out, w_out, s.gain, s.gain_var, s.mass)


def denoise_binning(
    pos: np.ndarray,
    neg: np.ndarray,
    sigma: tuple[float, float],
    *,
    released: np.ndarray | None = None,
) -> NoisyBinning:
    """The binning map of noisy one-vs-all sums `pos`, `neg` (c, B) with Gaussian noise of SD
    `sigma` = (σ₊, σ₋) on every released bin (`released` (B,) bool; default all), as the
    module docstring describes.

    Returns the values and weights on the B bins, and whether the map was kept; when it was
    not, every weight is 0 and every value the bin's midpoint (the identity).
    """
    pos = np.atleast_2d(np.asarray(pos, dtype=np.float64))
    neg = np.atleast_2d(np.asarray(neg, dtype=np.float64))
    c, n_bins = pos.shape
    rel = np.ones(n_bins, bool) if released is None else np.asarray(released, bool)
    if rel.shape != (n_bins,):
        raise ValueError(f"`released` needs one flag per bin ({n_bins}). Found {rel.shape}.")
    mids = (np.arange(n_bins) + 0.5) / n_bins
    var_pos = np.where(rel, sigma[0] ** 2, 0.0)
    var_neg = np.where(rel, sigma[1] ** 2, 0.0)
    g = np.empty((c, n_bins))
    w = np.empty((c, n_bins))
    gain = gain_var = total = 0.0
    for j in range(c):  # c rows of B bins: the loop is over classes only
        row = _denoise_row(pos[j], neg[j], var_pos, var_neg, mids, rel)
        gain, gain_var, total = gain + row.gain, gain_var + row.gain_var, total + row.mass
        g[j], w[j] = row.g, row.w
    if total > 0:
        gain, sd = gain / total, math.sqrt(gain_var) / total
    else:
        gain, sd = 0.0, 0.0
    kept = gain - GAIN_Z * sd > 0
    if not kept:
        return NoisyBinning(np.tile(mids, (c, 1)), np.zeros((c, n_bins)), gain, sd, False)
    g = np.where(w > WEIGHT_FLOOR, g, mids)
    w = np.where(w > WEIGHT_FLOOR, w, 0.0)
    return NoisyBinning(g, w, gain, sd, True)
