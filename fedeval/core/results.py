"""Result values shared by every estimator."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Estimate:
    """A private estimate, its 95% interval (privacy noise and discretisation, from the release
    alone), and the exact value and absolute error when the truth is known.

    `note` says why an estimate is barely determined (e.g. precision where few or no examples
    are predicted positive); None when there is nothing to say.
    """

    estimate: float
    exact: float | None = None
    ci95: tuple[float, float] | None = None
    note: str | None = None

    @property
    def covered(self) -> bool | None:
        """Whether the interval holds the exact value (None if either is unknown)."""
        if self.exact is None or self.ci95 is None:
            return None
        return self.ci95[0] <= self.exact <= self.ci95[1]

    @property
    def abs_error(self) -> float | None:
        if self.exact is None or math.isnan(self.estimate) or math.isnan(self.exact):
            return None
        return abs(self.estimate - self.exact)


def undetermined_note(metric: str, positives: float, negatives: float) -> str:
    """The reason shown where a class total the metric divides by is estimated at ≤ 0."""
    return (
        f"the release estimates ≈ {positives:,.0f} positives and ≈ {negatives:,.0f} "
        f"negatives: {metric} is undetermined"
    )


class ByMetricName(Generic[V]):
    """A record of every threshold metric (`fedeval.estimate.metric_registry`) by name:
    ``m["recall"]``, or ``m.recall`` for precision, recall and accuracy. `by_name` is the
    record's mapping (an estimate each, or a predicted error each)."""

    def by_name(self) -> Mapping[str, V]:
        raise NotImplementedError

    def __getitem__(self, name: str) -> V:
        return self.by_name()[name]

    @property
    def precision(self) -> V:
        return self["precision"]

    @property
    def recall(self) -> V:
        return self["recall"]

    @property
    def accuracy(self) -> V:
        return self["accuracy"]


@dataclass(frozen=True)
class ThresholdMetrics(ByMetricName[Estimate]):
    """Every threshold metric (`fedeval.estimate.metric_registry.THRESHOLD_METRICS`) of the
    classifier "positive iff score ≥ threshold", by name: ``m["recall"]`` (or ``m.recall`` for
    precision, recall and accuracy).

    Precision where few or no examples are predicted positive carries a note, the full [0, 1]
    interval and the limit value from the top scores (`sparse_precision`), never nan."""

    threshold: float
    estimates: dict[str, Estimate] = field(hash=False)
    """By metric name, in the registry's order."""

    def by_name(self) -> Mapping[str, Estimate]:
        return self.estimates
