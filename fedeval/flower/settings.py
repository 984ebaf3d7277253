"""The settings of a protocol run: the user's options, as Flower's run config carries them.

One frozen record made at the boundary (the CLI, or the ServerApp from `context.run_config`),
with the same defaults as ``fedeval evaluate`` and ``fedeval encode``: the model, ε, height,
shape, unit, relation and seed are checked and resolved as the release spec every entry point
takes (`fedeval.core.spec.ReleaseSpec`, `RunSettings.release`), and the score axis
through the shared release defaults (declared thresholds, or 1/11 … 10/11 of the score range,
as cell edges). Flower's run config holds only strings, numbers and booleans, so optional
values travel as "" (none) and are read back here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from fedeval.core.axis import release_axis
from fedeval.core.config import DEFAULT_LEVEL_SPLIT, PrivacyModel, Relation, Unit
from fedeval.core.errors import UsageError
from fedeval.core.spec import ReleaseSpec
from fedeval.flower.job import Job
from fedeval.protocol.encode import MIN_COHORT, check_min_cohort

MESSAGE_TYPE = "query.fedeval"
"""The Flower message type every protocol message carries (a `query` action named fedeval)."""

DEFAULT_RETRIES = 2
DEFAULT_REPLY_TIMEOUT = 600.0
"""Seconds the server waits for a round's replies; a node silent longer has dropped out."""
DEFAULT_WAIT_NODES = 120.0
"""Seconds the server waits for `min-nodes` SuperNodes to connect before it gives up."""


