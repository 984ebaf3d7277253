"""Result values shared by every estimator."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """A private estimate, with the exact value and the absolute error when the truth is known."""

    estimate: float
    exact: float | None = None

    @property
    def abs_error(self) -> float | None:
        if self.exact is None or math.isnan(self.estimate) or math.isnan(self.exact):
            return None
        return abs(self.estimate - self.exact)
