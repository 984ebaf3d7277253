"""The audit's scenarios: neighbouring datasets D and D′ under each mechanism's relation and unit,
the statistic each release is reduced to, the ε lower bound per scenario (one- and two-phase),
and each cohort's unmasked noise."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import pyarrow as pa

from fedeval.audit.heights import heights as fast_heights
from fedeval.audit.level_weights import claimed_weights, group_statistic, split_statistics
from fedeval.audit.statistics import EpsilonBound, epsilon_lower_bound, laplace_statistic
from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape, check_relation, check_unit
from fedeval.core.hierarchy import cell_index
from fedeval.core.params import resolve_config
from fedeval.core.release import Probe, Release
from fedeval.documents.release_file import release_dict
from fedeval.privacy import distdp, federated, localdp, probe
from fedeval.privacy.base import ClientBatch
from fedeval.privacy.federated import exact_counts as federated_exact_counts
from fedeval.privacy.mechanism import Mechanism, mechanism_of
from fedeval.privacy.registry import model_of
from fedeval.protocol import secagg
from fedeval.protocol.aggregate import unmasked
from fedeval.protocol.encode import local_reports, masked_reports

# --------------------------------------------------------------------------------------------
# Deterministic leak scan


# --------------------------------------------------------------------------------------------
# Scenarios: neighbouring datasets for each model × relation × unit, run through the real path


@dataclass(frozen=True)
class Scenario:
    """One mechanism to audit, on a small domain (h = 2, hierarchy: 12 released counts).

    D: `clients` clients; client 0 holds the example(s) that change; every other client holds
    `per_client` examples (L under unit client) spread over the score range. D′ by the relation
    and unit:
    add-remove/example removes one of client 0's two examples (client 0 still takes part);
    add-remove/client removes client 0 (its L examples); replace/example moves client 0's one
    example to the other class and end of the range; replace/client moves client 0's L examples
    there (the tightest pair), or with `short_client` replaces them by a single one (the number
    of examples is part of a client's data: localdp's padding must hide it).
    """

    model: str
    relation: str
    unit: str = "example"
    max_examples: int | None = None
    epsilon: float = 1.0
    height: int | str = 2
    clients: int = 11
    per_client: int = 4
    short_client: bool = False
    colluders: int = 0  # distdp: clients per cohort the shares tolerate (`--colluders`)
    split: tuple[float, ...] = (0, 0.0)  # (f, s[, c]): `privacy.level_split`, `report_split`

    @property
    def _cap(self) -> int:
        """L, the most examples a client holds under unit client."""
        if self.max_examples is None:
            raise ValueError(f"scenario {self.model} · {self.relation}: unit client needs an L")
        return self.max_examples

    @property
    def name(self) -> str:
        unit = self.unit if self.max_examples is None else f"client (L={self.max_examples})"
        short = ", one example left" if self.short_client else ""
        auto = f", auto (probe), n ≈ {self.clients * self.per_client:,}" if self.two_phase else ""
        t = f", {self.colluders} colluders tolerated" if self.colluders else ""
        t += f", split {self.split[1]:g} to levels ≤ {self.split[0]}" if self.split[1] else ""
        return f"{self.model} · {self.relation} · {unit}{short}{auto}{t}"

    @property
    def two_phase(self) -> bool:
        """`--height auto`: a probe of the class totals chooses the height first."""
        return self.height == "auto"

    def config(self) -> PrivacyConfig:
        """The configuration; under `auto` the two-phase one before its probe has run (its
        height is a placeholder the probe replaces)."""
        cfg = self._config()
        f, share, *c = self.split
        bound = c[0] if c else 0.0
        return (
            replace(cfg, split_level=int(f), split_share=share, split_leaf_bound=bound)
            if share
            else cfg
        )

    def _config(self) -> PrivacyConfig:
        if self.two_phase:
            return resolve_config(
                self.model,
                n=0,
                epsilon=self.epsilon,
                height="auto",
                shape=Shape.HIERARCHY,
                unit=self.unit,
                max_examples=self.max_examples,
                relation=self.relation,
            )
        assert isinstance(self.height, int)
        return PrivacyConfig(
            model=PrivacyModel(self.model),
            height=self.height,
            shape=Shape.HIERARCHY,
            epsilon=self.epsilon,
            # Validated and typed as the CLI's options are (PrivacyConfig would also accept the
            # strings, but its fields are the enums).
            unit=check_unit(self.unit, self.max_examples),
            max_examples=self.max_examples,
            relation=check_relation(PrivacyModel(self.model), self.relation),
            colluders=self.colluders,
            # `cohort_noise` splits the clients into two cohorts: the smaller is the floor.
            cohort_floor=self.clients // 2 if self.colluders else 0,
        )

    @property
    def changes_participation(self) -> bool:
        return self.relation == "add-remove" and self.unit == "client"

    def datasets(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(D, D′) as columns score, label, client."""
        rest_s, rest_y, rest_c = [], [], []
        # Under unit client nobody holds more than the cap (the cap is not what is audited).
        per_client = self.per_client if self.unit == "example" else self._cap
        for c in range(1, self.clients):
            for j in range(per_client):
                rest_s.append(((c * per_client + j) * 0.37) % 1.0)
                rest_y.append((c + j) % 2)
                rest_c.append(c)
        if self.relation == "add-remove" and self.unit == "example":
            zero_d, zero_dp = [(0.1, 0), (0.6, 1)], [(0.6, 1)]
        elif self.relation == "add-remove":
            zero_d, zero_dp = [(0.1, 0)] * self._cap, []
        elif self.unit == "example":
            zero_d, zero_dp = [(0.1, 0)], [(0.9, 1)]
        else:
            moved = 1 if self.short_client else self._cap
            zero_d, zero_dp = [(0.1, 0)] * self._cap, [(0.9, 1)] * moved

        def table(zero: list[tuple[float, int]]) -> dict[str, np.ndarray]:
            return {
                "score": np.array([s for s, _ in zero] + rest_s, float),
                "label": np.array([y for _, y in zero] + rest_y, np.int64),
                "client": np.array([0] * len(zero) + rest_c, np.int64),
            }

        return table(zero_d), table(zero_dp)


