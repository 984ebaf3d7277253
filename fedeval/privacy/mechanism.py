"""The mechanism of a release: the one object that states its privacy claim.

Every document fedeval writes (reports, saved releases, report manifests, maps), the CLI's
header, the ledger and the privacy audit read the claim from a `Mechanism`, so they cannot
disagree: the neighbouring relation and unit, the L1 sensitivity, the noise and its parameters,
the guarantee in words, what the server and the analyst learn, and a machine-readable DP event
(`fedeval.privacy.events`, composed by `fedeval.privacy.accounting`).

Sensitivities (DESIGN.md, privacy models). One example touches one node per released level of its
class's tree; a client under unit client up to L examples. So a unit moves the release by at
most Δ = levels·L in L1 when it is added or removed, and by 2·levels·L when its data is replaced
(one leaf path loses, another gains). Discrete Laplace with α = exp(−ε/Δ) on every count is then
pure ε-DP (Cormode & Markov, section 2.2). Under OUE each report is ε/L-LDP and a client sends at
most L of them (exactly L under unit client: padded with empty reports, so the number of reports
tells nothing), which composes to ε under replace.

Two-phase releases (`--height auto` under DP, `config.probed`): a probe of each class's counts
over the 2^k cells of a coarse level (k = `fedeval.core.height_choice.PROBE_LEVEL`) comes first
and chooses the height. Under distdp it is discrete Laplace at ε_probe = s·ε on each of its
2·2^k counts with Δ = L (add/remove: a unit sits in the histogram with at most L examples, one
count each) or 2L (replace: they move from one count to another), and the tree gets
ε_tree = (1 − s)·ε: sequential composition of pure DP, ε_probe + ε_tree = ε, also when the
tree's height is chosen from the probe (adaptive composition of pure ε-DP mechanisms adds up the
same way). Under localdp a share s of the reports, picked at random before any data is read,
are OUE reports of (label, probe cell) over 2·2^k bits at the same report ε; every unit still
sends its reports once, so the claim is ε as before (the probe and the tree see disjoint
reports: parallel composition)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import numpy as np

from fedeval.core.config import PrivacyConfig, PrivacyModel, Relation, Unit, config_from_dict
from fedeval.core.height_choice import PROBE_LEVEL
from fedeval.core.release import Probe
from fedeval.privacy import generator
from fedeval.privacy.base import ReleaseModel, counts_public
from fedeval.privacy.events import DpEvent
from fedeval.privacy.noise import discrete_laplace_variance, laplace_alpha
from fedeval.privacy.registry import model_of

if TYPE_CHECKING:
    from fedeval.core.release import Probe

NOT_PRIVATE = (
    "reproducible simulation (--seed): NOT private. Anyone who knows the seed can regenerate the "
    "noise and remove it; run without --seed for a private release"
)


T = TypeVar("T")


class _Asked(Generic[T]):
    """A read-only attribute of `Mechanism`: one number of its claim, asked of the model's module
    (`ask(kind, config)`, a function of `fedeval.privacy.base.ReleaseModel`) each time it is
    read."""

    def __init__(self, ask: Callable[[ReleaseModel, PrivacyConfig], T]) -> None:
        self.ask = ask

    @overload
    def __get__(self, mech: None, owner: type[Mechanism]) -> _Asked[T]: ...
    @overload
    def __get__(self, mech: Mechanism, owner: type[Mechanism]) -> T: ...
    def __get__(self, mech: Mechanism | None, owner: type[Mechanism]) -> T | _Asked[T]:
        return self if mech is None else self.ask(mech.kind, mech.config)


@dataclass(frozen=True)
class Mechanism:
    """The privacy claim of releases made under `config`.

    What every model shares lives here (the relation and unit in words, which counts are
    public, the seed's warning, the section's layout); the rest is asked of the model's module
    (`kind`, a `fedeval.privacy.base.ReleaseModel` from `fedeval.privacy.registry`), so this
    class does not branch on the model.

    `seeded` marks a reproducible simulation: the noise came from a user-given seed, so the
    release is not private whatever ε says (the guarantee says so, the ledger refuses it).
    `probe` is the released probe round of a two-phase release (its noisy counts are part of
    the release, so the section states them); None where not known or not probed.
    """

    config: PrivacyConfig
    seeded: bool = False
    probe: Probe | None = field(default=None, compare=False)

    @property
    def kind(self) -> ReleaseModel:
        """The model's module: its numbers, words and pipeline."""
        return model_of(self.config.model)

    @property
    def model(self) -> PrivacyModel:
        return self.config.model

    @property
    def relation(self) -> Relation | None:
        return self.config.relation

    @property
    def private(self) -> bool:
        """Whether the release adds noise (a DP model), so that a seed makes it not private."""
        return self.kind.TRAITS.adds_noise

    # The numbers of the claim, asked of the model's module (None where the model has none).
    sensitivity = _Asked[int | None](lambda kind, cfg: kind.sensitivity(cfg))
    """L1 sensitivity of the whole release to one unit under the relation (distdp), or None."""
    tree_epsilon = _Asked[float | None](lambda kind, cfg: kind.tree_epsilon(cfg))
    """ε the tree of counts is released at: (1 − s)·ε after a distdp probe, else ε."""
    probe_epsilon = _Asked[float | None](lambda kind, cfg: kind.probe_epsilon(cfg))
    """ε of the probe round: s·ε under distdp; under localdp each probe report's ε (the
    report ε: probe and tree reports are disjoint); None without a probe."""
    probe_sensitivity = _Asked[int | None](lambda kind, cfg: kind.probe_sensitivity(cfg))
    """Δ of the probe's histogram (distdp): L under add/remove, 2L under replace (one example
    is one count of it)."""
    alpha = _Asked[float | None](lambda kind, cfg: kind.count_alpha(cfg))
    """Discrete Laplace parameter α = exp(−ε/Δ) of every count (distdp), else None."""
    report_epsilon = _Asked[float | None](lambda kind, cfg: kind.oue_epsilon(cfg))
    """ε of one OUE report (localdp): ε, or ε/L when a client's L reports share it."""

    @property
    def probe_cells(self) -> int:
        """C, the probe's cells per class: the released probe's, else 2^PROBE_LEVEL."""
        if self.probe is not None:
            return self.probe.cells
        return 1 << PROBE_LEVEL.get(self.config.model, 0)

    @property
    def probe_alpha(self) -> float | None:
        """Discrete Laplace α = exp(−ε_probe/Δ_probe) of the probe's totals (distdp)."""
        eps, sens = self.probe_epsilon, self.probe_sensitivity
        return None if eps is None or sens is None else laplace_alpha(eps, sens)

    def probe_parameters(self) -> dict[str, Any] | None:
        """The probe round and its parameters, as stored in every document (None without)."""
        cfg = self.config
        own = self.kind.probe_parameters(self) if cfg.probed else None
        if own is None:
            return None
        cells = self.probe_cells
        common = {
            "share": cfg.probe_share,
            "cells_per_class": cells,
            "releases": f"each class's counts over {cells} equal cells of the score axis "
            "(negatives' cells, then positives'; their sums are the class totals)",
            "chooses": _chooses(cfg.height_for),
        }
        return common | own

    @property
    def noise_variance(self) -> float | None:
        """Variance of the discrete Laplace on one released count of one secure sum (distdp):
        what the shares of a cohort's honest clients carry by themselves. With t colluders
        tolerated a cohort's whole sum carries m/(m − t) times it (`cohort_noise_variance`)."""
        a = self.alpha
        return None if a is None else discrete_laplace_variance(a)

    @property
    def cohort_noise_variance(self) -> float | None:
        """The most variance one count of a cohort's sum carries (distdp): the discrete
        Laplace's, times cohort_floor/(cohort_floor − t) with t colluders tolerated."""
        v = self.noise_variance
        return None if v is None else v * self.config.share_factor

    @property
    def released_counts(self) -> int:
        """C, the noisy counts a release holds: 2·2^k per released level (and the probe's
        2·C cells)."""
        probe = 2 * self.probe_cells if self.config.probed else 0
        return sum(2 << k for k in self.config.levels) + probe

    @property
    def sampler_delta(self) -> float | None:
        """δ the samplers' 53-bit floating point costs a distdp release
        (`fedeval.privacy.generator.sampler_delta`); None for the other models."""
        return self.kind.sampler_delta(self)

    def randomness(self) -> str | None:
        """The generator the noise comes from, in words (None without noise)."""
        if not self.private:
            return None
        return generator.SEEDED_NAME if self.seeded else generator.NAME

    @property
    def exact_counts_public(self) -> bool:
        """Whether the number of units (clients taking part, or examples under unit example)
        may appear in a release: yes without DP and under replace, never under add-remove."""
        return counts_public(self.config)

    @property
    def clients_public(self) -> bool:
        """Whether the exact number of clients may be released (they are the units under unit
        client; under unit example their number does not change when an example is replaced)."""
        return self.exact_counts_public

    @property
    def examples_public(self) -> bool:
        """Whether the exact number of examples may be released: without DP, and under replace
        with unit example. Under unit client a client's number of examples is part of its data
        (padding hides it under localdp), so it stays secret under either relation."""
        return self.exact_counts_public and (not self.private or self.config.unit is Unit.EXAMPLE)

    @property
    def unit_words(self) -> str:
        cfg = self.config
        if cfg.unit is Unit.CLIENT:
            return f"one client (all its examples, at most {cfg.max_examples} after the cap)"
        return "one example"

    def neighbouring(self) -> str | None:
        """The neighbouring relation in words (None without DP)."""
        match self.config.relation:
            case Relation.ADD_REMOVE:
                return f"add or remove {self.unit_words}"
            case Relation.REPLACE:
                return f"replace the data of {self.unit_words} (the number of units is public)"
        return None

    def parameters(self) -> dict[str, Any]:
        """The noise and its parameters, as stored in every document."""
        return self.kind.parameters(self)

    def event(self) -> DpEvent:
        """The DP event the accountant composes (`fedeval.privacy.events`)."""
        return self.kind.event(self)

    def dp_event(self) -> dict[str, Any]:
        """The DP event as every document's privacy section stores it (`event().to_dict()`)."""
        return self.event().to_dict()

    @staticmethod
    def _what_decides() -> str:
        """What decides whether a release exists, declared: a refusal is a document too."""
        return (
            "; the claim covers valid tables (scores in the score range, labels of the declared "
            "classes, no missing value): the data holder validates every row before anything "
            "is released, and a table with an invalid row is refused whole, with nothing "
            "released; a release is made only from a non-empty table and, in the staged "
            "protocol, only when every cohort holds at least its minimum number of clients, so "
            "that a release exists is public (it says the input was valid and non-empty and "
            "each cohort reached its minimum size)"
        )

    def guarantee(self) -> str:
        """The privacy claim in words: exactly what the added noise supports."""
        if self.seeded and self.private:
            return f"{NOT_PRIVATE}. Without --seed: {self.kind.claim(self)}"
        return self.kind.claim(self)

    def server_learns(self) -> str:
        """What the aggregator learns in a deployment (honest-but-curious)."""
        return self.kind.server_learns(self)

    def analyst_learns(self) -> str:
        """What whoever receives only the release (and estimates from it) learns."""
        if not self.private:
            return "the exact summed counts (no DP)"
        what = "the noisy counts"
        if self.examples_public:
            what += " and the public number of examples and clients"
        elif self.clients_public:
            what += " and the public number of clients"
        if self.config.probed:
            what += ", the probe's noisy per-class histogram and the height chosen from it"
        eps = self.config.epsilon
        return (
            f"{what}, and that a release was made at all (the input was valid and non-empty, "
            "and each cohort reached its minimum number of clients): everything derived is "
            f"post-processing of the {eps:g}-DP release"
        )

    def section(self) -> dict[str, Any]:
        """The privacy section every document carries (the ledger reads it). A two-phase
        release adds `probe_share` and `probe` (the probe round's parameters); the probe's
        noisy totals are part of the release and stored beside it (`probe_section`)."""
        cfg = self.config
        out: dict[str, Any] = {
            "model": cfg.model.value,
            "epsilon": cfg.epsilon,
            "delta": 0.0 if self.private else None,
            "unit": cfg.unit.value,
            "max_examples": cfg.max_examples,
            "relation": None if cfg.relation is None else cfg.relation.value,
            "neighbouring": self.neighbouring(),
            "mechanism": self.parameters(),
            "dp_event": self.dp_event(),
            "height": cfg.height,
            "shape": cfg.shape.value,
            "levels": list(cfg.levels),
            "guarantee": self.guarantee(),
            "server_learns": self.server_learns(),
            "analyst_learns": self.analyst_learns(),
            "reproducible_simulation": self.seeded,
            "randomness": self.randomness(),
            "sampler_delta": self.sampler_delta,
        }
        if cfg.colluders:
            out["colluders"] = cfg.colluders
            out["cohort_floor"] = cfg.cohort_floor
        if cfg.split_share:  # the tree's ε split over its levels: a public setting, stated
            out["split_level"] = cfg.split_level
            out["split_share"] = cfg.split_share
            if cfg.split_leaf_bound:
                out["split_leaf_bound"] = cfg.split_leaf_bound
        probe = self.probe_parameters()
        if probe is not None:
            if self.probe is not None:
                probe["released"] = self.probe.to_dict()
            out["probe_share"] = cfg.probe_share
            out["probe"] = probe
        if cfg.height_for:  # `--height auto:METRIC,…`: a public setting, stated
            out["height_for"] = list(cfg.height_for)
        return out


