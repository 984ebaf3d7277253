"""The AP's noise pull and spread measured at two added noise levels and extrapolated to the
release's own (SIMEX, Cook & Stefanski, JASA 89, 1994), read by
`fedeval.estimate.average_precision.leaf_ap_interval_parts`.

Only noise can be added to a release, never taken out: the leaves re-noised with the draws d
(total noise sd u = √2 of the release's) and with √2·d (u = √3, the same draws: common random
numbers, so the two levels' means differ by far less than their own spreads) show how the
mean AP moves with the noise; a curve through them and the release (u = 1), read at u = 0, is
the AP without the noise's pull."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

SIMEX_SCALES = (1.0, math.sqrt(2.0))
"""The added noise's sd at the two levels, in the release's: variance 1× and 2× the release's
added (total sd u = √2 and √3)."""

_U = np.array([1.0, *(math.sqrt(1.0 + a * a) for a in SIMEX_SCALES)])
_X = np.stack([np.ones(3), _U, _U**2], axis=1)
SIMEX_WEIGHTS: npt.NDArray[np.float64] = np.linalg.solve(_X.T, np.array([1.0, 0.0, 0.0]))
"""Lagrange weights of the quadratic in u through (1, AP), (√2, mean AP), (√3, mean AP), read at
u = 0: (8.08, −13.16, 6.08). A curve linear in u (the old constant 1/(√2 − 1)) is one of them;
a pull growing less than linearly (where the monotone fit turns the noise of many empty leaves
into a few spurious examples above the data) bends it, which the quadratic follows."""


def simex_pull(estimate: float, once: np.ndarray, twice: np.ndarray) -> tuple[float, float, float]:
    """(pull, its own spread, spread factor) of the AP from the AP of the leaves re-noised with
    each draw d (`once`, (D,)) and with √2·d (`twice`), undefined draws (nan) left out.

    pull: the release's AP less the quadratic's value at no noise (`SIMEX_WEIGHTS`), so that
    AP − pull estimates the AP of the noiseless leaves; its spread: that of the weighted
    per-draw sums over √D (the draws are finite; a curve read three-fold beyond its points
    amplifies their noise). Spread factor: the re-noised spread per unit of added noise,
    sd(a)/a, falls as noise is added (a = 1: sd of `once`; a = √2: sd of `twice` / √2); read
    linearly in a at a = 0 it is the spread at the release, over that at a = 1 (never below 1).

    Why: the pull was taken as (√2 − 1)⁻¹ times the once-re-noised mean's, which holds where it
    grows like the noise's sd. Scores in [0, 0.01] on the [0, 1] axis (100k rows, 20%
    positives, distdp ε = 1, h = 14: 16,000 empty leaves above the data) pull the AP by
    −3.5e-3 at the release, ∝ u^0.75 over u = 1 … 2.2 (100 releases); the old constant gave
    −2.3e-3 and the interval held 0.880 of 100 releases, and the re-noised spread (4.57e-3)
    fell under the spread over releases (5.03e-3), which sd(a)/a read at a = 0 gives (5.07e-3).
    With both, and the pull's own spread (60 draws: ≈ 0.6 of the noise's σ), 0.957 of 300
    releases (median width 2.03e-2 → 2.6e-2; benchmarks/hard.py --quick, AP widths 1.02–1.33×).
    """
    ok = np.isfinite(once) & np.isfinite(twice)
    n = int(ok.sum())
    if n < 2:
        return 0.0, 0.0, 1.0
    w = SIMEX_WEIGHTS
    # AP at u = 0 is w·(estimate, once, twice); the pull: the estimate less it
    per_draw = -(w[1] * (once[ok] - estimate) + w[2] * (twice[ok] - estimate))
    pull = float(per_draw.mean())
    pull_sd = float(per_draw.std(ddof=1)) / math.sqrt(n)
    s1 = float(once[ok].std(ddof=1)) / SIMEX_SCALES[0]
    s2 = float(twice[ok].std(ddof=1)) / SIMEX_SCALES[1]
    factor = 1.0
    if s1 > 0:
        at_zero = s1 + (s1 - s2) * SIMEX_SCALES[0] / (SIMEX_SCALES[1] - SIMEX_SCALES[0])
        factor = max(at_zero / s1, 1.0)
    return pull, pull_sd, factor