def all_scenarios(epsilon: float = 1.0) -> list[Scenario]:
    """Every model × relation × unit fedeval offers under DP (localdp: replace only), at a
    given height and under the two-phase `auto`."""
    out = []
    for relation in ("add-remove", "replace"):
        out.append(Scenario("distdp", relation, epsilon=epsilon))
        out.append(Scenario("distdp", relation, "client", 2, epsilon=epsilon))
    out.append(Scenario("localdp", "replace", epsilon=epsilon))
    out.append(Scenario("localdp", "replace", "client", 2, epsilon=epsilon))
    return out + two_phase_scenarios(epsilon)


BOUNDARY_PER_CLIENT = {
    ("distdp", "add-remove"): 532,
    ("distdp", "replace"): 1065,
    ("localdp", "replace"): 12_000,
}
"""Examples per client (10 clients besides client 0, half of them positive) of the larger
two-phase populations. The distdp ones were sized where the class-total rule changed its mind
at ε = 1; under the histogram rule (`fedeval.core.height_choice`) the height moves with the
probe's noise in these populations too (distdp: 4–7 over 200 probes), so neighbours' releases
come at different heights, which the audit must see through. Under localdp the rule reads no
bias at 1,507 per client, where the probe's noise swamps its histogram (h = 2 in 40 of 40
probes, which would test nothing); at 12,000 the height leaves 2 in 5 of 40 probes (3–6)."""


def two_phase_scenarios(epsilon: float = 1.0) -> list[Scenario]:
    """`--height auto` (two-phase) for every model × relation × unit: the tiny scenarios (h is
    then the rule's floor) and, unit example, populations at the rule's boundary (h varies)."""
    out = []
    for relation in ("add-remove", "replace"):
        out.append(Scenario("distdp", relation, epsilon=epsilon, height="auto"))
        out.append(Scenario("distdp", relation, "client", 2, epsilon=epsilon, height="auto"))
        per = BOUNDARY_PER_CLIENT["distdp", relation]
        out.append(Scenario("distdp", relation, epsilon=epsilon, height="auto", per_client=per))
    out.append(Scenario("localdp", "replace", epsilon=epsilon, height="auto"))
    out.append(Scenario("localdp", "replace", "client", 2, epsilon=epsilon, height="auto"))
    per = BOUNDARY_PER_CLIENT["localdp", "replace"]
    out.append(Scenario("localdp", "replace", epsilon=epsilon, height="auto", per_client=per))
    return out


