"""What release a run asks for, as one frozen record: made and checked once where a call enters
the library (a command's options, or the keywords of an API call) and passed down unchanged.

`ReleaseSpec` holds the user's choices (`auto` and a model's default ε stay unresolved: they
depend on the data's size, `fedeval.core.params.resolve_config` fills them in as `PrivacyConfig`);
every check names the parameter with the message the library has always given, so a call is
refused before any table is read.

>>> spec = ReleaseSpec.of(model="localdp", epsilon=2, height="6")
>>> spec.model, spec.height, spec.relation
(<PrivacyModel.LOCALDP: 'localdp'>, 6, None)
>>> ReleaseSpec.of(model="federated", epsilon=1.0)
Traceback (most recent call last):
...
fedeval.core.errors.UsageError: `epsilon` does not apply to `model` federated (secure aggregation \
adds no noise); drop `epsilon` or choose `model` distdp/localdp.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack, cast

import numpy as np

from fedeval.core.config import (
    DEFAULT_LEVEL_SPLIT,
    PrivacyModel,
    Relation,
    Shape,
    Unit,
    check_choices,
    check_height_for,
)
from fedeval.core.errors import UsageError
from fedeval.core.params import (
    check_level_split,
    data_resolution,
    level_split_of,
    parse_height,
    resolve_config,
)

if TYPE_CHECKING:
    from fedeval.core.config import PrivacyConfig


class SimulationPath(StrEnum):
    """How a simulation makes the release: `fast` draws the aggregate directly (equal in
    distribution), `per-client` makes every client's report, as `encode` does."""

    FAST = "fast"
    PER_CLIENT = "per-client"


DEFAULT_DRAWS = 200
"""Fresh noise draws per run: the interval's half-width is then known to about ±5%."""
MAX_CI_DRAWS = 10_000
"""Beyond this, more draws only cost time: the intervals' Monte Carlo error is already < 1%."""


def check_ci_draws(ci_draws: object) -> int:
    """`ci_draws`: 0 (no intervals) or 2..MAX_CI_DRAWS."""
    if isinstance(ci_draws, bool) or not isinstance(ci_draws, int) or ci_draws < 0 or ci_draws == 1:
        raise UsageError(f"`ci_draws` must be 0 (no intervals) or at least 2. Found {ci_draws!r}.")
    if ci_draws > MAX_CI_DRAWS:
        raise UsageError(f"`ci_draws` must be at most {MAX_CI_DRAWS:,}. Found {ci_draws:,}.")
    return ci_draws


def check_seed(seed: object) -> int | np.random.Generator | None:
    """`seed`: None (private noise from the OS CSPRNG), a non-negative integer or a Generator
    (a reproducible simulation, never private)."""
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise UsageError(f"`seed` must be a non-negative integer. Found {seed!r}.")
    return int(seed)


class ReleaseKeywords(TypedDict, total=False):
    """The keywords of `ReleaseSpec.of`, as every API entry point accepts them (`**release`)."""

    model: PrivacyModel | str
    epsilon: float | None
    height: int | str
    shape: Shape | str
    unit: Unit | str
    max_examples: int | None
    relation: Relation | str | None
    seed: int | np.random.Generator | None
    ci_draws: int
    path: SimulationPath | str
    level_split: str


