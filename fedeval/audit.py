"""Empirical privacy audit: try to break each mechanism's claim as an adversary would.

Three checks (method: shared AUDIT.md), each run on neighbouring datasets D and D′ under the
mechanism's own relation and unit, through the code a deployment runs (the per-client encoder,
the pairwise masks, the server's unmasking, the release document):

1. **Deterministic leaks** (`deterministic_leaks`): every document a party receives is flattened
   into path → value; a path equal across repeated runs on D, equal across runs on D′, and
   different between them is a deterministic function of the data that separates neighbours:
   ε = ∞ whatever the noise.
2. **ε lower bound** (`epsilon_lower_bound`): for pure ε-DP, P[M(D) ∈ S] ≤ e^ε P[M(D′) ∈ S] for
   every event S. With T trials per side, one-sided Clopper–Pearson bounds give
   ε_lb = ln(p_lo(D) / p_hi(D′)); the events are thresholds τ of the likelihood-ratio statistic
   (distdp: Λ(x) = Σ_i |x_i − c′_i| − |x_i − c_i|; OUE: the report bits that differ), scanned
   with a Bonferroni correction. The audit fails if ε_lb exceeds the claim.
3. **Per-cohort noise** (`variance_interval`): each cohort's unmasked sum minus its exact sum,
   over many runs, must show the mechanism's stated variance (χ² interval), so no secure sum the
   server unmasks on its own carries less noise than the claim needs.

The tests in ``tests/audit`` run these on every model × relation × unit and on deliberately
broken mechanisms (the checks must fail there); ``benchmarks/audit.py`` prints the table.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds (lower, upper), each at `confidence`, for k of n."""
    alpha = 1.0 - confidence
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class EpsilonBound:
    """The best lower bound on ε found, the event that gave it, and the trials behind it."""

    epsilon_lb: float
    event: str
    trials: int


def epsilon_lower_bound(
    stat_d: np.ndarray,
    stat_dp: np.ndarray,
    *,
    confidence: float = 0.999,
    thresholds: Iterable[float] | None = None,
) -> EpsilonBound:
    """ε lower bound from a test statistic of runs on D (`stat_d`) and on D′ (`stat_dp`).

    Events S = {stat ≥ τ} (evidence for D) and {stat ≤ τ} (evidence for D′, with the roles
    swapped), for every τ in `thresholds` (default: every distinct value seen); the confidence of
    each bound is Bonferroni-corrected for the number of events tried, so the reported bound
    holds at `confidence` overall.
    """
    stat_d = np.asarray(stat_d, float)
    stat_dp = np.asarray(stat_dp, float)
    taus = (
        sorted(set(np.concatenate([stat_d, stat_dp]).tolist()))
        if thresholds is None
        else list(thresholds)
    )
    events = 2 * len(taus)
    per_event = 1.0 - (1.0 - confidence) / (2 * max(events, 1))  # two bounds per event
    n_d, n_dp = len(stat_d), len(stat_dp)
    best = EpsilonBound(0.0, "none", n_d + n_dp)
    for tau in taus:
        for name, a, n_a, b, n_b in (
            (f"stat ≥ {tau:g} (D over D′)", int((stat_d >= tau).sum()), n_d,
             int((stat_dp >= tau).sum()), n_dp),
            (f"stat ≤ {tau:g} (D′ over D)", int((stat_dp <= tau).sum()), n_dp,
             int((stat_d <= tau).sum()), n_d),
        ):  # fmt: skip
            lo, _ = clopper_pearson(a, n_a, per_event)
            _, hi = clopper_pearson(b, n_b, per_event)
            if lo > 0 and hi > 0:
                eps = math.log(lo / hi)
                if eps > best.epsilon_lb:
                    best = EpsilonBound(eps, name, n_d + n_dp)
    return best