def _cells_labels_clients(
    table: dict[str, np.ndarray], height: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:

    client = table["client"]
    # Client ids are 0..n−1 already; client 0 may be absent (removed): re-index densely.
    ids, client = np.unique(client, return_inverse=True)
    return cell_index(table["score"], height), table["label"].astype(bool), client, len(ids)


DOCUMENT_TRIALS = 50
"""Trials per side of an ε audit made wholly by the deployed path (distdp: the pairwise masks,
the server's unmasking and the release document; localdp: every client's reports; two-phase:
`probe.height` on each probe too). The other trials share their draws with these (the same
probes, heights and noise) and skip only what their statistic never reads
(tests/audit/test_fast_statistics.py)."""


def distdp_release_counts(
    scenario: Scenario,
    table: dict[str, np.ndarray],
    trials: int,
    rng: np.random.Generator,
    documents: int | None = None,
) -> np.ndarray:
    """`trials` released count vectors of one cohort holding every client of `table`, each made
    by the deployed path: per-client reports with shares sized to the cohort, pairwise masks
    keyed from the OS CSPRNG, the server's sum mod 2^32 and unmasking, the release document;
    after the first `documents` (default DOCUMENT_TRIALS), the same reports summed unmasked
    (the masks cancel and draw nothing from `rng`: the same counts)."""

    cfg = scenario.config()
    cells, labels, client, n = _cells_labels_clients(table, cfg.height)
    k = secagg.neighbours_per_side(n)
    documents = DOCUMENT_TRIALS if documents is None else documents
    out = []
    for t in range(trials):
        if t >= documents:
            batch = ClientBatch(cells, labels, client, n)
            out.append(model_of(cfg.model).chunk_sum(batch, cfg, n, rng)[0])
            continue
        vectors = masked_reports(cells, labels, client, 0, n, n, k, secagg.round_key(), cfg, rng)
        counts = unmasked(vectors.sum(axis=0, dtype=np.uint32))
        doc = release_dict(
            Release.of_cohort(
                cfg, counts, None, n, clients_public=mechanism_of(cfg).clients_public
            ),
            (0.0, 1.0),
        )
        out.append(doc["counts"])
    return np.asarray(out, np.int64)


def exact_counts(scenario: Scenario, table: dict[str, np.ndarray]) -> np.ndarray:
    """The exact node counts of `table` (what the noise hides)."""
    cfg = scenario.config()
    cells = cell_index(table["score"], cfg.height)
    leaves = np.zeros((2, cfg.n_leaves), np.int64)
    np.add.at(leaves, (table["label"].astype(np.int64), cells), 1)
    return federated_exact_counts(leaves, cfg)


def localdp_statistic(
    scenario: Scenario,
    table: dict[str, np.ndarray],
    trials: int,
    rng: np.random.Generator,
    documents: int | None = None,
) -> np.ndarray:
    """Client 0's reports as the server receives them (the encoder's Parquet rows), reduced to
    the likelihood-ratio statistic of D over D′: per report, the bit of D's value minus the bit
    of D′'s value at the report's level, summed over the client's reports. The first
    `documents` trials (default DOCUMENT_TRIALS) encode every client, the others client 0
    alone (its rows are the same in law; the statistic reads no other)."""

    cfg = scenario.config()
    d, dp = scenario.datasets()
    a = (int(d["label"][0]), float(d["score"][0]))  # D's value for client 0
    b = (int(dp["label"][0]), float(dp["score"][0]))  # D′'s
    cells, labels, client, n = _cells_labels_clients(table, cfg.height)
    zero = client == 0  # client 0's rows come first
    documents = DOCUMENT_TRIALS if documents is None else documents
    out = np.zeros(trials)
    for t in range(trials):
        if t < documents:
            rows = local_reports(cells, labels, client, 0, n, cfg, rng)
        else:
            rows = local_reports(cells[zero], labels[zero], client[zero], 0, 1, cfg, rng)
        out[t] = _client_zero_statistic(rows, cfg, a, b)
    return out


def _client_zero_statistic(
    rows: pa.Table, cfg: PrivacyConfig, a: tuple[int, float], b: tuple[int, float]
) -> int:
    """Σ over client 0's report rows of the bit of value `a` minus the bit of `b` at the
    report's level (OUE: the likelihood ratio of a over b, up to a factor)."""
    mine = rows.filter(np.asarray(rows["client"]) == 0)
    stat = 0
    for level, packed in zip(mine["level"].to_pylist(), mine["bits"].to_pylist(), strict=True):
        k = cfg.levels[level]
        unpacked = np.unpackbits(np.frombuffer(packed, np.uint8), count=2 << k)
        stat += int(unpacked[_bit_index(a, k, cfg.height)]) - int(
            unpacked[_bit_index(b, k, cfg.height)]
        )
    return stat


PROBE_RESOLUTION = 10
"""Cells per class (2^10) the two-phase audit reads scores at: the probe may choose any height
up to it (AUTO_MAX_HEIGHT under localdp; the distdp boundary scenario stays far below 14)."""


def _two_phase_exact(
    table: dict[str, np.ndarray], cfg: PrivacyConfig
) -> tuple[np.ndarray, np.ndarray]:
    """(the probe's exact per-class cell counts, flattened as released; exact node counts of
    the tree at cfg's height)."""
    labels = table["label"].astype(np.int64)
    leaves = np.zeros((2, cfg.n_leaves), np.int64)
    np.add.at(leaves, (labels, cell_index(table["score"], cfg.height)), 1)
    level = probe.probe_level(cfg.model, PROBE_RESOLUTION)
    cells = probe.probe_index(labels, cell_index(table["score"], level), level)
    return np.bincount(cells, minlength=2 << level), federated_exact_counts(leaves, cfg)


def _heights(found: list[Probe], base: PrivacyConfig, total: int, documents: int) -> np.ndarray:
    """The height each probe chooses: `probe.height` on the first `documents`, the same rule
    over all the others at once (`fedeval.audit.heights`)."""
    first = [probe.height(p, base, total, 0, PROBE_RESOLUTION) for p in found[:documents]]
    rest = fast_heights(found[documents:], base, total, 0, PROBE_RESOLUTION)
    return np.concatenate([np.asarray(first, np.int64), rest]).astype(np.int64)


def distdp_two_phase_statistic(
    scenario: Scenario, trials: int, rng: np.random.Generator, documents: int = DOCUMENT_TRIALS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The log-likelihood ratio of D over D′ of `trials` two-phase releases of each, made by the
    deployed path: round 1, every client's probe share (`fedeval.privacy.probe`), the height
    chosen from the sum; round 2, the per-client reports at that height and their sum. The
    height is a function of the probe's released counts, so the ratio is the probe's plus the
    tree's at that height: ln(1/α_p)·Λ(probe) + Σ_k ln(1/α_k(h))·Λ_k(tree at h), the levels
    in two groups of one α each (`fedeval.audit.level_weights`: the even tree's one α, or a
    split's α of the levels ≤ f and of the finer ones). The first
    `documents` trials per side mask the reports, unmask their sum and read both parts from
    the release document; the others sum the same reports unmasked (the masks cancel in the sum
    and draw nothing from `rng`, so both give the same counts). Returns (its parts on D
    (trials, 3): the probe's Λ and the tree's weighted Λ of its levels ≤ f and of the finer
    ones (f = 0 without a split: all in the last); the same on D′; the heights)."""
    base = scenario.config()
    d, dp = scenario.datasets()
    p_level = probe.probe_level(base.model, PROBE_RESOLUTION)
    out: list[np.ndarray] = []
    all_heights = []
    exact_at: dict[int, tuple[np.ndarray, ...]] = {}  # h → both datasets' exact counts
    weight: dict[int, tuple[np.ndarray, float, float]] = {}  # h → the claim's weights
    for table in (d, dp):
        fine, labels, client, n = _cells_labels_clients(table, PROBE_RESOLUTION)
        k = secagg.neighbours_per_side(n)
        coarse = fine >> (PROBE_RESOLUTION - p_level)
        found = [
            probe.client_sum_distdp(labels, coarse, p_level, n, base, rng) for _ in range(trials)
        ]
        heights = _heights(found, base, 0, documents)
        x_probe = np.stack([f.counts for f in found])
        parts = np.zeros((trials, 3))
        for t, h in enumerate(heights.tolist()):
            cfg = replace(base, height=h)
            cells = fine >> (PROBE_RESOLUTION - h)
            if h not in exact_at:
                exact_at[h] = (*_two_phase_exact(d, cfg), *_two_phase_exact(dp, cfg))
                weight[h] = claimed_weights(cfg)
            if t < documents:
                vectors = masked_reports(
                    cells, labels, client, 0, n, n, k, secagg.round_key(), cfg, rng
                )
                counts = unmasked(vectors.sum(axis=0, dtype=np.uint32))
                doc = release_dict(
                    Release.of_cohort(
                        cfg,
                        counts,
                        None,
                        n,
                        found[t],
                        clients_public=mechanism_of(cfg).clients_public,
                    ),
                    (0.0, 1.0),
                )
                x_probe[t] = doc["privacy"]["probe"]["released"]["counts"]
                x_tree = np.asarray(doc["counts"])
            else:
                batch = ClientBatch(cells, labels, client, n)
                x_tree = model_of(cfg.model).chunk_sum(batch, cfg, n, rng)[0]
            _, c_d, _, c_p = exact_at[h]
            parts[t, 1:] = group_statistic(x_tree, c_d, c_p, weight[h])
        t_d, _, t_p, _ = exact_at[int(heights[0])]  # the probe's exact counts: any h
        parts[:, 0] = laplace_statistic(x_probe, t_d, t_p)
        out.append(parts)
        all_heights.append(heights)
    return out[0], out[1], np.concatenate(all_heights)


def localdp_two_phase_statistic(
    scenario: Scenario,
    table: dict[str, np.ndarray],
    trials: int,
    rng: np.random.Generator,
    documents: int = DOCUMENT_TRIALS,
) -> tuple[np.ndarray, np.ndarray]:
    """Client 0's reports of `trials` two-phase runs on `table`, as the server receives them,
    reduced to the statistic of `localdp_statistic`: round 1, every report slot's role and the
    probe reports' two bits (`fedeval.privacy.probe`; a probe report of client 0 adds its bit
    of D's label minus that of D′'s); the height from their sums; round 2, the encoder's tree
    reports at that height for the other slots (`fedeval.protocol.encode.local_reports`): of
    every client in the first `documents` trials, of client 0 alone in the others (each report
    is drawn on its own, so client 0's rows are the same in law; the statistic reads no
    other). Returns (the statistic's two parts (trials, 2): client 0's probe reports', its
    tree reports'; the heights)."""
    base = scenario.config()
    d, dp = scenario.datasets()
    a = (int(d["label"][0]), float(d["score"][0]))
    b = (int(dp["label"][0]), float(dp["score"][0]))
    fine, labels, client, n = _cells_labels_clients(table, PROBE_RESOLUTION)
    total = len(labels) + localdp.empty_reports(len(labels), n, base)
    p_level = probe.probe_level(base.model, PROBE_RESOLUTION)
    coarse = fine >> (PROBE_RESOLUTION - p_level)
    at_a, at_b = _bit_index(a, p_level, p_level), _bit_index(b, p_level, p_level)  # probe bits
    p_cells, p_labels, p_client, real = localdp.padded(coarse, labels, client, n, base)
    out = np.zeros((trials, 2))
    found, roles = [], []
    for t in range(trials):
        role = probe.roles(len(p_labels), base, rng)
        bits = probe.client_bits_localdp(
            p_labels[role], p_cells[role], p_level, real[role], base, rng
        )
        mine = bits[p_client[role] == 0]
        out[t, 0] = int(mine[:, at_a].sum()) - int(mine[:, at_b].sum())
        found.append(Probe(bits.sum(axis=0), int(role.sum())))
        roles.append(role)
    heights = _heights(found, base, total, documents)
    for t, h in enumerate(heights.tolist()):
        cfg = replace(base, height=h)
        role = roles[t]
        keep = ~role[: len(labels)]
        taken = np.bincount(p_client[role], minlength=n)
        if t >= documents:  # client 0 alone (its rows come first: `_cells_labels_clients`)
            keep &= client == 0
            taken = taken[:1]
        rows = local_reports(
            fine[keep] >> (PROBE_RESOLUTION - h), labels[keep], client[keep], 0, len(taken),
            cfg, rng, taken,
        )  # fmt: skip
        out[t, 1] = _client_zero_statistic(rows, cfg, a, b)
    return out, heights


def _bit_index(value: tuple[int, float], k: int, h: int) -> int:
    """The OUE bit a (label, score) sets at level k of a height-h tree (k = h: its bit in a
    probe of 2^h cells per class)."""
    label, score = value
    cell = min(int(score * (1 << h)), (1 << h) - 1)
    return (label << k) + (cell >> (h - k))


def audit_epsilon(
    scenario: Scenario, trials: int, rng: np.random.Generator, confidence: float = 0.999
) -> EpsilonBound:
    """The ε lower bound for `scenario` from `trials` runs per side (module docstring, 2)."""
    d, dp = scenario.datasets()
    if scenario.two_phase:
        return _two_phase_bound(scenario, trials, rng, confidence)
    if scenario.model == "distdp":
        c, c_prime = exact_counts(scenario, d), exact_counts(scenario, dp)
        x = distdp_release_counts(scenario, d, trials, rng)
        y = distdp_release_counts(scenario, dp, trials, rng)
        sd, sp = laplace_statistic(x, c, c_prime), laplace_statistic(y, c, c_prime)
    else:
        sd = localdp_statistic(scenario, d, trials, rng)
        sp = localdp_statistic(scenario, dp, trials, rng)
    return epsilon_lower_bound(sd, sp, confidence=confidence)


PROBE_WEIGHTS = (1.0, 4.0, 20.0)
"""Weights of the probe's evidence against the tree's that the two-phase audit scans (distdp):
as the claim splits ε (1), and heavier, up to as if the probe had the whole ε (1/s = 20). The
auditor does not trust the claimed split: a probe noised for more ε than it is charged shows
only when its part is weighed by what it really leaks."""


def _two_phase_bound(
    scenario: Scenario, trials: int, rng: np.random.Generator, confidence: float
) -> EpsilonBound:
    """The best ε lower bound over events of several statistics of a two-phase release: each
    part alone (the probe's, the tree's) and their sums at `PROBE_WEIGHTS` (distdp; localdp:
    the plain sum, every report has the same ε), and with a split of the tree's ε each group
    of levels alone and raised to the whole ε_tree (`level_weights.split_statistics`),
    Bonferroni-corrected over the statistics."""

    d, dp = scenario.datasets()
    split: list[tuple[np.ndarray, np.ndarray]] = []
    if scenario.model == "distdp":
        by_group = distdp_two_phase_statistic(scenario, trials, rng)
        split = split_statistics(by_group[0], by_group[1], scenario.config())
        on_d, on_dp = (np.stack([p[:, 0], p[:, 1] + p[:, 2]], axis=1) for p in by_group[:2])
        claim = Mechanism(scenario.config())
        assert claim.probe_alpha is not None
        w = -math.log(claim.probe_alpha)
        sums = [
            (w * k * on_d[:, 0] + on_d[:, 1], w * k * on_dp[:, 0] + on_dp[:, 1])
            for k in PROBE_WEIGHTS
        ]
    else:
        on_d, _ = localdp_two_phase_statistic(scenario, d, trials, rng)
        on_dp, _ = localdp_two_phase_statistic(scenario, dp, trials, rng)
        sums = [(on_d.sum(axis=1), on_dp.sum(axis=1))]
    candidates = [(on_d[:, 0], on_dp[:, 0]), (on_d[:, 1], on_dp[:, 1]), *sums, *split]
    names = ["probe part", "tree part", *(f"sum {i + 1}" for i in range(len(sums)))]
    names += [f"split {i + 1}" for i in range(len(split))]
    each = 1.0 - (1.0 - confidence) / len(candidates)
    best = EpsilonBound(0.0, "none", 2 * trials)
    for (a, b), name in zip(candidates, names, strict=True):
        found = epsilon_lower_bound(a, b, confidence=each, thresholds=_quantile_taus(a, b))
        if found.epsilon_lb > best.epsilon_lb:
            best = EpsilonBound(found.epsilon_lb, f"{name}: {found.event}", found.trials)
    return best


def _quantile_taus(sd: np.ndarray, sp: np.ndarray, count: int = 64) -> list[float]:
    """Thresholds for a continuous statistic (a weighted sum: nearly every value distinct):
    `count` quantiles of the pooled values, so the Bonferroni correction stays small."""
    pooled = np.concatenate([sd, sp])
    distinct = np.unique(pooled)
    if len(distinct) <= count:
        return cast(list[float], distinct.tolist())
    return sorted(set(np.quantile(pooled, np.linspace(0.005, 0.995, count)).tolist()))


def cohort_noise(
    scenario: Scenario, trials: int, rng: np.random.Generator, cohorts: int = 2
) -> list[np.ndarray]:
    """Noise of each cohort's unmasked sum (sum − exact), D split into `cohorts` cohorts, over
    `trials` runs: one array (trials × counts) per cohort."""
    cfg = scenario.config()
    d, _ = scenario.datasets()
    out = []
    for sel, rows in _cohorts(d, cfg, cohorts):
        m = rows.n_clients
        exact = exact_counts(scenario, {key: col[sel] for key, col in d.items()})
        k = secagg.neighbours_per_side(m)
        cells, labels, client = rows.cells, rows.labels, rows.client
        noise = []
        for _ in range(trials):
            v = masked_reports(cells, labels, client, 0, m, m, k, secagg.round_key(), cfg, rng)
            noise.append(unmasked(v.sum(axis=0, dtype=np.uint32)) - exact)
        out.append(np.asarray(noise))
    return out


def _cohorts(
    d: dict[str, np.ndarray], cfg: PrivacyConfig, cohorts: int
) -> Iterator[tuple[np.ndarray, ClientBatch]]:
    """D split into `cohorts` cohorts of consecutive clients: each one's rows of D (a mask) and
    its examples at the release's height, clients numbered from 0 inside the cohort."""
    cells, labels, client, n = _cells_labels_clients(d, cfg.height)
    bounds = np.linspace(0, n, cohorts + 1).round().astype(int)
    for lo, hi in itertools.pairwise(bounds):
        sel = (client >= lo) & (client < hi)
        yield sel, ClientBatch(cells[sel], labels[sel], client[sel] - lo, hi - lo)


def honest_noise(
    scenario: Scenario, trials: int, rng: np.random.Generator, colluders: int, cohorts: int = 2
) -> list[np.ndarray]:
    """What a server that colludes with the first `colluders` clients of each cohort is left
    with: the cohort's sum less those clients' reports (their counts and noise shares, which
    they hand over) less the other clients' exact counts, over `trials` runs; one array
    (trials × counts) per cohort, D split as `cohort_noise` splits it.

    The reports are the deployed encoder's (`distdp.client_reports` with the cohort's size, as
    `encode` calls it) before masking: the masks cancel in the cohort's sum and the colluders
    know their own, so they change nothing here (`cohort_noise` checks the masked path)."""
    cfg = scenario.config()
    d, _ = scenario.datasets()
    out = []
    for _, rows in _cohorts(d, cfg, cohorts):
        m = rows.n_clients
        honest_exact = federated.onehot_reports(rows, cfg)[colluders:].sum(axis=0)
        noise = []
        for _ in range(trials):
            reports, _ = distdp.client_reports(rows, cfg, m, rng)
            noise.append(reports[colluders:].sum(axis=0) - honest_exact)
        out.append(np.asarray(noise))
    return out


# --------------------------------------------------------------------------------------------
# Documents other than JSON: text (stderr, tables, CSV), figures, Parquet layout
