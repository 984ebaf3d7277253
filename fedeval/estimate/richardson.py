"""The Richardson step on leaves of unequal widths: each parent's share of its extra ordering.

The AUC's and the AP's smooth readings extrapolate in leaf width from the release's own level
one up (`fedeval.estimate.smoothness.auc_parts`, `fedeval.estimate.average_precision.
leaf_ap_candidates`): (value one level up − value)/3, the step for an O(w²) error of leaves that
halve their parents. At the thresholds' alignment level the leaves are cut at the declared
thresholds instead (`fedeval.core.axis`: widths 1/11 and 1/22 for the default k/11), and there
each parent's step is weighed by its own leaves' widths. Post-processing of the release only.
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