def laplace_statistic(x: np.ndarray, c: np.ndarray, c_prime: np.ndarray) -> np.ndarray:
    """Λ(x) = Σ_i |x_i − c′_i| − |x_i − c_i| per row of `x` (released counts, one run per
    row): proportional to the log-likelihood ratio of D (exact counts c) over D′ (c′) under
    discrete Laplace noise, so thresholds of Λ are the optimal events."""
    x = np.asarray(x, float)
    return (np.abs(x - c_prime) - np.abs(x - c)).sum(axis=1)


def variance_interval(samples: np.ndarray, confidence: float = 0.999) -> tuple[float, float]:
    """Two-sided χ² interval for the variance of (nearly normal or not) noise samples.

    For heavy-ish tails (discrete Laplace has kurtosis 6 + …) the plain χ² interval is too
    narrow; the interval uses the sample kurtosis (the large-sample variance of s² is
    σ⁴(κ − 1)/n), which is what makes it honest for Laplace noise."""
    x = np.asarray(samples, float).ravel()
    n = len(x)
    s2 = float(x.var(ddof=1))
    kurt = float(stats.kurtosis(x, fisher=False)) if n > 3 else 3.0
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    half = z * s2 * math.sqrt(max(kurt - 1.0, 2.0) / n)
    return max(s2 - half, 0.0), s2 + half


def correlation_bound(samples: np.ndarray, confidence: float = 0.999) -> tuple[float, float]:
    """(largest |correlation| between the noise of two released counts, the bound it must stay
    under if the noise on different counts is independent), over runs (axis 0).

    Independent noise gives sample correlations ≈ N(0, 1/T); the bound is Bonferroni-corrected
    over the pairs. Noise reused across counts (one draw added to every level, say) leaves each
    count's variance right but correlates them, which neither the variance check nor a
    per-field scan sees.
    """
    x = np.asarray(samples, float)
    t, k = x.shape
    if k < 2:
        return 0.0, 1.0
    r = np.corrcoef(x, rowvar=False)
    worst = float(np.max(np.abs(r[np.triu_indices(k, 1)])))
    pairs = k * (k - 1) / 2
    z = float(stats.norm.ppf(1 - (1 - confidence) / (2 * pairs)))
    return worst, z / math.sqrt(t)


# --------------------------------------------------------------------------------------------
# Deterministic leak scan


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON-like value as path → leaf value (lists indexed, dicts by key)."""
    out: dict[str, Any] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out |= flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, list | tuple):
        out[f"{prefix}#len"] = len(obj)
        for i, v in enumerate(obj):
            out |= flatten(v, f"{prefix}[{i}]")
    else:
        out[prefix] = obj
    return out


def all_keys(obj: Any) -> set[str]:
    """Every key of every object nested in a JSON-like value (e.g. to assert that no field
    named `seed` appears anywhere in a private document)."""
    if isinstance(obj, Mapping):
        return set(obj) | {k for v in obj.values() for k in all_keys(v)}
    if isinstance(obj, list | tuple):
        return {k for v in obj for k in all_keys(v)}
    return set()


def parquet_fields(name: str, data: bytes) -> dict[str, Any]:
    """What a Parquet file shows anyone who holds it: its size, schema, row count and every
    column's values (hashed), as path → value."""
    import hashlib

    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    out: dict[str, Any] = {
        f"{name}#bytes": len(data),
        f"{name}#rows": table.num_rows,
        f"{name}#schema": str(table.schema),
    }
    for col in table.column_names:
        values = table.column(col).to_pylist()
        out[f"{name}.{col}"] = hashlib.sha256(repr(values).encode()).hexdigest()
    return out


def directory_fields(directory: str | Path) -> dict[str, Any]:
    """Every file of a report directory as the server receives it: JSON leaves of manifests,
    Parquet fields, the file list."""
    directory = Path(directory)
    out: dict[str, Any] = {"#files": sorted(p.name for p in directory.iterdir())}
    for p in sorted(directory.iterdir()):
        data = p.read_bytes()
        if p.suffix == ".json":
            out |= flatten(json.loads(data), p.name)
        elif p.suffix == ".parquet":
            out |= parquet_fields(p.name, data)
        else:
            out[p.name] = data
    return out


