"""Candidate against baseline on the same population: candidate − baseline for every metric, with
a 95% interval on the difference, under one privacy budget for the pair.

>>> import numpy as np, fedeval
>>> rng = np.random.default_rng(0)
>>> y = rng.random(20_000) < 0.3
>>> base = np.clip(0.3 * y + 0.7 * rng.random(20_000), 0, 1)
>>> cand = np.clip(0.25 * y + 0.75 * rng.random(20_000), 0, 1)
>>> c = fedeval.compare(y, base, cand, model="distdp", epsilon=1.0, seed=1)
>>> c["auc"].difference.estimate < 0
True

The release shape: two releases, one per model
-----------------------------------------------
Each example holds a label and two scores. Two shapes can carry them under one ε:

* **two 1-D releases** — the release `evaluate` makes, once over the baseline's scores and once
  over the candidate's, with independent noise and ε split between them (`split` of it to the
  baseline, the rest to the candidate). One example is in both, so the pair is ε_b + ε_c = ε by
  sequential composition (Dwork & Roth 2014, Theorem 3.16), charged to a ledger as one entry
  whose DP event composes the two releases' events;
* **a joint release** — per class, a 2-D histogram of (baseline cell, candidate cell) at the
  full ε (one example touches one cell: Δ = 1 under add-remove, 2 under replace). It releases
  the pairing: the discordant cells of a threshold (McNemar's 2×2 table) and the paired
  (DeLong) covariance.

We measured both on paired scores of correlated models (`tests/paired.py`: 100,000 examples,
2% positives, the candidate's logit shares 80% of the baseline's noise and is worse by 0.25;
30 releases of fresh data each; the joint at each resolution L×L, L ∈ {2, 8, 16, 32, 64}, the
best chosen with hindsight; `benchmarks/compare.py --shapes` prints it). RMSE of
candidate − baseline:

=================  ======================  ======================
model              AUC difference          recall@0.5 difference
=================  ======================  ======================
federated          1-D 0.00000             1-D 0 · joint 0
                   joint 0.00029 (L=64)
distdp ε = 1       1-D 0.0046              1-D 0.0043
                   joint 0.0046 (L=16)     joint 0.00076 (L=2)
localdp ε = 5      1-D 0.077               1-D 0.138
                   joint 0.021 (L=2)       joint 0.040 (L=2)
=================  ======================  ======================

For AUC (and AP, and the curves, which need every cell) the two shapes tie under distdp: a
marginal of the joint sums L cells of noise, so the joint only matches the 1-D pair at the one
resolution that balances that noise against its coarse cells, and without noise the 1-D leaves
are finer. At a declared threshold the joint is 6× more accurate under distdp: the difference of
the two models' true positives is the difference of the two discordant cells (McNemar's), each
noised once at the full ε, where the 1-D pair noises both prefix sums at ε/2. Under localdp the
split of ε costs most (OUE's variance grows like e^ε/(e^ε − 1)²: 14× per count from ε = 5 to
2.5), and a coarse joint was better for both, though both miss any useful margin by an order of
magnitude at this n.

`compare` makes the two 1-D releases: the release `evaluate` makes and the audit checks, the
same estimators and intervals for every metric, and `compare --from base --from cand` (two
releases saved separately) in the same terms. The joint's gain at a threshold does not survive
sharing the budget: AUC, AP and the curves need the 1-D pair (or a fine joint that ties it), so
a joint threshold table would be a third release on a share s of ε, and its noise's spread grows
as 1/s: at s = 0.2 its recall error is ≈ 0.00076/0.2 = 0.0038 against the pair's 0.0043 (now on
0.4·ε each: its AUC error 1.25× larger), and with the ten default thresholds each discordant
region sums up to 30 cells of noise, not one. It would pay only for a comparison of one or two
thresholds and nothing else (not offered yet).

What the pair of 1-D releases cannot give is the pairing: which examples both models get right.
The population interval does not need it (each release's noise is independent of the other's,
and the population is the same), but the generalisation interval (`interval="generalisation"`,
for the difference on new data from the same distribution) does: DeLong's variance of a
difference subtracts 2·cov(AUC_b, AUC_c), which the releases do not hold. It is taken at its
worst case (correlation −1), so that interval is conservative: for correlated models, far wider
than a paired one would be.

Intervals
---------
Each release's estimates come with their own 95% interval (noise and discretisation,
`fedeval.evaluate`). The difference's interval combines them by MOVER (Zou & Donner,
"Construction of confidence limits about effect measures", Stat. Med. 2008; Newcombe 1998 for
proportions): with (l_b, u_b) and (l_c, u_c) around θ_b and θ_c,

    L = θ_c − θ_b − √((θ_c − l_c)² + (u_b − θ_b)²),  U = θ_c − θ_b + √((u_c − θ_c)² + (θ_b − l_b)²),

exact for independent Gaussian errors (each side's half-width is z·σ; independent noise), and
asymmetric where an interval is (a bias range, a clipped end). Without noise (federated) the
half-widths add instead (`mover`). The discretisation parts are not independent noise; coverage
was measured instead (`benchmarks/compare.py`, 1000 releases per setting, 2% positives): under
distdp ε = 1 (20,000 rows) 94.3–97.2% for AUC, AP and P/R/A at a declared threshold; under
localdp ε = 8 (200,000 rows) 95.0–95.8% for P/R/A, and 98.9% (AUC) and 98.0% (AP), where each
release's own interval is already conservative (the baseline's AUC interval held 98.0%);
federated (no noise, over fresh data) P/R/A exact, AUC and AP ≥ 95%.

Gates
-----
`fail_if_worse` margins m: a gate holds when the lower end of the 95% interval of
candidate − baseline is at least −m (or the estimate, `gate_on="estimate"`); it is judged by
`fedeval.api.gates.judge` as a floor at −m.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from fedeval.api.evaluate import Evaluation, evaluate, evaluate_file, evaluate_run
from fedeval.api.gates import Gate, GateOn, Kind, Verdict, judge
from fedeval.core.config import DEFAULT_EPSILON, PrivacyModel, Shape, Unit, check_epsilon
from fedeval.core.errors import UsageError
from fedeval.core.results import Estimate
from fedeval.documents.files import document_text
from fedeval.documents.release_file import load_release
from fedeval.estimate.uncertainty import DEFAULT_DRAWS, ROUNDING, Z95
from fedeval.privacy.registry import model_of
from fedeval.protocol.simulate import Simulated
from fedeval.tables.read import DEFAULT_COLUMNS, Columns
from fedeval.views.compare import METRICS, compare_dict

DEFAULT_SPLIT = 0.5
"""The baseline's share of ε: equal shares minimise the variance of a difference of two
equally noisy estimates (Var ∝ 1/ε_b² + 1/ε_c², least at ε_b = ε_c)."""


class IntervalKind(StrEnum):
    """What the difference's interval covers. ``population``: the difference on this population
    (noise and discretisation of both releases). ``generalisation``: also the sampling of the
    population from its distribution (DeLong-style, conservative without the pairing)."""

    POPULATION = "population"
    GENERALISATION = "generalisation"


@dataclass(frozen=True)
class Difference:
    """One metric of both models and candidate − baseline.

    `difference.ci95` covers the population difference; `generalisation_ci95` (with
    interval="generalisation") also the sampling of the population; None where not available
    (AP: no sampling variance from the counts is implemented)."""

    metric: str
    baseline: Estimate
    candidate: Estimate
    difference: Estimate
    generalisation_ci95: tuple[float, float] | None = None

    @property
    def gate_interval(self) -> tuple[float, float] | None:
        """The interval gates read: the widest one computed."""
        return self.generalisation_ci95 or self.difference.ci95


def mover(baseline: Estimate, candidate: Estimate, *, noisy: bool = True) -> Estimate:
    """candidate − baseline with the MOVER interval of two independent estimates (module
    docstring), widened by ROUNDING and clipped to [−1, 1]; exact where both are known; notes of
    either side kept.

    `noisy=False` (neither release has noise: federated) adds the half-widths instead: the
    intervals then bound deterministic errors (discretisation, the order inside a leaf), which
    need not be independent nor centred (measured: AP of correlated models, each interval
    holding its own AP 98% of the time, held the difference 86.8% in quadrature). The sum holds
    the difference whenever both hold their own values (at least 1 − α_b − α_c)."""
    est = candidate.estimate - baseline.estimate
    exact = (
        None
        if baseline.exact is None or candidate.exact is None
        else candidate.exact - baseline.exact
    )
    ci = None
    if baseline.ci95 is not None and candidate.ci95 is not None:
        (lb, ub), (lc, uc) = baseline.ci95, candidate.ci95
        combine = math.hypot if noisy else (lambda a, b: a + b)
        below = combine(max(candidate.estimate - lc, 0.0), max(ub - baseline.estimate, 0.0))
        above = combine(max(uc - candidate.estimate, 0.0), max(baseline.estimate - lb, 0.0))
        # ROUNDING: an exact difference computed another way (a point interval without noise,
        # e.g. AP from leaves of one example each) must not fall out by its last bits.
        ci = (max(est - below - ROUNDING, -1.0), min(est + above + ROUNDING, 1.0))
    notes = [f"{side}: {e.note}" for side, e in (("baseline", baseline), ("candidate", candidate))]
    note = "; ".join(n for n, e in zip(notes, (baseline, candidate), strict=True) if e.note)
    return Estimate(est, exact, ci, note or None)


def auc_sampling_sd(leaves: np.ndarray) -> float:
    """Sampling standard deviation of the AUC from per-class cell counts (2, L), DeLong's
    variance (DeLong, DeLong & Clarke-Pearson, Biometrics 1988) with the placements read off the
    cells: a positive in cell i is placed above the negatives of the cells below it and half of
    its own cell's (Mann-Whitney ties count ½); likewise a negative. Var = S₁₀/P + S₀₁/N.
    Noisy counts below zero count as 0 (a variance needs a distribution)."""
    neg, pos = np.clip(leaves[0], 0.0, None), np.clip(leaves[1], 0.0, None)
    n_total, p_total = float(neg.sum()), float(pos.sum())
    if n_total < 2 or p_total < 2:
        return math.nan
    below_neg = np.cumsum(neg) - neg
    above_pos = p_total - np.cumsum(pos)
    v10 = (below_neg + neg / 2) / n_total
    v01 = (above_pos + pos / 2) / p_total
    auc = float((pos * v10).sum() / p_total)
    s10 = float((pos * (v10 - auc) ** 2).sum() / (p_total - 1))
    s01 = float((neg * (v01 - auc) ** 2).sum() / (n_total - 1))
    return math.sqrt(s10 / p_total + s01 / n_total)


def _proportion_sd(value: float, size: float) -> float:
    """Binomial sampling spread of a proportion over `size` examples (nan where undefined)."""
    if not (size >= 1 and math.isfinite(value)):
        return math.nan
    v = min(max(value, 0.0), 1.0)
    return math.sqrt(v * (1 - v) / size)


def _generalised(diff: Estimate, sd_baseline: float, sd_candidate: float):
    """The population interval widened by the sampling of the population: its half-widths and
    z·(sd_b + sd_c) in quadrature (independent of the noise). sd_b + sd_c is the spread of the
    difference at correlation −1, the worst case: the releases do not hold the pairing."""
    if diff.ci95 is None or not (math.isfinite(sd_baseline) and math.isfinite(sd_candidate)):
        return None
    lo, hi = diff.ci95
    z_sd = Z95 * (sd_baseline + sd_candidate)
    est = diff.estimate
    return (
        max(est - math.hypot(est - lo, z_sd), -1.0),
        min(est + math.hypot(hi - est, z_sd), 1.0),
    )


def _sampling_sds(ev: Evaluation) -> dict[str, float]:
    """Each metric's sampling spread on its release (`auc`, `precision@t`, …)."""
    hist = ev.histogram
    p, n = max(hist.positives, 0.0), max(hist.negatives, 0.0)
    out = {"auc": auc_sampling_sd(hist.leaves)}
    for t in ev.thresholds:
        r, pr = t.recall.estimate, t.precision.estimate
        predicted = r * p / pr if pr > 0 else 0.0
        out[f"recall@{t.threshold!r}"] = _proportion_sd(r, p)
        out[f"precision@{t.threshold!r}"] = _proportion_sd(pr, predicted)
        out[f"accuracy@{t.threshold!r}"] = _proportion_sd(t.accuracy.estimate, p + n)
    return out


