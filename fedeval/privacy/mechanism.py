"""The mechanism of a release: the one object that states its privacy claim.

Every document fedeval writes (reports, saved releases, report manifests, maps), the CLI's
header, the ledger and the privacy audit read the claim from a `Mechanism`, so they cannot
disagree: the neighbouring relation and unit, the L1 sensitivity, the noise and its parameters,
the guarantee in words, what the server and the analyst learn, and a machine-readable DP event
(the dicts `fedeval.ledger` composes with dp_accounting).

Sensitivities (DESIGN.md, privacy models). One example touches one node per released level of its
class's tree; a client under unit client up to L examples. So a unit moves the release by at
most Δ = levels·L in L1 when it is added or removed, and by 2·levels·L when its data is replaced
(one leaf path loses, another gains). Discrete Laplace with α = exp(−ε/Δ) on every count is then
pure ε-DP (Cormode & Markov, section 2.2). Under OUE each report is ε/L-LDP and a client sends at
most L of them (exactly L under unit client: padded with empty reports, so the number of reports
tells nothing), which composes to ε under replace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedeval.config import PrivacyConfig, PrivacyModel, Relation, Unit, config_from_dict
from fedeval.privacy.noise import discrete_laplace_variance, laplace_alpha, oue_probabilities

NOT_PRIVATE = (
    "reproducible simulation (--seed): NOT private. Anyone who knows the seed can regenerate the "
    "noise and remove it; run without --seed for a private release"
)


@dataclass(frozen=True)
class Mechanism:
    """The privacy claim of releases made under `config`.

    `seeded` marks a reproducible simulation: the noise came from a user-given seed, so the
    release is not private whatever ε says (the guarantee says so, the ledger refuses it).
    """

    config: PrivacyConfig
    seeded: bool = False

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

    def _epsilon(self) -> float:
        """ε of a DP model (PrivacyConfig has checked that distdp and localdp carry one)."""
        if self.config.epsilon is None:
            raise AssertionError(f"{self.config.model.value} configuration without epsilon")
        return self.config.epsilon

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
        """Variance of the noise on one released count of one secure sum (distdp)."""
        a = self.alpha
        return None if a is None else discrete_laplace_variance(a)

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
                return {
                    "name": "discrete Laplace from per-client Pólya shares",
                    "alpha": self.alpha,
                    "sensitivity": self.sensitivity,
                    "noise_variance_per_count": self.noise_variance,
                    "shares": "each of the m clients of a cohort adds Pólya(1/m, α) − "
                    "Pólya(1/m, α) to every count, so every cohort's secure sum carries "
                    "discrete Laplace P(k) ∝ α^|k| by itself",
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

    def dp_event(self) -> dict[str, Any]:
        """The machine-readable DP event `fedeval.ledger` composes (dp_accounting's vocabulary)."""
        match self.config.model:
            case PrivacyModel.DISTDP:
                return {
                    "type": "discrete_laplace",
                    "parameter": self._epsilon() / self._sensitivity(),
                    "sensitivity": self.sensitivity,
                }
            case PrivacyModel.LOCALDP:
                return {"type": "pure", "epsilon": self.config.epsilon}
        return {"type": "none"}

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
                    f"pure {eps:g}-DP (δ = 0) for the whole release; neighbouring datasets "
                    f"{self.neighbouring()}; discrete Laplace α = {self.alpha:.6g} on every "
                    f"count (Δ = {self.sensitivity})"
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
                return text + "; holds if every client of each cohort adds its noise share"
            case PrivacyModel.LOCALDP:
                if cfg.unit is Unit.CLIENT:
                    return (
                        f"pure {eps:g}-local DP (δ = 0) for each client: exactly "
                        f"{cfg.max_examples} reports at ε/{cfg.max_examples} each compose to "
                        f"{eps:g}; the release is {eps:g}-DP under replacing one client's data "
                        "(the number of clients is public)"
                    )
                return (
                    f"pure {eps:g}-local DP (δ = 0) for each example's report; the release is "
                    f"{eps:g}-DP under replacing one example's data (the number of examples "
                    "and each client's number of examples are public)"
                )
        raise AssertionError(cfg.model)

    def guarantee(self) -> str:
        """The privacy claim in words: exactly what the added noise supports."""
        if self.seeded and self.config.model is not PrivacyModel.FEDERATED:
            return f"{NOT_PRIVATE}. Without --seed: {self._claim()}"
        return self._claim()

    def server_learns(self) -> str:
        """What the aggregator learns in a deployment (honest-but-curious)."""
        match self.config.model:
            case PrivacyModel.FEDERATED:
                return (
                    "which clients take part, and the exact sum of each cohort's reports; a "
                    "single report stays hidden unless all its masking neighbours collude "
                    "with the server"
                )
            case PrivacyModel.DISTDP:
                return (
                    "which clients take part (public), and each cohort's noisy sum, which is "
                    f"{self.config.epsilon:g}-DP on its own (shares are sized to the cohort); "
                    "a single report stays hidden unless all its masking neighbours collude "
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
        eps = self.config.epsilon
        return f"{what}: everything derived is post-processing of the {eps:g}-DP release"

    def section(self) -> dict[str, Any]:
        """The privacy section every document carries (the ledger reads it)."""
        cfg = self.config
        return {
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
        }


def mechanism_of(config: PrivacyConfig, *, seeded: bool = False) -> Mechanism:
    """The mechanism of releases made under `config` (`seeded`: a --seed simulation)."""
    return Mechanism(config, seeded)


def mechanism_from_section(privacy: dict[str, Any]) -> Mechanism:
    """The mechanism a stored privacy section states, if the section is exactly what its
    configuration implies: an edited ε, Δ, guarantee or DP event (even re-sealed) is refused.

    Raises KeyError, ValueError or UsageError (the readers turn them into one line naming the
    file). Fields added later are ignored, so the comparison survives additive versions."""
    config = config_from_dict(privacy)
    seeded = privacy["reproducible_simulation"]
    if not isinstance(seeded, bool):
        raise ValueError("privacy.reproducible_simulation must be true or false")
    mech = Mechanism(config, seeded)
    claim = mech.section()
    if {k: privacy.get(k) for k in claim} != claim:
        raise ValueError(
            "its privacy section does not match what its configuration implies (edited?)"
        )
    return mech