def deterministic_leaks(
    runs_d: list[dict[str, Any]],
    runs_dp: list[dict[str, Any]],
    ignore: Callable[[str], bool] = lambda p: False,
) -> list[str]:
    """Paths whose value is the same in every run on D, the same in every run on D′, and
    differs between D and D′ (or is present on one side only): deterministic functions of the
    data that tell neighbours apart. `ignore` names paths declared public (e.g. participation,
    for the server)."""
    if len(runs_d) < 2 or len(runs_dp) < 2:
        raise ValueError("the scan needs at least two runs on each side")
    keys = set().union(*runs_d, *runs_dp)
    leaks = []
    for path in sorted(keys):
        if ignore(path):
            continue
        vd = [_canon(r.get(path, _MISSING)) for r in runs_d]
        vp = [_canon(r.get(path, _MISSING)) for r in runs_dp]
        if len(set(vd)) == 1 and len(set(vp)) == 1 and vd[0] != vp[0]:
            leaks.append(f"{path}: {vd[0]!s:.60} vs {vp[0]!s:.60}")
    return leaks


_MISSING = "<absent>"


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=repr)


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
        return f"{self.model} · {self.relation} · {unit}{short}{auto}"

    @property
    def two_phase(self) -> bool:
        """`--height auto`: a probe of the class totals chooses the height first."""
        return self.height == "auto"

    def config(self):
        """The configuration; under `auto` the two-phase one before its probe has run (its
        height is a placeholder the probe replaces)."""
        from fedeval.config import PrivacyConfig, PrivacyModel, Shape
        from fedeval.params import resolve_config

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
            unit=self.unit,
            max_examples=self.max_examples,
            relation=self.relation,
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

        def table(zero):
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
    ("localdp", "replace"): 1507,
}
"""Examples per client (10 clients besides client 0, half of them positive) that put the
minority count m where the probe's height rule changes its mind at ε = 1: distdp,
0.45·√(0.95·m) = 2^4.5 at m ≈ 2,660 = 5 × 532 (replace halves the per-example ε: m ≈ 5,325);
localdp, m²/(n·σ²) = 2^10 (h between 2 and 3) at n ≈ 15,070. Neighbours whose m differs may
then get different heights, which the audit must see through."""


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


def _cells_labels_clients(table: dict[str, np.ndarray], height: int):
    from fedeval.hierarchy import cell_index

    client = table["client"]
    # Client ids are 0..n−1 already; client 0 may be absent (removed): re-index densely.
    ids, client = np.unique(client, return_inverse=True)
    return cell_index(table["score"], height), table["label"].astype(bool), client, len(ids)


def distdp_release_counts(
    scenario: Scenario, table: dict[str, np.ndarray], trials: int, rng: np.random.Generator
) -> np.ndarray:
    """`trials` released count vectors of one cohort holding every client of `table`, each made
    by the deployed path: per-client reports with shares sized to the cohort, pairwise masks
    keyed from the OS CSPRNG, the server's sum mod 2^32 and unmasking, the release document."""
    from fedeval import secagg
    from fedeval.aggregate import unmasked
    from fedeval.encode import masked_reports
    from fedeval.release import Release
    from fedeval.releasefile import release_dict

    cfg = scenario.config()
    cells, labels, client, n = _cells_labels_clients(table, cfg.height)
    k = secagg.neighbours_per_side(n)
    out = []
    for _ in range(trials):
        vectors = masked_reports(cells, labels, client, 0, n, n, k, secagg.round_key(), cfg, rng)
        counts = unmasked(vectors.sum(axis=0, dtype=np.uint32))
        doc = release_dict(Release.of_cohort(cfg, counts, None, n), (0.0, 1.0))
        out.append(doc["counts"])
    return np.asarray(out, np.int64)