def differences(
    baseline: Evaluation, candidate: Evaluation, interval: IntervalKind | str
) -> tuple[Difference, ...]:
    """candidate − baseline for AUC, AP and P/R/A at every threshold both evaluations hold."""
    kind = IntervalKind(interval)
    pairs: list[tuple[str, Estimate, Estimate]] = [
        ("auc", baseline.auc, candidate.auc),
        ("ap", baseline.curves.average_precision, candidate.curves.average_precision),
    ]
    for tb, tc in zip(baseline.thresholds, candidate.thresholds, strict=True):
        if tb.threshold != tc.threshold:
            raise UsageError("the two evaluations hold different thresholds.")
        for m in ("precision", "recall", "accuracy"):
            pairs.append((f"{m}@{tb.threshold!r}", getattr(tb, m), getattr(tc, m)))
    sds_b = sds_c = None
    if kind is IntervalKind.GENERALISATION:
        sds_b, sds_c = _sampling_sds(baseline), _sampling_sds(candidate)
    noisy = all(model_of(e.config.model).ADDS_NOISE for e in (baseline, candidate))
    out = []
    for name, b, c in pairs:
        d = mover(b, c, noisy=noisy)
        gen = None
        if sds_b is not None and sds_c is not None and name in sds_b:
            gen = _generalised(d, sds_b[name], sds_c[name])
        out.append(Difference(name, b, c, d, gen))
    return tuple(out)


