"""Privacy configuration: which model, which budget, which release shape.

Frozen records with Enums for choices, so a configuration can be stored in a report and compared.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from fedeval.core.errors import UsageError

E = TypeVar("E", bound=StrEnum)


class PrivacyModel(StrEnum):
    """Trust model under which the score histograms are released (DESIGN.md, privacy models)."""

    FEDERATED = "federated"  # secure aggregation, exact sums
    DISTDP = "distdp"  # distributed DP: Pólya shares summing to discrete Laplace
    LOCALDP = "localdp"  # local DP: Optimal Unary Encoding per client


@dataclass(frozen=True)
class ModelTraits:
    """What the protocol does with a model: one record per model's module of `fedeval.privacy`
    (its `TRAITS`)."""

    model: PrivacyModel
    adds_noise: bool
    """Whether the release carries noise (a DP model: it has an ε, a seed makes it a
    simulation, and its counts are not exact)."""
    masked: bool
    """Whether clients' reports travel under pairwise masks (secure aggregation), so the server
    sees cohort sums only; else each report is sent as it is (private by itself)."""
    shares_noise: bool
    """Whether the noise is split over a cohort's clients (a dropout loses its share)."""


class Unit(StrEnum):
    """Whom the guarantee protects: one example (the papers' setting), or one client with all its
    examples (contributions capped at `max_examples` per client, noise scaled to match)."""

    EXAMPLE = "example"
    CLIENT = "client"


class Relation(StrEnum):
    """Which datasets count as neighbours, i.e. what ε hides (DESIGN.md, privacy models).

    ``add-remove``: D′ is D with one unit (example, or client under unit client) added or
    removed. The dataset's size is then secret too, so no exact count (examples, positives,
    clients, reporters) may appear in a release: totals come from the noisy counts.
    ``replace``: D′ is D with one unit's data replaced by other data; the number of units is
    public, and one unit moves the release twice as far (one leaf path loses, another gains).
    Local DP only supports ``replace``: the number of reports a client sends is visible.
    """

    ADD_REMOVE = "add-remove"
    REPLACE = "replace"


DEFAULT_RELATION = {
    "federated": None,
    "distdp": Relation.ADD_REMOVE,
    "localdp": Relation.REPLACE,
}
"""add-remove under distdp (it also hides the dataset's size, and implies 2ε-DP under replace),
replace under localdp (the relation local DP is defined over)."""


def check_relation(model: PrivacyModel, relation: Relation | str | None) -> Relation | None:
    """The relation for `model`: its default when None; refuses add-remove under localdp."""
    model = PrivacyModel(model)
    if model is PrivacyModel.FEDERATED:
        if relation is not None:
            raise UsageError(
                "`relation` does not apply to `model` federated (no differential privacy: "
                "there is no ε to state over a relation); drop it, or choose distdp/localdp."
            )
        return None
    if relation is None:
        return DEFAULT_RELATION[model.value]
    try:
        relation = Relation(relation)
    except ValueError:
        raise UsageError(
            f"unknown neighbouring relation {relation!r}; choose add-remove or replace."
        ) from None
    if model is PrivacyModel.LOCALDP and relation is Relation.ADD_REMOVE:
        raise UsageError(
            "`relation` add-remove is not available under `model` localdp: every report a "
            "client sends is visible to the server, so whether an example (or client) is present "
            "cannot be hidden. Use `relation` replace (the local-DP relation), or `model` distdp."
        )
    return relation


class Shape(StrEnum):
    """Which levels of the dyadic hierarchy are released.

    ``hierarchy`` releases levels 1..h (cheap long range queries, sensitivity h under distdp;
    2..h under localdp from ε = 5 per report, `fedeval.core.params.LEVEL_1_FROM_EPSILON`);
    ``flat`` releases only the leaf level h (sensitivity 1; better for AUC up to 2^h ≈ h³).
    """

    HIERARCHY = "hierarchy"
    FLAT = "flat"