def exact_counts(scenario: Scenario, table: dict[str, np.ndarray]) -> np.ndarray:
    """The exact node counts of `table` (what the noise hides)."""
    from fedeval.hierarchy import cell_index
    from fedeval.privacy.federated import exact_counts as exact

    cfg = scenario.config()
    cells = cell_index(table["score"], cfg.height)
    leaves = np.zeros((2, cfg.n_leaves), np.int64)
    np.add.at(leaves, (table["label"].astype(np.int64), cells), 1)
    return exact(leaves, cfg)


def localdp_statistic(
    scenario: Scenario, table: dict[str, np.ndarray], trials: int, rng: np.random.Generator
) -> np.ndarray:
    """Client 0's reports as the server receives them (the encoder's Parquet rows), reduced to
    the likelihood-ratio statistic of D over D′: per report, the bit of D's value minus the bit
    of D′'s value at the report's level, summed over the client's reports."""
    from fedeval.encode import local_reports

    cfg = scenario.config()
    d, dp = scenario.datasets()
    a = (int(d["label"][0]), float(d["score"][0]))  # D's value for client 0
    b = (int(dp["label"][0]), float(dp["score"][0]))  # D′'s
    cells, labels, client, n = _cells_labels_clients(table, cfg.height)
    h = cfg.height

    def bit_index(value, k):
        label, score = value
        cell = min(int(score * (1 << h)), (1 << h) - 1)
        return (label << k) + (cell >> (h - k))

    out = np.zeros(trials)
    for t in range(trials):
        rows = local_reports(cells, labels, client, 0, n, cfg, rng)
        mine = rows.filter(np.asarray(rows["client"]) == 0)
        stat = 0
        for level, bits in zip(mine["level"].to_pylist(), mine["bits"].to_pylist(), strict=True):
            k = cfg.levels[level]
            unpacked = np.unpackbits(np.frombuffer(bits, np.uint8), count=2 << k)
            stat += int(unpacked[bit_index(a, k)]) - int(unpacked[bit_index(b, k)])
        out[t] = stat
    return out


PROBE_RESOLUTION = 10
"""Cells per class (2^10) the two-phase audit reads scores at: the probe may choose any height
up to it (AUTO_MAX_HEIGHT under localdp; the distdp boundary scenario stays far below 14)."""


def _two_phase_exact(table: dict[str, np.ndarray], cfg) -> tuple[np.ndarray, np.ndarray]:
    """(class totals [negatives, positives], exact node counts of the tree at cfg's height)."""
    from fedeval.hierarchy import cell_index
    from fedeval.privacy.federated import exact_counts as exact

    labels = table["label"].astype(np.int64)
    leaves = np.zeros((2, cfg.n_leaves), np.int64)
    np.add.at(leaves, (labels, cell_index(table["score"], cfg.height)), 1)
    return np.bincount(labels, minlength=2)[:2], exact(leaves, cfg)