@dataclass(frozen=True)
class Comparison:
    """Candidate against baseline: both evaluations and candidate − baseline for each metric.

    `paired`: both releases were made in one run from the same table (the same examples, one
    budget split between them); False for two saved releases (`compare_releases`), whose
    population the caller vouches for. `split` is the baseline's share of ε (None from saved
    releases). `seed` is stated only for a seeded simulation."""

    baseline: Evaluation = field(repr=False)
    candidate: Evaluation = field(repr=False)
    differences: tuple[Difference, ...]
    interval: IntervalKind
    paired: bool
    split: float | None
    seed: int | None = None

    def __getitem__(self, metric: str) -> Difference:
        """The difference of one metric: 'auc', 'ap', 'recall@0.5', …"""
        for d in self.differences:
            if d.metric == metric:
                return d
        base, _, t = metric.partition("@")
        if t:
            try:
                want = float(t)
            except ValueError:
                want = math.nan
            for d in self.differences:
                b, _, dt = d.metric.partition("@")
                if b == base and dt and float(dt) == want:
                    return d
        raise KeyError(metric)

    @property
    def simulation(self) -> bool:
        return self.baseline.run.simulation

    def to_dict(self, *, source: str | None = None) -> dict[str, Any]:
        """The `fedeval.compare/1` document ``fedeval compare --format json`` writes."""
        return compare_dict(self, source=source)

    def to_json(self, *, source: str | None = None) -> str:
        """`to_dict` as the sealed JSON text the command line writes."""
        return document_text(self.to_dict(source=source))