def check_epsilon(model: PrivacyModel, epsilon: float | None) -> None:
    """ε must be absent under federated and a positive finite number otherwise."""
    if model is PrivacyModel.FEDERATED:
        if epsilon is not None:
            raise UsageError(
                "`epsilon` does not apply to `model` federated (secure aggregation adds no "
                "noise); drop `epsilon` or choose `model` distdp/localdp."
            )
    elif epsilon is None or not (epsilon > 0 and math.isfinite(epsilon)):
        raise UsageError(
            f"`epsilon` must be a positive finite number under `model` {model}. Found {epsilon}."
        )
    elif not MIN_EPSILON <= epsilon <= MAX_EPSILON:
        raise UsageError(
            f"`epsilon` must lie in [{MIN_EPSILON:g}, {MAX_EPSILON:g}] under `model` {model}. "
            f"Found {epsilon:g}: beyond that range the noise parameters leave float64 "
            "(exp(±ε) under- or overflows) and the release means nothing."
        )


MIN_EPSILON = 1e-9
"""Smallest ε computed with: α = exp(−ε/Δ) must still differ from 1 in float64."""
MAX_EPSILON = 100.0
"""Largest ε computed with: e^ε must stay finite (OUE's q = 1/(e^ε + 1)); ε > 10 already warns."""
SMALL_EPSILON = 0.01
"""Below this ε the noise swamps any count a realistic population holds: a warning says so."""


MAX_EXAMPLES = 1 << 31
"""Largest per-client cap L: Δ = L·levels must stay an exact integer of the noise samplers."""


def check_unit(unit: Unit | str, max_examples: int | None) -> Unit:
    """`--unit client` needs `--max-examples L ≥ 1`; `--unit example` takes no cap."""
    try:
        unit = Unit(unit)
    except ValueError:
        raise UsageError(f"unknown unit {unit!r}; choose example or client.") from None
    if unit is Unit.CLIENT:
        if isinstance(max_examples, int) and max_examples > MAX_EXAMPLES:
            raise UsageError(
                f"`max_examples` {max_examples:,} is beyond the largest cap fedeval accepts "
                f"({MAX_EXAMPLES:,}): the noise would drown every count. Cap clients at the "
                "number of examples a client really holds."
            )
        if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
            found = "" if max_examples is None else f" Found {max_examples!r}."
            raise UsageError(
                "`unit` client needs `max_examples` L (an integer ≥ 1): each client's "
                f"contribution is capped at L examples and the noise scaled to it.{found}"
            )
    elif max_examples is not None:
        raise UsageError(
            "`max_examples` applies to `unit` client only (under `unit` example every example "
            "is protected on its own)."
        )
    return unit


MAX_HEIGHT = 20
"""Finest leaf height: 2^20 cells per class, the resolution data is reduced to while streaming."""
MAX_BUCKETS = 1 << 20
"""Most equi-depth buckets B: the finest release has 2^20 leaves, so more buckets than that
split leaves and estimate nothing better; each costs memory in every bucket sweep."""
MAX_QUANTILES = 1 << 16
"""Most quantiles Q per class for the curves: the PCHIP grid grows with Q while the area error
stops shrinking long before (it is bounded by the release's noise and leaf width)."""