@dataclass(frozen=True)
class RunSettings:
    """Everything one protocol run is set up with (public parameters only, no data)."""

    model: PrivacyModel = PrivacyModel.DISTDP
    epsilon: float | None = None
    height: str = "auto"
    shape: str = "auto"
    unit: Unit = Unit.EXAMPLE
    max_examples: int | None = None
    relation: Relation | None = None
    score_range: tuple[float, float] = (0.0, 1.0)
    thresholds: tuple[float, ...] | None = None
    pos_label: str | None = None
    seed: int | None = None
    level_split: str = DEFAULT_LEVEL_SPLIT
    """distdp: the tree's ε over its levels (off, auto or F:S; `fedeval.core.spec.ReleaseSpec`)."""
    min_cohort: int = MIN_COHORT
    neighbours: int | None = None
    retries: int = DEFAULT_RETRIES
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT
    masks: bool = True
    """False only to measure what secure aggregation costs (benchmarks/flower.py): reports
    travel bare and clients answer only if set up to (`allow_unmasked`). Never in a run config."""

    def __post_init__(self) -> None:
        spec = self.release  # model, ε, unit, relation, height, shape and seed: checked once
        object.__setattr__(self, "model", spec.model)
        object.__setattr__(self, "unit", spec.unit)
        object.__setattr__(self, "relation", spec.relation)
        check_min_cohort(self.min_cohort)
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise UsageError(f"`retries` must be an integer ≥ 0. Found {self.retries!r}.")
        if not self.reply_timeout > 0:
            raise UsageError(f"`reply-timeout` must be positive. Found {self.reply_timeout!r}.")
        lo, hi = (float(x) for x in self.score_range)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise UsageError(f"`score-range` must be two finite numbers lo < hi. Found {lo}, {hi}.")
        object.__setattr__(self, "score_range", (lo, hi))
        if self.thresholds is not None:
            t = tuple(float(x) for x in self.thresholds)
            if not all(lo <= x <= hi for x in t):
                raise UsageError(
                    f"thresholds must be numbers in the score range [{lo:g}, {hi:g}]. Found "
                    f"{list(t)}."
                )
            object.__setattr__(self, "thresholds", t)

    @property
    def release(self) -> ReleaseSpec:
        """The release these settings ask for (`fedeval.core.spec.ReleaseSpec`: the settings
        of the same names; a protocol run has no interval draws of its own)."""
        # `height` carries auto:METRIC's metrics
        skip = ("ci_draws", "path", "height_for")
        same = [f.name for f in fields(ReleaseSpec) if f.name not in skip]
        return ReleaseSpec(**{name: getattr(self, name) for name in same})

    def encode_keywords(self) -> dict[str, Any]:
        """The keywords of `fedeval.protocol.encode.encode_file` these settings fix: the
        release, the score axis, the positive label and the masking, so `fedeval encode` makes
        the reports a Flower client of the same settings makes."""
        return {
            "spec": self.release,
            "score_range": self.score_range,
            "thresholds": self.thresholds,
            "pos_label": self.pos_label,
            "neighbours": self.neighbours,
            "min_cohort": self.min_cohort,
        }

    def job(self) -> Job:
        """The run's public parameters as every client gets them: the configuration (a
        two-phase `auto` at its placeholder height; the probe picks the height), the axis and
        the resolution data are read at, exactly as `fedeval encode` and the one-shot
        `evaluate` resolve them."""
        spec = self.release
        axis = release_axis(self.score_range, self.thresholds, spec.height)
        resolution = spec.resolution()
        # n = 0: no count of the data (federated `auto` is fixed, DP `auto` is probed)
        config = spec.config(n=0, min_height=axis.auto_floor(resolution))
        return Job(config, axis, resolution, self.pos_label, self.seed, self.masks)

    def to_run_config(self) -> dict[str, str | int | float | bool]:
        """The settings as Flower run-config entries (`[tool.flwr.app.config]`)."""
        return {
            "model": self.model.value,
            "epsilon": "" if self.epsilon is None else float(self.epsilon),
            "height": str(self.height),
            "shape": str(self.shape),
            "unit": self.unit.value,
            "max-examples": 0 if self.max_examples is None else self.max_examples,
            "relation": "" if self.relation is None else self.relation.value,
            "score-range": f"{self.score_range[0]!r},{self.score_range[1]!r}",
            "thresholds": ""
            if self.thresholds is None
            else ",".join(repr(t) for t in self.thresholds),
            "pos-label": "" if self.pos_label is None else self.pos_label,
            "seed": -1 if self.seed is None else self.seed,
            "level-split": self.level_split,
            "min-cohort": self.min_cohort,
            "neighbours": 0 if self.neighbours is None else self.neighbours,
            "retries": self.retries,
            "reply-timeout": float(self.reply_timeout),
        }

    @classmethod
    def from_run_config(cls, config: Mapping[str, Any]) -> RunSettings:
        """The settings from a run config (missing entries take the defaults)."""

        def get(key: str, default: Any = "") -> Any:
            v = config.get(key, default)
            return default if v == "" else v

        thresholds = get("thresholds", None)
        return cls(
            model=get("model", PrivacyModel.DISTDP.value),
            epsilon=None if get("epsilon", None) is None else float(get("epsilon")),
            height=str(get("height", "auto")),
            shape=str(get("shape", "auto")),
            unit=get("unit", Unit.EXAMPLE.value),
            max_examples=int(get("max-examples", 0)) or None,
            relation=get("relation", None),
            score_range=_pair(_floats(str(get("score-range", "0,1")), "score-range", 2)),
            thresholds=None if thresholds is None else _floats(str(thresholds), "thresholds"),
            pos_label=get("pos-label", None),
            seed=None if int(get("seed", -1)) < 0 else int(get("seed")),
            level_split=str(get("level-split", DEFAULT_LEVEL_SPLIT)),
            min_cohort=int(get("min-cohort", MIN_COHORT)),
            neighbours=int(get("neighbours", 0)) or None,
            retries=int(get("retries", DEFAULT_RETRIES)),
            reply_timeout=float(get("reply-timeout", DEFAULT_REPLY_TIMEOUT)),
        )


def _floats(text: str, name: str, count: int | None = None) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"`{name}` must be comma-separated numbers. Found {text!r}.") from None
    if count is not None and len(values) != count:
        raise UsageError(f"`{name}` must be {count} comma-separated numbers. Found {text!r}.")
    return values


def _pair(values: tuple[float, ...]) -> tuple[float, float]:
    return values[0], values[1]


def thresholds_tuple(values: Sequence[float] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)