def check_split(split: float) -> float:
    """The baseline's share of ε: strictly between 0 and 1."""
    if isinstance(split, bool) or not isinstance(split, int | float) or not 0 < split < 1:
        raise UsageError(
            f"`split` (the baseline's share of ε) must lie strictly between 0 and 1. "
            f"Found {split!r}."
        )
    return float(split)


def _shares(
    model: PrivacyModel | str, epsilon: float | None, split: float
) -> tuple[float | None, float | None]:
    """ε of the baseline's and the candidate's release (None under federated, or to let each
    take its model's default and halve it)."""
    model = PrivacyModel(model)
    if not model_of(model).ADDS_NOISE:
        check_epsilon(model, epsilon)
        return None, None
    total = DEFAULT_EPSILON[model] if epsilon is None else epsilon
    check_epsilon(model, total)
    return total * split, total * (1 - split)


def _seeds(seed: int | None) -> tuple[int | None, int | None]:
    """Two independent integer seeds from one (each release is then marked seeded, a
    simulation), or none: each release draws its noise from the OS CSPRNG."""
    if seed is None:
        return None, None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise UsageError(f"`seed` must be a non-negative integer. Found {seed!r}.")
    a, b = np.random.SeedSequence(int(seed)).generate_state(2)
    return int(a), int(b)