HEIGHT_METRIC_WORDS = {"auc": "AUC", "ap": "AP", "pra": "P/R/A"}


def _chooses(height_for: tuple[str, ...]) -> str:
    """How the probe chooses the height, for the metrics `height_for` names (all when ())."""
    words = [HEIGHT_METRIC_WORDS[m] for m in height_for or HEIGHT_METRIC_WORDS]
    named = " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
    floor = "auc" in (height_for or ("auc",))
    return (
        "the height h, by fedeval.core.height_choice.choose_height from the noisy histogram "
        f"(post-processing of the probe): the least predicted noise and discretisation error of "
        f"{named}"
        + (" (the metrics asked for, a public setting)" if height_for else "")
        + (
            ", never below the AUC's height for smooth scores from the histogram's class totals"
            if floor
            else ""
        )
    )


def mechanism_of(
    config: PrivacyConfig, *, seeded: bool = False, probe: Probe | None = None
) -> Mechanism:
    """The mechanism of releases made under `config` (`seeded`: a --seed simulation; `probe`:
    the probe round a two-phase release released)."""
    return Mechanism(config, seeded, probe)


def probe_from_section(privacy: dict[str, Any]) -> Probe | None:
    """The released probe a privacy section states (`probe.released`), or None."""

    released = (privacy.get("probe") or {}).get("released")
    if released is None:
        return None
    counts = released["counts"]
    if not isinstance(counts, list) or any(
        isinstance(c, bool) or not isinstance(c, int) for c in counts
    ):
        raise ValueError("privacy.probe.released.counts must be 2·2^k integers")
    return Probe(np.asarray(counts, np.int64), released.get("reports"))


def mechanism_from_section(privacy: dict[str, Any]) -> Mechanism:
    """The mechanism a stored privacy section states, if the section is exactly what its
    configuration implies: an edited ε, Δ, guarantee or DP event (even re-sealed) is refused.

    Raises KeyError, ValueError or UsageError (the readers turn them into one line naming the
    file). Fields added later are ignored, so the comparison survives additive versions."""
    config = config_from_dict(privacy)
    seeded = privacy["reproducible_simulation"]
    if not isinstance(seeded, bool):
        raise ValueError("privacy.reproducible_simulation must be true or false")
    found = probe_from_section(privacy)
    if config.probed and found is None:
        raise ValueError("a two-phase release must state its probe's released counts")
    mech = Mechanism(config, seeded, found)
    claim = mech.section()
    if {k: privacy.get(k) for k in claim} != claim:
        raise ValueError(
            "its privacy section does not match what its configuration implies (edited?)"
        )
    return mech
