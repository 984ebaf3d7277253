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

Two-phase releases (`--height auto` under DP, `config.probed`): a probe of the two class totals
comes first and chooses the height. Under distdp it is discrete Laplace at ε_probe = s·ε with
Δ = L (add/remove: a unit sits in the totals with at most L examples) or 2L (replace: they move
from one total to the other), and the tree gets ε_tree = (1 − s)·ε: sequential composition of
pure DP, ε_probe + ε_tree = ε, also when the tree's height is chosen from the probe (adaptive
composition of pure ε-DP mechanisms adds up the same way). Under localdp a share s of the
reports, picked at random before any data is read, are OUE reports of the label alone (one cell
per class) at the same report ε; every unit still sends its reports once, so the claim is ε as
before (the probe and the tree see disjoint reports: parallel composition).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fedeval.core.config import PrivacyConfig, PrivacyModel, Relation, Unit, config_from_dict
from fedeval.core.release import Probe
from fedeval.privacy import generator
from fedeval.privacy.events import (
    ComposedEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    NoNoiseEvent,
    PureEvent,
)
from fedeval.privacy.noise import discrete_laplace_variance, laplace_alpha, oue_probabilities

if TYPE_CHECKING:
    from fedeval.core.release import Probe

NOT_PRIVATE = (
    "reproducible simulation (--seed): NOT private. Anyone who knows the seed can regenerate the "
    "noise and remove it; run without --seed for a private release"
)