def check_count(value: object, name: str, least: int, most: int) -> int:
    """`value` as an int in [least, most]; otherwise a UsageError that names the parameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UsageError(
            f"`{name}` must be an integer from {least:,} to {most:,}. Found {value!r}."
        )
    v = int(value)
    if not least <= v <= most:
        raise UsageError(f"`{name}` must be from {least:,} to {most:,}. Found {v:,}.")
    return v


def check_height(height: object) -> int:
    """h, the leaf height: 1..MAX_HEIGHT (2^h cells per class)."""
    return check_count(height, "height", 1, MAX_HEIGHT)


HEIGHT_METRICS = ("auc", "ap", "pra")
"""The metrics `--height auto:METRIC,…` may choose the height for (`fedeval.core.height_choice`):
precision, recall and accuracy are one group, `pra`, since at declared thresholds (cell edges)
they have no discretisation and share one noise-only prediction, so they always agree."""

HEIGHT_METRIC_NAMES = {"auc": "auc", "ap": "ap", "pra": "pra"} | dict.fromkeys(
    ("precision", "recall", "accuracy"), "pra"
)


def check_height_for(metrics: object) -> tuple[str, ...]:
    """The metrics a probed height is chosen for, canonical: a subset of HEIGHT_METRICS in its
    order, () for all of them (the default `auto`); names as the gates write them."""
    if isinstance(metrics, str) or not isinstance(metrics, tuple | list | frozenset | set):
        raise UsageError(f"`height_for` must be a list of metric names. Found {metrics!r}.")
    picked = set()
    for name in metrics:
        key = HEIGHT_METRIC_NAMES.get(name.strip().lower()) if isinstance(name, str) else None
        if key is None:
            what = f"the metric {name!r}" if str(name).strip() else "an empty metric name"
            raise UsageError(
                f"`height` auto:… names {what}, which the height rule does not "
                "predict; choose from auc, ap, precision, recall, accuracy (or pra for the "
                "last three), e.g. auto:auc or auto:auc,ap."
            )
        picked.add(key)
    canonical = tuple(m for m in HEIGHT_METRICS if m in picked)
    return () if canonical == HEIGHT_METRICS else canonical


def check_buckets(buckets: object) -> int:
    """B, the number of equi-depth buckets: 1..MAX_BUCKETS."""
    return check_count(buckets, "buckets", 1, MAX_BUCKETS)


def one_of(kind: type[E], value: object, name: str) -> E:
    """`value` (any case) as a member of the choice `kind`; otherwise a UsageError that names
    the parameter `name` and the choices."""
    try:
        return kind(str(value).lower())
    except ValueError:
        names = ", ".join(m.value for m in kind)
        raise UsageError(f"`{name}` takes one of {names}. Found {value!r}.") from None


def parse_buckets(buckets: int | str) -> int:
    """B given as an integer or its text ('20'), in bounds (`check_buckets`); the message names
    what `buckets` takes otherwise."""
    try:
        b = int(buckets)
    except (TypeError, ValueError) as e:
        raise UsageError(
            f"`buckets` must be a positive integer or 'auto'. Found {buckets!r}."
        ) from e
    return check_buckets(b)


def check_quantiles(quantiles: object) -> int:
    """Q, the quantiles per class the curves interpolate: 2..MAX_QUANTILES."""
    return check_count(quantiles, "quantiles", 2, MAX_QUANTILES)


DEFAULT_EPSILON = {PrivacyModel.DISTDP: 1.0, PrivacyModel.LOCALDP: 5.0}
"""The papers' experiment settings (Cormode & Markov, PVLDB 2023, section 7)."""


def check_choices(
    model: PrivacyModel | str,
    epsilon: float | None,
    unit: Unit | str,
    max_examples: int | None,
    relation: Relation | str | None,
) -> tuple[PrivacyModel, float | None, Unit, Relation | None]:
    """A release's privacy choices checked in one order, wherever they enter (`ReleaseSpec`,
    `fedeval.core.params.resolve_config`): the model by name, ε (`DEFAULT_EPSILON` for None;
    none under federated), the unit with its cap, the relation (the model's default for None)."""
    try:
        model = PrivacyModel(model)
    except ValueError as e:
        choices = ", ".join(m.value for m in PrivacyModel)
        raise UsageError(f"unknown privacy model {model!r}; choose one of {choices}.") from e
    if model is not PrivacyModel.FEDERATED and epsilon is None:
        epsilon = DEFAULT_EPSILON[model]
    check_epsilon(model, epsilon)
    return model, epsilon, check_unit(unit, max_examples), check_relation(model, relation)