def distdp_two_phase_statistic(
    scenario: Scenario, trials: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The log-likelihood ratio of D over D′ of `trials` two-phase releases of each, made by the
    deployed path: round 1, every client's probe share (`fedeval.privacy.probe`), the height
    chosen from the sum; round 2, the masked per-client reports at that height, unmasked, and
    the release document. The height is a function of the probe's released counts, so the
    ratio is the probe's plus the tree's at that height:
    ln(1/α_p)·Λ(probe) + ln(1/α_t(h))·Λ(tree at h). Returns (its parts on D (trials, 2): the
    probe's Λ and the tree's weighted Λ; the same on D′; the heights)."""
    from dataclasses import replace

    from fedeval import secagg
    from fedeval.aggregate import unmasked
    from fedeval.encode import masked_reports
    from fedeval.privacy import probe
    from fedeval.privacy.mechanism import Mechanism
    from fedeval.release import Release
    from fedeval.releasefile import release_dict

    base = scenario.config()
    d, dp = scenario.datasets()
    out: list[list[tuple[float, float]]] = [[], []]
    heights = []
    exact_at: dict[int, tuple] = {}  # h → both datasets' exact totals and tree: the same each trial
    for side, table in enumerate((d, dp)):
        fine, labels, client, n = _cells_labels_clients(table, PROBE_RESOLUTION)
        k = secagg.neighbours_per_side(n)
        for _ in range(trials):
            found = probe.client_sum_distdp(labels, n, base, rng)
            h = probe.height(found, base, 0, 0, PROBE_RESOLUTION)
            cfg = replace(base, height=h)
            cells = fine >> (PROBE_RESOLUTION - h)
            vectors = masked_reports(
                cells, labels, client, 0, n, n, k, secagg.round_key(), cfg, rng
            )
            counts = unmasked(vectors.sum(axis=0, dtype=np.uint32))
            doc = release_dict(Release.of_cohort(cfg, counts, None, n, found), (0.0, 1.0))
            x_probe = np.asarray(doc["privacy"]["probe"]["released"]["counts"])[None]
            x_tree = np.asarray(doc["counts"])[None]
            if h not in exact_at:
                exact_at[h] = (*_two_phase_exact(d, cfg), *_two_phase_exact(dp, cfg))
            t_d, c_d, t_p, c_p = exact_at[h]
            alpha = Mechanism(cfg).alpha
            assert alpha is not None
            tree = -math.log(alpha) * laplace_statistic(x_tree, c_d, c_p)[0]
            out[side].append((float(laplace_statistic(x_probe, t_d, t_p)[0]), float(tree)))
            heights.append(h)
    return np.asarray(out[0]), np.asarray(out[1]), np.asarray(heights)


def localdp_two_phase_statistic(
    scenario: Scenario, table: dict[str, np.ndarray], trials: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Client 0's reports of `trials` two-phase runs on `table`, as the server receives them,
    reduced to the statistic of `localdp_statistic`: round 1, every report slot's role and the
    probe reports' two bits (`fedeval.privacy.probe`; a probe report of client 0 adds its bit
    of D's label minus that of D′'s); the height from their sums; round 2, the encoder's tree
    reports at that height for the other slots (`fedeval.encode.local_reports`). Returns
    (the statistic's two parts (trials, 2): client 0's probe reports', its tree reports'; the
    heights)."""
    from dataclasses import replace

    from fedeval.encode import local_reports
    from fedeval.privacy import localdp, probe
    from fedeval.release import Probe

    base = scenario.config()
    d, dp = scenario.datasets()
    a = (int(d["label"][0]), float(d["score"][0]))
    b = (int(dp["label"][0]), float(dp["score"][0]))
    fine, labels, client, n = _cells_labels_clients(table, PROBE_RESOLUTION)
    total = len(labels) + localdp.empty_reports(len(labels), n, base)
    zeros = np.zeros(len(labels), np.int64)
    out, heights = np.zeros((trials, 2)), np.zeros(trials, np.int64)
    for t in range(trials):
        _, p_labels, p_client, real = localdp.padded(zeros, labels, client, n, base)
        role = probe.roles(len(p_labels), base, rng)
        bits = probe.client_bits_localdp(p_labels[role], real[role], base, rng)
        mine = bits[p_client[role] == 0]
        in_probe = int(mine[:, a[0]].sum()) - int(mine[:, b[0]].sum())
        stat = 0
        found = Probe(bits.sum(axis=0), int(role.sum()))
        h = probe.height(found, base, total, 0, PROBE_RESOLUTION)
        cfg = replace(base, height=h)
        used = role[: len(labels)]
        taken = np.bincount(p_client[role], minlength=n)
        keep = ~used
        rows = local_reports(
            fine[keep] >> (PROBE_RESOLUTION - h), labels[keep], client[keep], 0, n, cfg, rng, taken
        )
        mine_rows = rows.filter(np.asarray(rows["client"]) == 0)
        for level, packed in zip(
            mine_rows["level"].to_pylist(), mine_rows["bits"].to_pylist(), strict=True
        ):
            k = cfg.levels[level]
            unpacked = np.unpackbits(np.frombuffer(packed, np.uint8), count=2 << k)
            stat += int(unpacked[_bit_index(a, k, h)]) - int(unpacked[_bit_index(b, k, h)])
        out[t], heights[t] = (in_probe, stat), h
    return out, heights


def _bit_index(value: tuple[int, float], k: int, h: int) -> int:
    """The OUE bit a (label, score) sets at level k of a height-h tree."""
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
    the plain sum, every report has the same ε), Bonferroni-corrected over the statistics."""
    from fedeval.privacy.mechanism import Mechanism

    d, dp = scenario.datasets()
    if scenario.model == "distdp":
        on_d, on_dp, _ = distdp_two_phase_statistic(scenario, trials, rng)
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
    candidates = [(on_d[:, 0], on_dp[:, 0]), (on_d[:, 1], on_dp[:, 1]), *sums]
    each = 1.0 - (1.0 - confidence) / len(candidates)
    best = EpsilonBound(0.0, "none", 2 * trials)
    for i, (a, b) in enumerate(candidates):
        found = epsilon_lower_bound(a, b, confidence=each, thresholds=_quantile_taus(a, b))
        if found.epsilon_lb > best.epsilon_lb:
            name = ("probe part", "tree part")[i] if i < 2 else f"sum {i - 1}"
            best = EpsilonBound(found.epsilon_lb, f"{name}: {found.event}", found.trials)
    return best


def _quantile_taus(sd: np.ndarray, sp: np.ndarray, count: int = 64) -> list[float]:
    """Thresholds for a continuous statistic (a weighted sum: nearly every value distinct):
    `count` quantiles of the pooled values, so the Bonferroni correction stays small."""
    pooled = np.concatenate([sd, sp])
    distinct = np.unique(pooled)
    if len(distinct) <= count:
        return distinct.tolist()
    return sorted(set(np.quantile(pooled, np.linspace(0.005, 0.995, count)).tolist()))


def cohort_noise(
    scenario: Scenario, trials: int, rng: np.random.Generator, cohorts: int = 2
) -> list[np.ndarray]:
    """Noise of each cohort's unmasked sum (sum − exact), D split into `cohorts` cohorts, over
    `trials` runs: one array (trials × counts) per cohort."""
    from fedeval import secagg
    from fedeval.aggregate import unmasked
    from fedeval.encode import masked_reports

    cfg = scenario.config()
    d, _ = scenario.datasets()
    cells, labels, client, n = _cells_labels_clients(d, cfg.height)
    bounds = np.linspace(0, n, cohorts + 1).round().astype(int)
    out = []
    for lo, hi in itertools.pairwise(bounds):
        sel = (client >= lo) & (client < hi)
        m = hi - lo
        part = {key: col[sel] for key, col in d.items()}
        exact = exact_counts(scenario, part)
        k = secagg.neighbours_per_side(m)
        noise = []
        for _ in range(trials):
            v = masked_reports(
                cells[sel], labels[sel], client[sel] - lo, 0, m, m, k, secagg.round_key(), cfg, rng
            )
            noise.append(unmasked(v.sum(axis=0, dtype=np.uint32)) - exact)
        out.append(np.asarray(noise))
    return out


# --------------------------------------------------------------------------------------------
# Documents other than JSON: text (stderr, tables, CSV), figures, Parquet layout

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_CLOCK = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{2}:\d{2}:\d{2}"
)
"""Wall-clock times (ISO dates and times of day): when a run happened, not what it read."""


def without_clock(text: str) -> str:
    """`text` with every wall-clock time written TIME (runs on D and on D′ happen at different
    times: a timestamp to the second or minute can look like a field that separates them)."""
    return _CLOCK.sub("TIME", text)


def text_fields(name: str, text: str, replace: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A text a party reads (stderr, a table, a CSV) as path → value, keyed by content rather
    than position: each line's template (its numbers masked as #, wall-clock times as TIME,
    `replace`'s keys, e.g. a run's own directory, by their values) is a path whose value is the
    line's numbers one by one, so a noisy line that shifts every later line does not make them
    all look different, and an exact count inside an otherwise noisy line still stands alone.
    The number of lines and of each template are fields too (a line present on one side only
    separates)."""
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    lines = without_clock(text).splitlines()
    out: dict[str, Any] = {f"{name}#lines": len(lines)}
    seen: dict[str, int] = {}
    for line in lines:
        template = " ".join(_NUMBER.sub("#", line).split())  # column widths follow the numbers
        k = seen.get(template, 0)
        seen[template] = k + 1
        key = f"{name}:{template}" + (f"[{k}]" if k else "")
        out[key] = "line"
        for j, number in enumerate(_NUMBER.findall(line)):
            out[f"{key}@{j}"] = number
    for template, count in seen.items():
        out[f"{name}:{template}#count"] = count
    return out