def compare(
    y_true,
    baseline_score,
    candidate_score,
    *,
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    epsilon: float | None = None,
    split: float = DEFAULT_SPLIT,
    height: int | str = "auto",
    shape: Shape | str = "auto",
    thresholds: Sequence[float] | None = None,
    client_ids=None,
    pos_label: object = None,
    score_range: tuple[float, float] = (0.0, 1.0),
    seed: int | None = None,
    exact: bool = True,
    ci_draws: int = DEFAULT_DRAWS,
    interval: IntervalKind | str = IntervalKind.POPULATION,
    unit: Unit | str = Unit.EXAMPLE,
    max_examples: int | None = None,
    relation: str | None = None,
) -> Comparison:
    """Compare a candidate's scores with a baseline's on the same labelled examples.

    Two releases (one per model, independent noise) split ε: `split` of it to the baseline's,
    the rest to the candidate's; together they are ε-DP under the stated relation (sequential
    composition). Every other parameter is `fedeval.evaluate`'s, applied to both.

    Parameters
    ----------
    y_true : labels, shape (n,).
    baseline_score, candidate_score : the two models' scores on the same examples, shape (n,).
    epsilon : ε of the pair (default 1 under distdp, 5 under localdp), split between them.
    interval : 'population' (the difference on these examples) or 'generalisation' (also the
        sampling of the examples; conservative: the pairing is not released).
    """
    split = check_split(split)
    kind = IntervalKind(interval)
    eps_b, eps_c = _shares(model, epsilon, split)
    seed_b, seed_c = _seeds(seed)
    base_score = np.asarray(baseline_score)
    cand_score = np.asarray(candidate_score)
    if base_score.shape != cand_score.shape:
        raise UsageError(
            f"the baseline's and the candidate's scores must score the same examples. Found "
            f"shapes {base_score.shape} and {cand_score.shape}."
        )
    common: dict[str, Any] = dict(
        model=model,
        height=height,
        shape=shape,
        thresholds=thresholds,
        client_ids=client_ids,
        pos_label=pos_label,
        score_range=score_range,
        exact=exact,
        ci_draws=ci_draws,
        unit=unit,
        max_examples=max_examples,
        relation=relation,
    )
    b = evaluate(y_true, base_score, epsilon=eps_b, seed=seed_b, **common)
    c = evaluate(y_true, cand_score, epsilon=eps_c, seed=seed_c, **common)
    return Comparison(b, c, differences(b, c, kind), kind, True, split, seed)


def compare_file(
    source: str | os.PathLike,
    *,
    baseline_col: str,
    candidate_col: str,
    label_col: str = DEFAULT_COLUMNS.label,
    client_col: str | None = None,
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    epsilon: float | None = None,
    split: float = DEFAULT_SPLIT,
    seed: int | None = None,
    interval: IntervalKind | str = IntervalKind.POPULATION,
    **options: Any,
) -> Comparison:
    """`compare` on a Parquet/CSV file (or '-' for CSV on stdin) holding both score columns:
    the table is read once per release. Other options are `fedeval.evaluate_file`'s."""
    if baseline_col == candidate_col:
        raise UsageError(
            f"--baseline-col and --candidate-col name the same column {baseline_col!r}: "
            "compare two different models' scores."
        )
    if str(source) == "-":
        raise UsageError(
            "compare reads its table twice (once per model): give a file, not '-' (stdin)."
        )
    split = check_split(split)
    kind = IntervalKind(interval)
    eps_b, eps_c = _shares(model, epsilon, split)
    seed_b, seed_c = _seeds(seed)
    b = evaluate_file(
        source,
        columns=Columns(baseline_col, label_col, client_col),
        model=model,
        epsilon=eps_b,
        seed=seed_b,
        **options,
    )
    c = evaluate_file(
        source,
        columns=Columns(candidate_col, label_col, client_col),
        model=model,
        epsilon=eps_c,
        seed=seed_c,
        **options,
    )
    if b.run.truth is not None and c.run.truth is not None and b.rows != c.rows:
        raise UsageError("the two score columns hold different numbers of rows.")
    return Comparison(b, c, differences(b, c, kind), kind, True, split, seed)