DEFAULT_LEVEL_SPLIT = "auto"
"""`level_split` (`fedeval.core.spec.ReleaseSpec`, `--level-split`) unless a run sets it: auto,
which under distdp gives the levels up to the thresholds' alignment level more of the tree's ε,
bounded where the AP is reported (`fedeval.core.params.level_split_of`); the even tree under
the other models and where no threshold sets a level (`fedeval.privacy.level_split` has the
measurements that made it the default)."""


@dataclass(frozen=True)
class PrivacyConfig:
    """Everything that determines the noise in a release.

    Attributes
    ----------
    model : the trust model.
    epsilon : total ε of the release (pure ε-DP under `relation`); ``None`` under
        ``federated``.
    height : h; leaves are the 2^h equal cells of [0, 1].
    shape : which levels are released.
    unit : whom ε protects: one example, or one client (then `max_examples` is L, the cap on
        each client's examples, and the noise is scaled to a client's whole contribution).
    relation : the neighbouring relation ε is stated over (None under ``federated``; filled
        with the model's default when not given).
    probe_share : s of a two-phase release (`--height auto` under DP, `fedeval.core.params`): 0 when
        the height was given; else a probe of the class totals came first, at s·ε under distdp
        (the tree then gets (1 − s)·ε), or from a share s of the reports under localdp.
    first_level : the coarsest level a hierarchy releases (levels first_level..h; at most h,
        and 1 for a flat release): 1 is the papers' tree; `fedeval.core.params.resolve_config`
        starts localdp's at 2 from ε = 5 per report (`fedeval.core.params.LEVEL_1_FROM_EPSILON`).
    colluders : t, distdp only: the clients of a cohort that may collude with the server (and
        hand it their noise shares); each of a cohort's m clients then adds Pólya(1/(m − t), α)
        shares, so any m − t of them still sum to the whole discrete Laplace (0: none).
    cohort_floor : with t > 0, the smallest cohort the shares are sized for (the encoder's
        minimum cohort, > t): a cohort's noise is at most cohort_floor/(cohort_floor − t) times
        the discrete Laplace, the bound the intervals use (the analyst does not know m).
    split_level, split_share : the tree's split over its levels: under distdp of ε
        (`fedeval.privacy.level_split`), under localdp of the reports (each tree report's
        level drawn with these probabilities, `fedeval.privacy.localdp`): a share s spread
        evenly over the released levels k ≤ f (f = split_level), 1 − s evenly over the finer
        ones; (0, 0.0): every level the same share (the papers' tree). A rule rather than a
        list of shares so that it stays valid at the height a probe chooses later;
        `level_shares` are its shares at this height.
    """

    model: PrivacyModel
    height: int
    shape: Shape
    epsilon: float | None = None
    unit: Unit = Unit.EXAMPLE
    max_examples: int | None = None
    relation: Relation | None = None
    probe_share: float = 0.0
    first_level: int = 1
    colluders: int = 0
    cohort_floor: int = 0
    height_for: tuple[str, ...] = ()
    split_level: int = 0
    split_share: float = 0.0
    split_leaf_bound: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "height", check_height(self.height))
        first = self.first_level
        if isinstance(first, bool) or not isinstance(first, numbers.Integral) or first < 1:
            raise UsageError(f"`first_level` must be an integer ≥ 1. Found {first!r}.")
        # Canonical: at most h (a tree of height 1 releases level 1), and 1 for a flat release.
        first = min(int(first), self.height) if self.shape is Shape.HIERARCHY else 1
        object.__setattr__(self, "first_level", first)
        check_epsilon(self.model, self.epsilon)
        object.__setattr__(self, "unit", check_unit(self.unit, self.max_examples))
        object.__setattr__(self, "relation", check_relation(self.model, self.relation))
        share = self.probe_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share < 1:
            raise UsageError(f"`probe_share` must be a fraction in [0, 1). Found {share!r}.")
        object.__setattr__(self, "probe_share", float(share))
        if share and self.model is PrivacyModel.FEDERATED:
            raise UsageError("a probe round applies to distdp and localdp only.")
        object.__setattr__(self, "height_for", check_height_for(self.height_for))
        if self.height_for and not share:
            raise UsageError("`height_for` applies to a height chosen by a probe (auto) only.")
        self._check_colluders()
        self._check_split()
        if self.epsilon is not None:
            if self.epsilon > 10:
                warnings.warn(
                    f"epsilon={self.epsilon} is unusually large: the privacy guarantee is weak.",
                    stacklevel=2,
                )
            elif self.epsilon < SMALL_EPSILON:
                warnings.warn(
                    f"epsilon={self.epsilon:g} is so small that the noise swamps the counts: "
                    "expect intervals that cover the whole range of every metric.",
                    stacklevel=2,
                )

    def _check_colluders(self) -> None:
        t, floor = self.colluders, self.cohort_floor
        for name, v in (("colluders", t), ("cohort_floor", floor)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise UsageError(f"`{name}` must be an integer ≥ 0. Found {v!r}.")
        if t == 0:
            object.__setattr__(self, "cohort_floor", 0)
            return
        if self.model is not PrivacyModel.DISTDP:
            raise UsageError(
                "`colluders` applies to distdp only: federated adds no noise to protect, and "
                "localdp's reports are private on their own whoever colludes."
            )
        if floor <= t:
            raise UsageError(
                f"`colluders` t = {t} must be below the minimum cohort ({floor}): the shares of "
                "the m − t honest clients of every cohort must carry the noise, so at least one "
                "client of each cohort must be honest."
            )

    def _check_split(self) -> None:
        f, s = self.split_level, self.split_share
        if isinstance(f, bool) or not isinstance(f, numbers.Integral) or f < 0:
            raise UsageError(f"`split_level` must be an integer ≥ 0. Found {f!r}.")
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0 <= s < 1:
            raise UsageError(f"`split_share` must be a fraction in [0, 1). Found {s!r}.")
        if (f == 0) != (s == 0):
            raise UsageError(
                "`split_level` and `split_share` go together: the share s of ε given to the "
                "levels up to f (both 0 for an even split)."
            )
        if f and self.model is PrivacyModel.FEDERATED:
            raise UsageError(
                "a split over the levels applies to distdp (of ε) and localdp (of the reports) "
                "only."
            )
        c = self.split_leaf_bound
        if isinstance(c, bool) or not isinstance(c, int | float) or not (c == 0 or 1 <= c < 1e6):
            raise UsageError(f"`split_leaf_bound` must be 0 or at least 1. Found {c!r}.")
        if c and not s:
            raise UsageError("`split_leaf_bound` bounds a split of ε over the levels: give one.")
        object.__setattr__(self, "split_level", int(f))
        object.__setattr__(self, "split_share", float(s))
        object.__setattr__(self, "split_leaf_bound", float(c))

    @property
    def split_share_here(self) -> float:
        """The coarse levels' share at this height: `split_share` s, or with a leaf bound
        c > 0, min(s, 1 − (h − f)/(c·h)): the levels finer than f then keep at least (h − f)/
        (c·h) of ε_tree, so each leaf's noise sd grows by at most about c over the even tree's
        at h (the AP reads the leaves; `fedeval.privacy.level_split`). Public: f, s, c and h."""
        s, c = self.split_share, self.split_leaf_bound
        h, f = self.height, self.split_level
        if not c or h <= f:
            return s
        return min(s, 1.0 - (h - f) / (c * h))

    @property
    def level_shares(self) -> tuple[float, ...]:
        """Each released level's share of the tree's ε (they sum to 1): 1/g each for g levels
        unless a split applies at this height (`split_level` f with released levels on both
        sides of it), then s/a over the a levels k ≤ f and (1 − s)/b over the b finer ones."""
        levels = self.levels
        coarse = sum(1 for k in levels if k <= self.split_level)
        fine = len(levels) - coarse
        if not self.split_share or coarse == 0 or fine == 0:
            return (1.0 / len(levels),) * len(levels)
        s = self.split_share_here
        return tuple(s / coarse if k <= self.split_level else (1.0 - s) / fine for k in levels)

    @property
    def level_split(self) -> bool:
        """Whether the levels get unequal shares of ε at this height (else the even tree, drawn
        as it always was)."""
        levels = self.levels
        return bool(self.split_share) and levels[0] <= self.split_level < levels[-1]

    @property
    def share_factor(self) -> float:
        """The most noise a cohort's sum carries, in discrete Laplaces: m/(m − t) ≤
        cohort_floor/(cohort_floor − t) with t colluders tolerated (1 without)."""
        if self.colluders == 0:
            return 1.0
        return self.cohort_floor / (self.cohort_floor - self.colluders)

    @property
    def examples_per_unit(self) -> int:
        """How many examples one protected unit may contribute: 1, or L under unit client."""
        # Under unit client, __post_init__ has checked that max_examples is an int ≥ 1.
        if self.unit is Unit.CLIENT and self.max_examples is not None:
            return self.max_examples
        return 1

    @property
    def probed(self) -> bool:
        """Whether a probe of the class totals chose the height (two-phase `auto`)."""
        return self.probe_share > 0

    @property
    def levels(self) -> tuple[int, ...]:
        """The released levels k (level k has 2^k cells)."""
        if self.shape is Shape.FLAT:
            return (self.height,)
        return tuple(range(self.first_level, self.height + 1))

    @property
    def n_leaves(self) -> int:
        return 1 << self.height


def config_dict(config: PrivacyConfig) -> dict[str, Any]:
    """The configuration as stored in report directories and saved aggregates (`probe_share`
    only for a two-phase release, `height_for` only when restricted, so a given height and the
    default `auto` store what they always did)."""
    out: dict[str, Any] = {
        "model": config.model.value,
        "epsilon": config.epsilon,
        "height": config.height,
        "shape": config.shape.value,
        "levels": list(config.levels),
        "unit": config.unit.value,
        "max_examples": config.max_examples,
        "relation": None if config.relation is None else config.relation.value,
    }
    if config.probed:
        out["probe_share"] = config.probe_share
    if config.colluders:
        out["colluders"] = config.colluders
        out["cohort_floor"] = config.cohort_floor
    if config.height_for:
        out["height_for"] = list(config.height_for)
    if config.split_share:
        out["split_level"] = config.split_level
        out["split_share"] = config.split_share
    if config.split_leaf_bound:
        out["split_leaf_bound"] = config.split_leaf_bound
    return out


def config_from_dict(p: Mapping[str, Any]) -> PrivacyConfig:
    """Read `config_dict`'s output back (KeyError, ValueError or UsageError if malformed); files
    written before units existed have no unit and mean one example. A hierarchy's first level is
    its stored levels' first (1 in files written before it could differ), and the stored levels
    must be the ones the configuration releases."""
    shape = Shape(p["shape"])
    stored = p.get("levels")
    first = 1
    if shape is Shape.HIERARCHY and isinstance(stored, list) and stored:
        first = stored[0]
    config = PrivacyConfig(
        model=PrivacyModel(p["model"]),
        height=int(p["height"]),
        shape=shape,
        epsilon=None if p["epsilon"] is None else float(p["epsilon"]),
        unit=Unit(p.get("unit", "example")),
        max_examples=None if p.get("max_examples") is None else int(p["max_examples"]),
        relation=p.get("relation"),
        probe_share=p.get("probe_share", 0.0),
        first_level=first,
        colluders=p.get("colluders", 0),
        cohort_floor=p.get("cohort_floor", 0),
        height_for=p.get("height_for", ()),
        split_level=p.get("split_level", 0),
        split_share=p.get("split_share", 0.0),
        split_leaf_bound=p.get("split_leaf_bound", 0.0),
    )
    if stored is not None and list(stored) != list(config.levels):
        raise ValueError(f"levels {stored} are not the levels {list(config.levels)} of {config}")
    return config
