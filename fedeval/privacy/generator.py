"""Where a private run's noise comes from, and what the samplers' finite precision costs.

**The generator.** An unseeded run draws every noise share, OUE bit and resample from one
`numpy.random.Generator` over randomgen's ``AESCounter``: the AES-128 keystream in counter mode
(hardware AES where the CPU has it), keyed through `numpy.random.SeedSequence` from 128 bits of
the OS CSPRNG (`secrets`). AES-CTR is a cryptographic generator: without the key its output
cannot be told from uniform bits, so no party can predict or reconstruct the noise from the
parts of it that a release exposes. numpy's default PCG64 (what these runs used before) is a
statistical generator: its state follows from a few of its raw outputs. Its cost is nil here:
`benchmarks/noise_generator.py` measured AES-CTR at 0.66–0.92 × PCG64's time on the samplers
(discrete Laplace, OUE) and on whole runs (hardware AES). Masks are not drawn here: they come
from `fedeval.secagg` (AES-256-CTR of pair keys). A `--seed` run keeps PCG64, reproducible and
not private, and says so.

**δ of the samplers.** numpy's samplers work in 53-bit floating point: a uniform is never
below 2^-53, so noise beyond what such a uniform reaches is never drawn (the fast discrete
Laplace draws ⌈E/λ⌉ with E a standard exponential, which stays below E_MAX = 53·ln 2 + r, r the
ziggurat's tail start: at α = 0.789 no count moves by more than 187; Pólya shares are sums of
logarithmic jumps of at most 1 + 53·ln 2/λ each). The released noise therefore differs from
the exact discrete Laplace by at most η = 2^-51·f in total variation per count (f ≥ 1 the share
factor of `--colluders`, 1 without). The fast sampler's truncated tail has mass 2e^{λ−E_MAX}
below 2e-19 where it draws exponentials (α > 2/3), and about 2·2^-53 where numpy searches the
cumulative sum (α ≤ 2/3, which stops once 1 − α^X rounds to 1); the jumps of a count's shares
number Poisson(2f·ℓ) (ℓ = −ln(1 − α)), each beyond its cap k = ⌈53·ln 2/λ⌉ with probability at
most α^k/(k·ℓ·(1 − α)) ≤ 2^-53/(k·ℓ·(1 − α)), and k·(1 − α) > 1/2 for every α. A mechanism
within η·C of a pure ε-DP one in total variation (C released counts) is (ε, δ)-DP with
δ = (1 + e^ε)·C·η. This module states
that δ; draws within the samplers' range are taken as exact (no exact-arithmetic sampler is
used), which every document says.
"""

from __future__ import annotations

import math

import numpy as np

NAME = (
    "AES-128-CTR (randomgen AESCounter), keyed through numpy SeedSequence from 128 bits of the "
    "OS CSPRNG"
)
"""The generator of an unseeded run's noise, as documents state it."""

SEEDED_NAME = "numpy PCG64 from the given seed (reproducible; not private)"

E_MAX = 53 * math.log(2) + 7.69711747013104972
"""The largest standard exponential numpy's ziggurat draws: its tail start r plus −ln 2^-53."""

ETA = 2.0**-51
"""Total-variation distance per released count between the sampled and the exact discrete
Laplace, a bound for both samplers (module docstring), times the share factor."""


def private_generator() -> np.random.Generator:
    """A Generator for private noise: AES-128-CTR keyed from the OS CSPRNG."""
    from randomgen import AESCounter  # type: ignore[import-untyped, unused-ignore]  # py.typed in some versions only

    return np.random.Generator(AESCounter(np.random.SeedSequence()))


def fast_sampler_bound(alpha: float) -> int:
    """The largest |noise| the fast discrete-Laplace sampler can draw at α: ⌈E_MAX/λ⌉ − 1."""
    return math.ceil(E_MAX / -math.log(alpha)) - 1


def sampler_delta(epsilon: float, counts: int, share_factor: float = 1.0) -> float:
    """δ of a release of `counts` noisy counts at pure ε, from the samplers' floating-point
    tails: (1 + e^ε)·C·η·f (module docstring), at most 1."""
    return min(1.0, (1.0 + math.exp(epsilon)) * counts * ETA * share_factor)