def svg_fields(name: str, data: bytes) -> dict[str, Any]:
    """An SVG figure as path → value: its metadata and every text it draws (titles, labels,
    legends, annotations; fedeval writes text as text), each as `text_fields` reads a line,
    and the number of drawn elements of each kind."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(data)
    texts: list[str] = []
    kinds: dict[str, int] = {}
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        kinds[tag] = kinds.get(tag, 0) + 1
        if tag in ("text", "tspan", "title", "desc", "date", "description"):
            texts.append(" ".join("".join(el.itertext()).split()))
    out = text_fields(f"{name}.text", "\n".join(t for t in texts if t))
    out |= {f"{name}#{tag}": count for tag, count in sorted(kinds.items())}
    return out


def png_fields(name: str, data: bytes) -> dict[str, Any]:
    """A PNG figure as path → value: its size in pixels and every chunk other than the image
    data (text chunks such as Software or a title, the resolution), which is where a figure
    could state a number without drawing it."""
    import struct
    import zlib

    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return {f"{name}#png": False}
    out: dict[str, Any] = {}
    pos, seen = 8, dict[str, int]()
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        tag = kind.decode("latin-1")
        if tag == "IDAT":
            continue
        k = seen.get(tag, 0)
        seen[tag] = k + 1
        if tag == "zTXt":  # keyword, 0, method, compressed Latin-1 text
            key, _, rest = body.partition(b"\0")
            body = key + b"\0" + zlib.decompress(rest[1:])
        elif tag == "iTXt":  # keyword, 0, flag, method, language, 0, keyword, 0, UTF-8 text
            key, _, rest = body.partition(b"\0")
            head, text = rest[:2], rest[2:].split(b"\0", 2)[-1]
            text = zlib.decompress(text) if head[0] else text
            out[f"{name}.{tag}[{k}]"] = (
                key.decode("latin-1") + "=" + text.decode("utf-8", "replace")
            )
            continue
        out[f"{name}.{tag}[{k}]"] = body.decode("latin-1")
    return out


def parquet_layout_fields(name: str, data: bytes) -> dict[str, Any]:
    """What a Parquet file's bytes show beyond its decoded columns: row groups and their rows
    and sizes, each column chunk's size, encodings and statistics, and the key-value metadata
    of the file and schema. A size or layout that depends on the data tells it to whoever holds
    the file, even when every value is noise."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    out: dict[str, Any] = {
        f"{name}#row_groups": meta.num_row_groups,
        f"{name}#created_by": meta.created_by,
        f"{name}#metadata": repr(meta.metadata),
    }
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        out[f"{name}.rg[{g}]#rows"] = rg.num_rows
        out[f"{name}.rg[{g}]#bytes"] = rg.total_byte_size
        for c in range(rg.num_columns):
            col = rg.column(c)
            where = f"{name}.rg[{g}].{col.path_in_schema}"
            out[f"{where}#bytes"] = col.total_compressed_size
            out[f"{where}#encodings"] = repr(col.encodings)
            out[f"{where}#statistics"] = repr(col.statistics.to_dict()) if col.statistics else None
    return out
