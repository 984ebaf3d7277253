"""Parameters chosen for the user: release shape and height for a model, n and ε.

The error of a threshold metric from leaves of width w = 2^-h has two parts: privacy noise on
the ≈ L/2 leaves a prefix sums (√L/ε per class under flat distdp, √(L·n·σ²) under OUE), and the
discretisation inside the leaf that holds the threshold (≈ κ/L² of a class for smooth scores,
since the leaf is taken as uniform). Balancing the two gives L ∝ (εn)^{2/5} for distdp and
L ∝ (n/σ²)^{1/5} for OUE; the flat shape (sensitivity 1) beats the hierarchy in both cases up to
L ≈ h³ (DESIGN.md, "the release's shape is a design choice"). `benchmarks/accuracy.py` checks
these choices against the hierarchy over a grid of heights.
"""

from __future__ import annotations

import math

from fedeval.config import DEFAULT_EPSILON, PrivacyConfig, PrivacyModel, Shape, check_epsilon
from fedeval.errors import UsageError

FEDERATED_HEIGHT = 16
"""Federated error is about 2^-h and the release costs O(2^h): 65,536 leaves is cheap."""


def oue_sigma2(epsilon: float) -> float:
    """Per-report variance factor of OUE: 4e^ε / (e^ε − 1)² (Wang et al. 2017)."""
    return 4 * math.exp(epsilon) / math.expm1(epsilon) ** 2


def auto_height(model: PrivacyModel, n: int, epsilon: float | None) -> int:
    """The leaf height that balances noise against discretisation (module docstring)."""
    if model is PrivacyModel.FEDERATED:
        return FEDERATED_HEIGHT
    n = max(n, 2)
    if model is PrivacyModel.DISTDP:
        leaves = 2.0 * (epsilon * n / 2) ** 0.4
        return int(min(max(round(math.log2(leaves)), 4), 14))
    leaves = 2.0 * (n / oue_sigma2(epsilon)) ** 0.2
    return int(min(max(round(math.log2(leaves)), 2), 10))


def resolve_config(
    model: PrivacyModel | str,
    *,
    n: int,
    epsilon: float | None = None,
    height: int | str = "auto",
    shape: Shape | str = "auto",
) -> PrivacyConfig:
    """A complete `PrivacyConfig` from user choices, filling 'auto' and the papers' default ε."""
    try:
        model = PrivacyModel(model)
    except ValueError as e:
        choices = ", ".join(m.value for m in PrivacyModel)
        raise UsageError(f"unknown privacy model {model!r}; choose one of {choices}.") from e
    if model is not PrivacyModel.FEDERATED and epsilon is None:
        epsilon = DEFAULT_EPSILON[model]
    check_epsilon(model, epsilon)  # before ε enters the height formula
    if height == "auto":
        height = auto_height(model, n, epsilon)
    else:
        try:
            height = int(height)
        except (TypeError, ValueError) as e:
            raise UsageError(f"`height` must be an integer or 'auto'. Found {height!r}.") from e
    if shape == "auto":
        shape = Shape.FLAT
    try:
        shape = Shape(shape)
    except ValueError as e:
        raise UsageError(f"unknown shape {shape!r}; choose hierarchy, flat or auto.") from e
    return PrivacyConfig(model=model, height=height, shape=shape, epsilon=epsilon)