@dataclass(frozen=True)
class Mechanism:
    """The privacy claim of releases made under `config`.

    `seeded` marks a reproducible simulation: the noise came from a user-given seed, so the
    release is not private whatever ε says (the guarantee says so, the ledger refuses it).
    `probe` is the released probe round of a two-phase release (its noisy counts are part of
    the release, so the section states them); None where not known or not probed.
    """

    config: PrivacyConfig
    seeded: bool = False
    probe: Probe | None = field(default=None, compare=False)

    @property
    def model(self) -> PrivacyModel:
        return self.config.model

    @property
    def relation(self) -> Relation | None:
        return self.config.relation

    @property
    def sensitivity(self) -> int | None:
        """L1 sensitivity of the whole release to one unit under the relation (distdp), or None."""
        cfg = self.config
        if cfg.model is not PrivacyModel.DISTDP:
            return None
        return self._sensitivity()

    def _sensitivity(self) -> int:
        """Δ of the release under the relation, for a model that adds noise to counts."""
        cfg = self.config
        factor = 2 if cfg.relation is Relation.REPLACE else 1
        return factor * len(cfg.levels) * cfg.examples_per_unit

    def _total_epsilon(self) -> float:
        """ε of a DP model (PrivacyConfig has checked that distdp and localdp carry one)."""
        if self.config.epsilon is None:
            raise AssertionError(f"{self.config.model.value} configuration without epsilon")
        return self.config.epsilon

    def _epsilon(self) -> float:
        """ε of the tree: the whole ε, less the probe's share under distdp."""
        eps = self._total_epsilon()
        if self.config.model is PrivacyModel.DISTDP and self.config.probed:
            return eps * (1.0 - self.config.probe_share)
        return eps

    @property
    def tree_epsilon(self) -> float | None:
        """ε the tree of counts is released at: (1 − s)·ε after a distdp probe, else ε."""
        return None if self.config.epsilon is None else self._epsilon()

    @property
    def probe_epsilon(self) -> float | None:
        """ε of the probe round: s·ε under distdp; under localdp each probe report's ε (the
        report ε: probe and tree reports are disjoint); None without a probe."""
        if not self.config.probed:
            return None
        if self.config.model is PrivacyModel.LOCALDP:
            return self._report_epsilon()
        return self._total_epsilon() * self.config.probe_share

    @property
    def probe_sensitivity(self) -> int | None:
        """Δ of the probe's two class totals (distdp): L under add/remove, 2L under replace."""
        if not self.config.probed or self.config.model is not PrivacyModel.DISTDP:
            return None
        factor = 2 if self.config.relation is Relation.REPLACE else 1
        return factor * self.config.examples_per_unit

    @property
    def probe_alpha(self) -> float | None:
        """Discrete Laplace α = exp(−ε_probe/Δ_probe) of the probe's totals (distdp)."""
        eps, sens = self.probe_epsilon, self.probe_sensitivity
        return None if eps is None or sens is None else laplace_alpha(eps, sens)

    def probe_parameters(self) -> dict[str, Any] | None:
        """The probe round and its parameters, as stored in every document (None without)."""
        cfg = self.config
        if not cfg.probed:
            return None
        common = {
            "share": cfg.probe_share,
            "releases": "the two class totals [negatives, positives]",
            "chooses": "the height h, by fedeval.core.params.probe_height from the noisy totals "
            "(post-processing of the probe)",
        }
        if cfg.model is PrivacyModel.DISTDP:
            a = self.probe_alpha
            assert a is not None
            return common | {
                "name": "discrete Laplace on the class totals",
                "epsilon": self.probe_epsilon,
                "alpha": a,
                "sensitivity": self.probe_sensitivity,
                "noise_variance_per_count": discrete_laplace_variance(a),
                "composition": "sequential: ε_probe + ε_tree = ε",
            }
        p, q = oue_probabilities(self._report_epsilon())
        return common | {
            "name": "Optimal Unary Encoding of the label",
            "epsilon_per_report": self._report_epsilon(),
            "p": p,
            "q": q,
            "domain": "label (level 0: one cell per class)",
            "report_share": "each report (padding too) is a probe report with probability "
            f"{cfg.probe_share:g}, drawn before any data is read; the others go to the tree",
            "composition": "parallel: every report is one probe or one tree report, so each "
            "unit's reports compose to ε as without a probe",
        }

    @property
    def alpha(self) -> float | None:
        """Discrete Laplace parameter α = exp(−ε/Δ) of every count (distdp), else None."""
        if self.config.model is not PrivacyModel.DISTDP:
            return None
        return laplace_alpha(self._epsilon(), self._sensitivity())

    @property
    def report_epsilon(self) -> float | None:
        """ε of one OUE report (localdp): ε, or ε/L when a client's L reports share it."""
        if self.config.model is not PrivacyModel.LOCALDP:
            return None
        return self._report_epsilon()

    def _report_epsilon(self) -> float:
        return self._epsilon() / self.config.examples_per_unit

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
        two class totals)."""
        return sum(2 << k for k in self.config.levels) + (2 if self.config.probed else 0)

    @property
    def sampler_delta(self) -> float | None:
        """δ the samplers' 53-bit floating point costs a distdp release
        (`fedeval.privacy.generator.sampler_delta`); None for the other models."""
        if self.config.model is not PrivacyModel.DISTDP:
            return None
        return generator.sampler_delta(
            self._total_epsilon(), self.released_counts, self.config.share_factor
        )

    def randomness(self) -> str | None:
        """The generator the noise comes from, in words (None without noise)."""
        if self.config.model is PrivacyModel.FEDERATED:
            return None
        return generator.SEEDED_NAME if self.seeded else generator.NAME

    @property
    def exact_counts_public(self) -> bool:
        """Whether the number of units (clients taking part, or examples under unit example)
        may appear in a release: yes without DP and under replace, never under add-remove."""
        return self.config.relation is not Relation.ADD_REMOVE

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
        return self.exact_counts_public and (
            self.config.model is PrivacyModel.FEDERATED or self.config.unit is Unit.EXAMPLE
        )

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
        cfg = self.config
        match cfg.model:
            case PrivacyModel.FEDERATED:
                return {
                    "name": "secure aggregation",
                    "noise": "none",
                    "note": "exact sums; no differential privacy: an adversary who knows every "
                    "other client's data can recover the remaining one",
                }
            case PrivacyModel.DISTDP:
                t = cfg.colluders
                shares = (
                    "each of the m clients of a cohort adds Pólya(1/m, α) − Pólya(1/m, α) to "
                    "every count, so every cohort's secure sum carries discrete Laplace "
                    "P(k) ∝ α^|k| by itself"
                    if t == 0
                    else f"each of the m clients of a cohort adds Pólya(1/(m − {t}), α) − "
                    f"Pólya(1/(m − {t}), α) to every count, so the shares of any m − {t} of "
                    "them sum to discrete Laplace P(k) ∝ α^|k|: a cohort's sum carries "
                    f"m/(m − {t}) ≤ {cfg.share_factor:.6g} times that noise (m ≥ "
                    f"{cfg.cohort_floor})"
                )
                return {
                    "name": "discrete Laplace from per-client Pólya shares",
                    "alpha": self.alpha,
                    "sensitivity": self.sensitivity,
                    "noise_variance_per_count": self.noise_variance,
                    "colluders": t,
                    "shares": shares,
                    "largest_fast_draw": generator.fast_sampler_bound(self.alpha or 0.5),
                }
            case PrivacyModel.LOCALDP:
                p, q = oue_probabilities(self._report_epsilon())
                return {
                    "name": "Optimal Unary Encoding",
                    "p": p,
                    "q": q,
                    "epsilon_per_report": self.report_epsilon,
                    "domain": "label × cell of one level",
                    "levels_per_example": 1,
                    "level_assignment": "uniform at random over the released levels"
                    if len(cfg.levels) > 1
                    else "the leaf level",
                    "reports_per_client": f"exactly {cfg.max_examples} (empty reports pad a "
                    "client with fewer examples)"
                    if cfg.unit is Unit.CLIENT
                    else "one per example",
                }
        raise AssertionError(cfg.model)

    def event(self) -> DpEvent:
        """The DP event the accountant composes (`fedeval.privacy.events`)."""
        match self.config.model:
            case PrivacyModel.DISTDP:
                tree = DiscreteLaplaceEvent(
                    self._epsilon() / self._sensitivity(),
                    self._sensitivity(),
                    self.config.colluders,
                )
                sens = self.probe_sensitivity
                if sens is None:
                    return tree
                probe = DiscreteLaplaceEvent(
                    self._total_epsilon() * self.config.probe_share / sens, sens
                )
                return ComposedEvent((probe, tree))
            case PrivacyModel.LOCALDP:
                return PureEvent(self._total_epsilon())
        return NoNoiseEvent()

    def dp_event(self) -> dict[str, Any]:
        """The DP event as every document's privacy section stores it (`event().to_dict()`)."""
        return self.event().to_dict()

    def _claim(self) -> str:
        cfg = self.config
        eps = cfg.epsilon
        match cfg.model:
            case PrivacyModel.FEDERATED:
                return (
                    "no differential privacy: secure aggregation hides individual reports but "
                    "the released sums are exact"
                )
            case PrivacyModel.DISTDP:
                text = (
                    f"{eps:g}-DP with δ = {self.sampler_delta:.1e} for the whole release (pure "
                    f"{eps:g}-DP for exact discrete Laplace noise; δ is the noise the samplers' "
                    "53-bit floating point cannot draw, the draws within reach taken as exact); "
                    f"neighbouring datasets {self.neighbouring()}; discrete Laplace "
                    f"α = {self.alpha:.6g} on every count (Δ = {self.sensitivity})"
                )
                if cfg.probed:
                    text += (
                        f" at ε_tree = {self._epsilon():.6g}, after a probe of the two class "
                        f"totals at ε_probe = {self.probe_epsilon:.6g} (discrete Laplace "
                        f"α = {self.probe_alpha:.6g}, Δ = {self.probe_sensitivity}) that chose "
                        f"the height: {self.probe_epsilon:.6g} + {self._epsilon():.6g} = {eps:g}"
                    )
                if cfg.relation is Relation.ADD_REMOVE:
                    text += (
                        "; no exact count of examples, positives, clients or reports is "
                        "released (totals are estimated from the noisy counts)"
                    )
                elif self.examples_public:
                    text += "; the number of examples and of clients is public"
                else:
                    text += (
                        "; the number of clients is public (each client's number of examples "
                        "is part of its data and is not released)"
                    )
                t = cfg.colluders
                collusion = (
                    "holds if every client of each cohort adds its noise share and none "
                    "colludes with the server (a server that colludes with c of a cohort's m "
                    "clients removes their shares, c/m of the noise: encode with --colluders)"
                    if t == 0
                    else f"holds if every client of each cohort adds its noise share, against a "
                    f"server that colludes with up to {t} clients of each cohort (the shares of "
                    f"the other m − {t} carry the whole noise)"
                )
                return f"{text}{self._what_decides()}; {collusion}"
            case PrivacyModel.LOCALDP:
                probe = (
                    f"; a share {cfg.probe_share:g} of the reports, drawn at random before any "
                    "data is read, report the label alone (the probe that chose the height), "
                    "the others a level of the tree: each report is still sent once"
                    if cfg.probed
                    else ""
                )
                bits = (
                    "; the bits are drawn in 53-bit floating point (a uniform against p for "
                    "the report's own bit, numpy's binomial sampler for how many others turn "
                    "on) and taken as exact: p and q hold only to within floating-point "
                    "rounding, which this ε does not account for"
                )
                if cfg.unit is Unit.CLIENT:
                    return (
                        f"pure {eps:g}-local DP (δ = 0) for each client: exactly "
                        f"{cfg.max_examples} reports at ε/{cfg.max_examples} each compose to "
                        f"{eps:g}; the release is {eps:g}-DP under replacing one client's data "
                        f"(the number of clients is public){probe}{bits}{self._what_decides()}"
                    )
                return (
                    f"pure {eps:g}-local DP (δ = 0) for each example's report; the release is "
                    f"{eps:g}-DP under replacing one example's data (the number of examples "
                    f"and each client's number of examples are public){probe}{bits}"
                    f"{self._what_decides()}"
                )
        raise AssertionError(cfg.model)

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
        if self.seeded and self.config.model is not PrivacyModel.FEDERATED:
            return f"{NOT_PRIVATE}. Without --seed: {self._claim()}"
        return self._claim()

    def server_learns(self) -> str:
        """What the aggregator learns in a deployment (honest-but-curious)."""
        text = self._server_learns()
        if self.config.probed:
            text += (
                "; first, the probe round's noisy class totals (each cohort's sum of the probe "
                "shares carries the probe's whole noise) and the height chosen from them"
                if self.config.model is PrivacyModel.DISTDP
                else "; which reports are probe reports (drawn before any data is read)"
            )
        return text

    def _server_learns(self) -> str:
        match self.config.model:
            case PrivacyModel.FEDERATED:
                return (
                    "which clients take part, and the exact sum of each cohort's reports; a "
                    "single report stays hidden unless all its masking neighbours collude "
                    "with the server"
                )
            case PrivacyModel.DISTDP:
                t = self.config.colluders
                return (
                    "which clients take part (public), and each cohort's noisy sum, which is "
                    f"{self.config.epsilon:g}-DP on its own (shares are sized to the cohort) "
                    + (
                        "as long as no client of the cohort colludes with it (c colluding "
                        "clients of m hand it c/m of the noise)"
                        if t == 0
                        else f"even with up to {t} colluding clients of the cohort"
                    )
                    + "; a single report stays hidden unless all its masking neighbours collude "
                    "with the server"
                )
            case PrivacyModel.LOCALDP:
                per = (
                    f"exactly {self.config.max_examples} reports per client"
                    if self.config.unit is Unit.CLIENT
                    else "one report per example (so each client's number of examples)"
                )
                return (
                    f"which clients take part and every randomised report, each "
                    f"{self.report_epsilon:g}-local DP; {per}"
                )
        raise AssertionError(self.config.model)

    def analyst_learns(self) -> str:
        """What whoever receives only the release (and estimates from it) learns."""
        if self.config.model is PrivacyModel.FEDERATED:
            return "the exact summed counts (no DP)"
        what = "the noisy counts"
        if self.examples_public:
            what += " and the public number of examples and clients"
        elif self.clients_public:
            what += " and the public number of clients"
        if self.config.probed:
            what += ", the probe's noisy class totals and the height chosen from them"
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
        out = {
            "model": cfg.model.value,
            "epsilon": cfg.epsilon,
            "delta": None if cfg.model is PrivacyModel.FEDERATED else 0.0,
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
        probe = self.probe_parameters()
        if probe is not None:
            if self.probe is not None:
                probe["released"] = self.probe.to_dict()
            out["probe_share"] = cfg.probe_share
            out["probe"] = probe
        return out


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
        raise ValueError("privacy.probe.released.counts must be two integers")
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
