"""The Richardson step on leaves of unequal widths: each parent's share of its extra ordering.

The AUC's and the AP's smooth readings extrapolate in leaf width from the release's own level
one up (`fedeval.estimate.smoothness.auc_parts`, `fedeval.estimate.average_precision.
leaf_ap_candidates`): (value one level up − value)/3, the step for an O(w²) error of leaves that
halve their parents. At the thresholds' alignment level the leaves are cut at the declared
thresholds instead (`fedeval.core.axis`: widths 1/11 and 1/22 for the default k/11), and there
each parent's step is weighed by its own leaves' widths. Where the step has not reached its
rate (the data in a few leaves of the axis) the AUC's range reaches on to the Romberg step's
value (`romberg_step`). Post-processing of the release only.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fedeval.estimate.roc_pr import leaf_ap_terms

RICHARDSON_SHARE_CAP = 1.0
"""The largest share of its parent's extra ordering a pair of leaves' own bias is read as
(`richardson_shares`): the O(w) worst case of a smooth density (the bias halves with the leaf,
so the step one level up is the bias itself), reached at leaves of widths about 4:1."""


def richardson_shares(edges: np.ndarray | None) -> npt.NDArray[np.float64] | None:
    """Per parent (pair of neighbouring leaves, lowest first), the leaves' own discretisation
    bias over the parent's extra ordering (AUC one level up − AUC): (w₁³ + w₂³)/(W³ − w₁³ − w₂³)
    for leaves of widths w₁, w₂ in a parent of width W, at most RICHARDSON_SHARE_CAP; None where
    every parent splits into equal halves (the Richardson step's ⅓, read as before).

    Where the scores are smooth a cell of width w holds pairs ∝ w² that depart from ½ by
    O(w) each (the classes' density ratio changes across it), so its bias is c·w³ with c set by
    the densities there: the parent's c·W³ against its leaves' c·(w₁³ + w₂³). Equal halves give
    ⅓ (Richardson's step for an O(w²) error); a leaf twice its sibling's width gives ½. Leaves
    at the thresholds' alignment level are cut at the declared thresholds, not in halves
    (`fedeval.core.axis`), and ⅓ there left the AUC's interval short of its bias (smooth
    scores, 5% positives, 16 leaves: the truth above the interval in 11% of distdp releases)."""
    if edges is None:
        return None
    w = np.diff(np.asarray(edges, dtype=np.float64))
    if w.size < 2 or w.size % 2:
        return None
    lower, upper = w[0::2], w[1::2]
    if np.allclose(lower, upper, rtol=1e-9, atol=0.0):
        return None
    own = lower**3 + upper**3
    extra = (lower + upper) ** 3 - own
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(extra > 0, own / np.where(extra > 0, extra, 1.0), RICHARDSON_SHARE_CAP)
    out: npt.NDArray[np.float64] = np.minimum(shares, RICHARDSON_SHARE_CAP)
    return out


def shared_step(
    fine: tuple[np.ndarray, np.ndarray],
    coarse: tuple[np.ndarray, np.ndarray],
    shares: np.ndarray,
    rule: str,
) -> np.ndarray:
    """The AP's Richardson step with a share per parent (`richardson_shares`, leaves of
    unequal widths): Σ over parents of its share × (the parent's
    term one level up − its two leaves' terms), over the class total, per row of tails.

    Merging one parent's leaves changes only its own positives' precisions (the counts above
    every other leaf stay), so AP_{h−1} − AP_h is the sum of the parents' changes, and each
    is weighed as the AUC weighs its parent's extra ordering. Equal shares of ⅓ give
    (AP_{h−1} − AP_h)/3 (before its final clip)."""
    fine_terms, coarse_terms = leaf_ap_terms(*fine, rule), leaf_ap_terms(*coarse, rule)
    change = coarse_terms - fine_terms[..., 0::2] - fine_terms[..., 1::2]
    total = fine[1][..., -1]
    # Terms run top leaf first; shares lowest parent first.
    step = (change * shares[::-1]).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(total > 0, step / np.where(total > 0, total, 1.0), 0.0)
    return out


def step_variance(
    negatives: np.ndarray,
    positives: np.ndarray,
    shares: np.ndarray | None = None,
    pairs: np.ndarray | float | None = None,
) -> npt.NDArray[np.float64]:
    """The sampling variance of the AUC's Richardson step Σⱼ sⱼ(p_L·n_U − p_U·n_L)/(2PN) over
    cells (..., L) paired as parents (2j, 2j + 1), given each parent's totals p, n: each
    example falls in the lower or upper cell independently (a smooth density sampled), so
    p_L·n_U − p_U·n_L = p·n_U − n·p_U has variance n²·Var(p_U) + p²·Var(n_U), each binomial's
    estimated without bias by p_L·p_U/(p − 1). sⱼ: `richardson_shares` (None: ⅓ each).

    The step is read from the same data it corrects: it is an estimate of the smooth bias
    with its own sampling error, independent of the order inside the cells (given the cells'
    counts), so its variance adds to the Mann-Whitney one. Without it, federated AUC intervals
    at a fixed height held 0.80-0.93 of 400 data draws on smooth, squeezed, two-range, bimodal
    and rare scores (100k rows, h = 6-12; the error's spread 1.1-1.35× the order's), 0.935-0.985
    with it (`benchmarks/hard.py --models federated --height H`), but for squeezed scores at
    h = 8 (0.80 → 0.85), where the step itself is far from its O(w²) rate: there the
    Romberg step's end (`romberg_step`) holds them (0.983).
    `pairs`: the AUC's P·N (default: over these cells, clamped at 0); 0 where it is not
    positive or the cells do not pair.

    >>> float(step_variance(np.array([2.0, 0, 0, 2]), np.array([0.0, 2, 2, 0])))  # p_L p_U = 0
    0.0
    >>> round(float(step_variance(np.array([1.0, 1]), np.array([1.0, 1]))), 6)  # (4·1 + 4·1)/9/64
    0.013889
    """
    neg = np.clip(np.asarray(negatives, dtype=np.float64), 0.0, None)
    pos = np.clip(np.asarray(positives, dtype=np.float64), 0.0, None)
    cells = pos.shape[-1]
    if cells < 2 or cells % 2:
        return np.zeros(pos.shape[:-1])
    pl, pu, nl, nu = pos[..., 0::2], pos[..., 1::2], neg[..., 0::2], neg[..., 1::2]
    p, n = pl + pu, nl + nu
    with np.errstate(divide="ignore", invalid="ignore"):
        var_p = np.where(p > 1, pl * pu / np.where(p > 1, p - 1.0, 1.0), 0.0)
        var_n = np.where(n > 1, nl * nu / np.where(n > 1, n - 1.0, 1.0), 0.0)
    s = 1.0 / 3.0 if shares is None else shares
    terms = (s * s) * (n * n * var_p + p * p * var_n)
    total = 2.0 * (pos.sum(axis=-1) * neg.sum(axis=-1) if pairs is None else np.asarray(pairs))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(total > 0, terms.sum(axis=-1) / np.where(total > 0, total, 1.0) ** 2, 0.0)
    return np.asarray(out, dtype=np.float64)


ROMBERG_DIVISOR = 15.0
"""The Romberg step's divisor 2⁴ − 1: the remainder the Richardson step leaves is O(w⁴) on a
density smooth at the leaves' scale, so halving the leaves cuts it 16-fold
(`romberg_step`)."""


def romberg_step(
    negatives: np.ndarray,
    positives: np.ndarray,
    fine_shares: np.ndarray | None,
    coarse_shares: np.ndarray | None,
    pairs: np.ndarray | float,
) -> npt.NDArray[np.float64]:
    """The Romberg step (R₁(h) − R₁(h−1))/15 of the Richardson-corrected AUC R₁ of cells
    (..., L), L a multiple of 4, read at their own width (h) and with their parents (h − 1,
    pairs of cells merged), over `pairs` (the AUC's P·N); 0 where L is not a multiple of 4 or
    `pairs` is not positive. `fine_shares`, `coarse_shares`: `richardson_shares` of the cells'
    and of their parents' edges (None: ⅓ each).

    With dⱼ = p_L·n_U − p_U·n_L per parent (its pairs counted ½ that its two cells order), the
    raw AUC one level up is raw + Σdⱼ/(2PN) and R₁ = raw − Σsⱼdⱼ/(2PN), so
    R₁(h) − R₁(h−1) = (Σₖ sₖDₖ − Σⱼ (1 + sⱼ)dⱼ)/(2PN), Dₖ the same pairs of the parents
    (grandparent k). Where the Richardson step has reached its O(w²) rate the parents' bias
    is 4× the cells' (Dₖ-terms cancel the dⱼ-terms) and the step is the O(w⁴) remainder's
    sixteenth part (Romberg's second column: Richardson 1911; Press et al., Numerical Recipes
    §4.3). Where the coarse level is far from that rate (scores squeezed into a few cells of
    the axis: R₁'s error fell 26-fold from h = 7 to h = 8 where w⁴ falls 16-fold) the step
    says how far R₁ may still be from the smooth limit; `fedeval.estimate.interval_parts`
    takes R₁ + step as the far end of the AUC's smooth range.

    >>> n, p = np.array([2.0, 1, 1, 0]), np.array([0.0, 1, 1, 2])
    >>> round(float(romberg_step(n, p, None, None, 16.0)), 6)  # (⅓·(−8) + (4/3)·4)/(2·16)/15
    0.005556
    >>> float(romberg_step(n[:2], p[:2], None, None, 1.0))  # no grandparent
    0.0
    """
    neg = np.asarray(negatives, dtype=np.float64)
    pos = np.asarray(positives, dtype=np.float64)
    cells = pos.shape[-1]
    if cells < 4 or cells % 4:
        return np.zeros(pos.shape[:-1])

    def ordered(p: np.ndarray, n: np.ndarray) -> np.ndarray:
        out: np.ndarray = p[..., 0::2] * n[..., 1::2] - p[..., 1::2] * n[..., 0::2]
        return out

    fine = ordered(pos, neg)
    coarse = ordered(pos[..., 0::2] + pos[..., 1::2], neg[..., 0::2] + neg[..., 1::2])
    s_fine = 1.0 / 3.0 if fine_shares is None else fine_shares
    s_coarse = 1.0 / 3.0 if coarse_shares is None else coarse_shares
    diff = (s_coarse * coarse).sum(axis=-1) - ((1.0 + s_fine) * fine).sum(axis=-1)
    total = 2.0 * ROMBERG_DIVISOR * np.asarray(pairs, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(total > 0, diff / np.where(total > 0, total, 1.0), 0.0)
    return np.asarray(out, dtype=np.float64)


ROMBERG_SDS = 2.0
"""The Romberg step counts only beyond this many sds of its own noise (`shrunk_step`): under
DP noise R₁(h) − R₁(h−1) is a difference of noisy corrections, and a step within its noise
shows nothing the release can tell from a converged one (the noise is in the interval's σ
already). At 2 sds a noise-only step counts in ~5% of releases, by ~0.01 sd on average."""


def shrunk_step(step: np.ndarray | float, spread: float) -> npt.NDArray[np.float64]:
    """The step less ROMBERG_SDS × its noise `spread` in size, 0 where within it (soft
    thresholding: continuous in the step): sign(x)·max(|x| − 2σ, 0). `spread` 0 (no noise:
    federated) leaves the step as it is.

    >>> shrunk_step(np.array([3.0, -1.0, -5.0]), 1.0).tolist()
    [1.0, 0.0, -3.0]
    """
    x = np.asarray(step, dtype=np.float64)
    reach = ROMBERG_SDS * spread
    out: npt.NDArray[np.float64] = x - np.clip(x, -reach, reach)
    return out