@dataclass(frozen=True)
class ReleaseSpec:
    """One release's settings, checked (`__post_init__`) and with choices as Enums.

    Attributes
    ----------
    model : the privacy model (distdp by default, as on the command line).
    epsilon : ε of the whole release; None: the model's default (`DEFAULT_EPSILON`), none
        under federated.
    height, shape : the leaf height h (2^h cells) and the levels released, or 'auto'. A height
        'auto:METRIC[,METRIC…]' is 'auto' chosen for those metrics alone (auc, ap, precision,
        recall, accuracy; the last three are one group): it sets `height_for`.
    height_for : the metrics a probed 'auto' height is chosen for, () for all (the default);
        a public setting, stated in the release's documents.
    unit, max_examples : whom ε protects; under unit client each client's cap L.
    relation : the neighbouring relation; None: the model's default.
    seed : None for private noise; an int or Generator makes a reproducible simulation.
    ci_draws : fresh noise draws behind the 95% intervals (0: none).
    path : the simulation's path (`SimulationPath`).
    level_split : off, auto or F:S: the tree's ε split over its levels (distdp,
        `fedeval.privacy.level_split`; `fedeval.core.params.level_split_of`), a public
        setting fixed before any data are read and stated in every document.
    """

    model: PrivacyModel = PrivacyModel.DISTDP
    epsilon: float | None = None
    height: int | Literal["auto"] = "auto"
    shape: Shape | Literal["auto"] = "auto"
    unit: Unit = Unit.EXAMPLE
    max_examples: int | None = None
    relation: Relation | None = None
    seed: int | np.random.Generator | None = None
    ci_draws: int = DEFAULT_DRAWS
    path: SimulationPath = SimulationPath.FAST
    height_for: tuple[str, ...] = ()
    level_split: str = DEFAULT_LEVEL_SPLIT

    @classmethod
    def of(cls, **keywords: Unpack[ReleaseKeywords]) -> ReleaseSpec:
        """A spec from the API's keywords (strings for choices, as the command line gives)."""
        return cls(**cast(dict[str, Any], keywords))

    def __post_init__(self) -> None:
        """Normalise and check every field, in the order `resolve_config` always checked them
        (model, ε, unit, relation, height, shape), then the run's draws, seed and path."""
        model, _, unit, _ = check_choices(
            self.model, self.epsilon, self.unit, self.max_examples, self.relation
        )  # ε and the relation stay None for their defaults: `config` resolves them
        set_ = object.__setattr__
        set_(self, "model", model)
        set_(self, "unit", unit)
        if self.relation is not None:
            set_(self, "relation", Relation(self.relation))
        height, metrics = parse_height(self.height)
        set_(self, "height", height)
        given = check_height_for(self.height_for)
        if given and metrics and given != metrics:
            raise UsageError(
                f"give the metrics of `height` {self.height!r} or `height_for` "
                f"{list(self.height_for)!r}, not both."
            )
        set_(self, "height_for", metrics or given)
        if self.height_for and height != "auto":
            raise UsageError(
                f"`height_for` chooses an 'auto' height; it does not apply to height {height}."
            )
        if self.shape != "auto":
            try:
                set_(self, "shape", Shape(self.shape))
            except ValueError as e:
                raise UsageError(
                    f"unknown shape {self.shape!r}; choose hierarchy, flat or auto."
                ) from e
        check_ci_draws(self.ci_draws)
        set_(self, "seed", check_seed(self.seed))
        set_(self, "path", SimulationPath(self.path))
        set_(self, "level_split", check_level_split(self.level_split))
        level_split_of(self.level_split, self.model, 0)  # F:S under another model: refused now

    @property
    def seeded(self) -> bool:
        """Whether the run's noise is reproducible from what its caller gave (not private)."""
        return self.seed is not None

    def resolution(self) -> int:
        """The leaf height to reduce data to while reading (`data_resolution`)."""
        return data_resolution(self.model, self.height)

    def reading(self, *, exact: bool, resolution: int | None = None) -> dict[str, Any]:
        """What reading a table must keep for this run: raw scores for the exact values,
        per-example records for the per-client path and for a per-client cap, and the leaf
        resolution (keywords of `fedeval.tables.scored.read_scored` and `scored_from_arrays`)."""
        return {
            "keep_scores": exact,
            "keep_examples": self.path is SimulationPath.PER_CLIENT or self.unit is Unit.CLIENT,
            "resolution": self.resolution() if resolution is None else resolution,
        }

    def config(self, *, n: int, min_height: int = 0, probe: bool = True) -> PrivacyConfig:
        """The complete `PrivacyConfig` for `n` examples (`resolve_config`: `auto`, the model's
        default ε and relation filled in)."""
        return resolve_config(
            self.model,
            n=n,
            epsilon=self.epsilon,
            height=self.height,
            shape=self.shape,
            unit=self.unit,
            max_examples=self.max_examples,
            relation=self.relation,
            min_height=min_height,
            probe=probe,
            height_for=self.height_for,
            level_split=self.level_split,
        )


def release_spec(spec: ReleaseSpec | None, keywords: ReleaseKeywords) -> ReleaseSpec:
    """`spec`, or one made from an API call's release keywords: never both, so that no
    keyword is silently ignored."""
    if spec is None:
        return ReleaseSpec.of(**keywords)
    if keywords:
        given = ", ".join(f"`{k}`" for k in keywords)
        raise UsageError(
            f"give `spec` or the release's keywords, not both. Found `spec` and {given}: "
            "set them on the spec (dataclasses.replace)."
        )
    return spec