def compare_runs(
    baseline: Any,
    candidate: Any,
    *,
    thresholds: Sequence[float] | None = None,
    interval: IntervalKind | str = IntervalKind.POPULATION,
    **options: Any,
) -> Comparison:
    """Compare two releases made separately (decoded runs, e.g. `Simulated.from_release` of two
    saved releases of the same population). Their noise is independent, so the difference's
    interval adds both; the pairing was never released, so it is not available."""
    kind = IntervalKind(interval)
    if baseline.score_range != candidate.score_range:
        raise UsageError(
            f"the two releases cover different score ranges ({baseline.score_range} and "
            f"{candidate.score_range}): their thresholds do not mean the same."
        )
    b = evaluate_run(baseline, thresholds=thresholds, **options)
    c = evaluate_run(candidate, thresholds=thresholds, **options)
    return Comparison(b, c, differences(b, c, kind), kind, False, None, None)


def compare_releases(
    baseline: str | os.PathLike,
    candidate: str | os.PathLike,
    *,
    thresholds: Sequence[float] | None = None,
    interval: IntervalKind | str = IntervalKind.POPULATION,
    ci_draws: int = DEFAULT_DRAWS,
    seed: int | None = None,
    verify_key: Any = None,
    **options: Any,
) -> Comparison:
    """`compare_runs` on two saved release files (``--save-release``): post-processing of
    both, nothing new is released. `seed` makes the intervals' draws reproducible."""
    seed_b, seed_c = _seeds(seed)
    runs = []
    for path, s in ((baseline, seed_b), (candidate, seed_c)):
        release, score_range = load_release(path, verify_key=verify_key)
        runs.append(Simulated.from_release(release, score_range, seed=s, ci_draws=ci_draws))
    return compare_runs(runs[0], runs[1], thresholds=thresholds, interval=interval, **options)


# --- non-inferiority gates ---------------------------------------------------------------


def parse_margins(specs: list[str] | None) -> list[Gate]:
    """'auc=0.005,recall@0.5=0.01' (repeatable) → floors at −margin on candidate − baseline."""
    gates = []
    for spec in specs or []:
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            try:
                margin = float(value)
            except ValueError:
                margin = math.nan
            if not sep or not name.strip() or not math.isfinite(margin) or margin < 0:
                raise UsageError(
                    "`fail_if_worse` takes METRIC=MARGIN with a margin ≥ 0, e.g. auc=0.005 or "
                    f"recall@0.5=0.01. Found {part!r}."
                )
            gates.append(Gate(name.strip().lower(), -margin, Kind.FLOOR))
    return gates


@dataclass(frozen=True)
class Judgement:
    """One non-inferiority gate's verdict, in words."""

    verdict: Verdict
    on: GateOn

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    def sentence(self) -> str:
        g, v = self.verdict.gate, self.verdict
        margin = -g.limit
        if self.on is GateOn.BOUND:
            if v.passed:
                return (
                    f"{g.metric}: candidate not worse than baseline by more than {margin:g} "
                    f"(95%): the lower 95% bound of candidate − baseline is {v.value:+.4g}"
                )
            return (
                f"{g.metric}: cannot rule out that the candidate is worse than the baseline by "
                f"more than {margin:g} (95%): the lower 95% bound of candidate − baseline is "
                f"{v.value:+.4g}, below −{margin:g}"
            )
        state = "not worse" if v.passed else "worse"
        return (
            f"{g.metric}: candidate {state} than baseline by more than {margin:g} on the "
            f"estimate: candidate − baseline is {v.value:+.4g} (no interval judged)"
        )


def judge_differences(
    gates: list[Gate], doc: dict[str, Any], on: GateOn = GateOn.BOUND
) -> list[Judgement]:
    """Each margin's verdict on a compare document (`fedeval.api.gates.judge`: floor at −margin on
    the lower 95% bound, or on the estimate)."""
    if not gates:
        return []
    return [Judgement(v, on) for v in judge(gates, gateable(doc), on)]


def gateable(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every difference a gate may name → {estimate, ci95}: 'auc', 'ap', 'recall@0.5', …; the
    interval is the generalisation one where the document holds it."""
    m = doc["metrics"]
    out: dict[str, dict[str, Any]] = {}

    def entry(d: dict[str, Any]) -> dict[str, Any]:
        return {"estimate": d["estimate"], "ci95": d.get("generalisation_ci95") or d["ci95"]}

    out["auc"], out["ap"] = entry(m["auc"]), entry(m["ap"])
    for row in m["thresholds"]:
        for name in METRICS:
            out[f"{name}@{float(row['threshold'])!r}"] = entry(row[name])
    return out
