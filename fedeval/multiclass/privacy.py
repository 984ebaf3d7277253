"""The multiclass calibration's privacy settings: the clip norms it defaults to.

The mechanism itself — clipping, Gaussian noise on the secure sum, its calibration, claim and DP
event — is `fedeval.privacy.gaussian` (re-exported here under the names this package has always
used); its accounting is `fedeval.privacy.accounting`.
"""

from __future__ import annotations

from fedeval.privacy.accounting import CALIBRATION_ORDERS, calibrate_gaussian, gaussian_epsilon
from fedeval.privacy.gaussian import (
    ACCOUNTING,
    FEDERATED,
    LARGE_EPSILON,
    MODEL,
    RELATION,
    UNIT,
    DPStatement,
    GaussianMechanism,
    MulticlassMechanism,
    check_epsilon_delta,
    clip_factors,
    clip_scalars,
    dp_statement,
)

__all__ = [
    "ACCOUNTING",
    "DEFAULT_NEGATIVE_CLIP",
    "DEFAULT_POOLED_CLIP",
    "DEFAULT_POSITIVE_CLIP",
    "DEFAULT_TEMPERATURE_CLIP",
    "FEDERATED",
    "LARGE_EPSILON",
    "MODEL",
    "ORDERS",
    "RELATION",
    "UNIT",
    "DPStatement",
    "GaussianMechanism",
    "MulticlassMechanism",
    "calibrate_noise",
    "check_epsilon_delta",
    "clip_factors",
    "clip_scalars",
    "dp_statement",
    "epsilon_of",
]

ORDERS = CALIBRATION_ORDERS
epsilon_of = gaussian_epsilon
calibrate_noise = calibrate_gaussian

DEFAULT_TEMPERATURE_CLIP = 0.5
"""C for FedTemp's updates of log T: the paper's value (appendix A.3.2: C < 1 worked best,
C = 0.5 in every DP experiment), read in log units: one client, and under DP one round's step
(the trust region), moves T by a factor of at most e^0.5 ≈ 1.65. A far optimum (T₀ = 2.5 is
log 2.5 ≈ 0.92 away from T = 1) is reached in the ⌈T/2⌉ travel rounds; a skewed client cannot
drag the global temperature (appendix A.3.5)."""

DEFAULT_POSITIVE_CLIP = 10.0
DEFAULT_NEGATIVE_CLIP = 50.0
"""C₊, C₋ for the one-vs-all histograms: the paper's [C₊, C₋] = [10, 50] (section 5, RQ3). A
client's class-j positive histogram holds its class-j examples, few and spread over few bins, so
a small C₊ clips little and keeps the noise on the positive counts (which set the map) low
(appendix A.3.4); negatives are c−1 times as many, hence the larger C₋. Raise both for clients
holding thousands of examples each."""

DEFAULT_POOLED_CLIP = (1.0, 1.0)
"""C₊, C₋ for the class-pooled histograms (bin 0 not sent). A client's two histograms are
scaled by one factor f = min(C₊/‖h₊‖, C₋/‖h₋‖) and the noise is σ₊ = z·C₊, σ₋ = z·C₋ (z set by
(ε, δ) alone), so only the ratio C₊/C₋ matters once both bind, and a C₊ above C₋·‖h₊‖/‖h₋‖
adds noise to the positive counts with no more signal: the variance of a bin's frequency g,
((1 − g)²·σ₊² + g²·σ₋²)/A², grows with C₊² while its mass A stays. The earlier (10, 1) put
that noise where the map is read (measured on over-confident 10- and 30-class outputs, K = 100,
(1, 1e-5)-DP, 10 seeds: the map was kept in 2 and 0 of 10 seeds; at (1, 1), 5 and 8 of 10,
median cwECE 5.39 → 5.17 % and 2.58 → 2.31 %, never worse than uncalibrated; a client's ratio
‖h₊‖/‖h₋‖ was 1.3–3.3 there, and (1.5, 1), (3, 1) kept fewer). Small clips make every client
weigh about equally."""
