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
`fedeval.evaluate`), built from parts of different natures, which the difference combines each
as it must (`fedeval.api.compare_intervals`, `fedeval.estimate.interval_parts`): ranges the
release cannot tell apart (tied or smooth inside a leaf, the worst case of the examples that
depart from smooth, the worst case of the leaf that holds a threshold) add linearly, for the
two models' readings can err in opposite directions; the privacy noise adds in quadrature (each
release draws its own); the spread of the order inside leaves adds linearly (the releases do not
hold how the two models order the same examples: correlation −1 is possible with identical
releases). AUC and AP take a bias-aware interval (Armstrong & Kolesár 2020) over the summed
range; P/R/A the summed range ± z·σ, which on a leaf edge (a declared threshold) is MOVER
(Zou & Donner, Stat. Med. 2008), exact for independent Gaussian errors.

Coverage (`benchmarks/compare.py`, 2% positives, fixed paired data, fresh noise, auto height):
P/R/A at a declared threshold are calibrated (94.5–94.9% under distdp ε = 1 at 20,000 rows over
1000 releases, 93.8–94.5% under localdp ε = 8 at 200,000 over 600; exact without noise). AUC
and AP cover more (97.4–100%): the generated models read alike (both smooth or both tied,
ordering alike), so their true difference sits inside the summed range, and releases of models
that read apart, which reach its corners, are identical to theirs
(`tests/test_compare_limits.py`; where the corners are reached the interval holds 95%).

Each release's parts are those its evaluation kept (`Evaluation.parts`, `CurveResult.ap_parts`):
the difference reads no release twice.

Gates
-----
`fail_if_worse` margins m: a gate holds when the lower end of the 95% interval of
candidate − baseline is at least −m (or the estimate, `gate_on="estimate"`); it is judged by
`fedeval.api.gates.judge` as a floor at −m.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Unpack, cast

import numpy as np
from numpy.typing import ArrayLike

from fedeval.api.compare_intervals import (
    Difference,
    IntervalKind,
    differences,
)
from fedeval.api.evaluate import Evaluation, evaluate, evaluate_file, evaluate_run
from fedeval.api.gates import Gate, GateOn, Kind, Verdict, find_metric, judge, metric_values
from fedeval.core.config import DEFAULT_EPSILON, PrivacyModel, check_epsilon
from fedeval.core.errors import InputError, UsageError
from fedeval.core.results import Estimate
from fedeval.core.spec import ReleaseKeywords, ReleaseSpec, release_spec
from fedeval.documents.files import document_text
from fedeval.documents.release_file import load_release
from fedeval.estimate.uncertainty import DEFAULT_DRAWS
from fedeval.privacy.registry import model_of
from fedeval.protocol.simulate import Simulated, simulate
from fedeval.tables.read import DEFAULT_COLUMNS, Columns
from fedeval.tables.scored import ScoredData
from fedeval.views.compare import compare_dict

DEFAULT_SPLIT = 0.5
"""The baseline's share of ε: equal shares minimise the variance of a difference of two
equally noisy estimates (Var ∝ 1/ε_b² + 1/ε_c², least at ε_b = ε_c)."""


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
        """The difference of one metric: 'auc', 'ap', 'recall@0.5', … (found as a gate finds
        it: `fedeval.api.gates.find_metric`)."""
        try:
            return find_metric({d.metric: d for d in self.differences}, metric)
        except UsageError:
            raise KeyError(metric) from None

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
    if not model_of(model).TRAITS.adds_noise:
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


def _pair_specs(spec: ReleaseSpec, split: float) -> tuple[ReleaseSpec, ReleaseSpec, int | None]:
    """Each release's spec from the pair's: ε split (`_shares`), two seeds from one (`_seeds`;
    a Generator gives the pair's integer seed first, as `evaluate` states the int it used), the
    rest shared. Also the pair's seed."""
    eps_b, eps_c = _shares(spec.model, spec.epsilon, split)
    seed = spec.seed
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(1 << 62))
    seed_b, seed_c = _seeds(seed)
    return (
        replace(spec, epsilon=eps_b, seed=seed_b),
        replace(spec, epsilon=eps_c, seed=seed_c),
        seed,
    )


def compare(
    y_true: ArrayLike,
    baseline_score: ArrayLike,
    candidate_score: ArrayLike,
    *,
    spec: ReleaseSpec | None = None,
    split: float = DEFAULT_SPLIT,
    thresholds: Sequence[float] | None = None,
    client_ids: ArrayLike | None = None,
    pos_label: object = None,
    score_range: tuple[float, float] = (0.0, 1.0),
    exact: bool = True,
    interval: IntervalKind | str = IntervalKind.POPULATION,
    **release: Unpack[ReleaseKeywords],
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
    seed : the pair's seed (each release gets its own from it): a reproducible simulation.
    spec : the pair's release (`fedeval.core.spec.ReleaseSpec`: model, ε of the pair, seed,
        height, …) instead of those keywords, as `fedeval.evaluate` takes it; not both.
    interval : 'population' (the difference on these examples) or 'generalisation' (also the
        sampling of the examples; conservative: the pairing is not released).
    """
    spec = release_spec(spec, release)
    split = check_split(split)
    kind = IntervalKind(interval)
    spec_b, spec_c, seed = _pair_specs(spec, split)
    base_score = np.asarray(baseline_score)
    cand_score = np.asarray(candidate_score)
    if base_score.shape != cand_score.shape:
        raise UsageError(
            f"the baseline's and the candidate's scores must score the same examples. Found "
            f"shapes {base_score.shape} and {cand_score.shape}."
        )
    common: dict[str, Any] = dict(
        thresholds=thresholds,
        client_ids=client_ids,
        pos_label=pos_label,
        score_range=score_range,
        exact=exact,
    )
    b = evaluate(y_true, base_score, spec=spec_b, **common)
    c = evaluate(y_true, cand_score, spec=spec_c, **common)
    return Comparison(b, c, differences(b, c, kind), kind, True, split, seed)


def compare_data(
    baseline: ScoredData,
    candidate: ScoredData,
    *,
    spec: ReleaseSpec | None = None,
    split: float = DEFAULT_SPLIT,
    thresholds: Sequence[float] | None = None,
    interval: IntervalKind | str = IntervalKind.POPULATION,
    ece: bool = True,
    **release: Unpack[ReleaseKeywords],
) -> Comparison:
    """`compare` of the two models' scores as read already (`fedeval.api.inputs.ReadOptions
    .arrays` under the pair's release, one table per model): the same two releases
    and differences for the same seed, without reading the scores again, so many releases of
    one population (a coverage study, a benchmark) bin its rows once. `ece=False` leaves each
    release's ECE out (`fedeval.api.evaluate.evaluate_run`; no difference reads it)."""
    spec = release_spec(spec, release)
    kind = IntervalKind(interval)
    split = check_split(split)
    spec_b, spec_c, seed = _pair_specs(spec, split)
    b, c = (
        evaluate_run(simulate(data, spec=s), thresholds=thresholds, ece=ece)
        for data, s in ((baseline, spec_b), (candidate, spec_c))
    )
    return Comparison(b, c, differences(b, c, kind), kind, True, split, seed)


RELEASE_KEYWORDS = frozenset(ReleaseKeywords.__optional_keys__)
"""The keywords of a release (`fedeval.core.spec.ReleaseKeywords`), which `spec` replaces."""


def _evaluate_column(
    source: str | os.PathLike[str],
    param: str,
    columns: Columns,
    spec: ReleaseSpec,
    options: dict[str, Any],
) -> Evaluation:
    """`evaluate_file` on one of the pair's score columns; an error about the score column
    names the parameter that chose it (`candidate_col`), not evaluate's `score_col`."""
    try:
        return evaluate_file(source, columns=columns, spec=spec, **options)
    except InputError as e:
        raise InputError(str(e).replace("`score_col`", f"`{param}`")) from e


def compare_file(
    source: str | os.PathLike[str],
    *,
    baseline_col: str,
    candidate_col: str,
    label_col: str = DEFAULT_COLUMNS.label,
    client_col: str | None = None,
    spec: ReleaseSpec | None = None,
    split: float = DEFAULT_SPLIT,
    interval: IntervalKind | str = IntervalKind.POPULATION,
    **options: Any,
) -> Comparison:
    """`compare` on a Parquet/CSV file (or '-' for CSV on stdin) holding both score columns:
    the table is read once per release. The release is `spec` or its keywords (model, epsilon
    of the pair, seed, height, …; not both); other options are `fedeval.evaluate_file`'s."""
    release = {k: options.pop(k) for k in list(options) if k in RELEASE_KEYWORDS}
    spec = release_spec(spec, cast(ReleaseKeywords, release))
    if baseline_col == candidate_col:
        raise UsageError(
            f"`baseline_col` and `candidate_col` name the same column {baseline_col!r}: "
            "compare two different models' scores."
        )
    if str(source) == "-":
        raise UsageError(
            "compare reads its table twice (once per model): give a file, not '-' (stdin)."
        )
    split = check_split(split)
    kind = IntervalKind(interval)
    spec_b, spec_c, seed = _pair_specs(spec, split)
    b, c = (
        _evaluate_column(source, param, Columns(col, label_col, client_col), spec_, options)
        for param, col, spec_ in (
            ("baseline_col", baseline_col, spec_b),
            ("candidate_col", candidate_col, spec_c),
        )
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
    baseline: str | os.PathLike[str],
    candidate: str | os.PathLike[str],
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
    usage = (
        "`fail_if_worse` takes METRIC=MARGIN with a margin ≥ 0, e.g. auc=0.005 or recall@0.5=0.01."
    )
    margins = metric_values(specs, usage, non_negative=True)
    return [Gate(name, -margin, Kind.FLOOR) for name, margin in margins]


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
    gates: list[Gate], comparison: Comparison, on: GateOn = GateOn.BOUND
) -> list[Judgement]:
    """Each margin's verdict on a comparison (`fedeval.api.gates.judge`: floor at −margin on
    the lower 95% bound, or on the estimate)."""
    if not gates:
        return []
    return [Judgement(v, on) for v in judge(gates, gateable(comparison), on)]


def gateable(comparison: Comparison) -> dict[str, Estimate]:
    """Every difference a gate may name → its estimate and interval: 'auc', 'ap',
    'recall@0.5', …; the interval is the generalisation one where it was computed."""
    return {
        d.metric: Estimate(d.difference.estimate, ci95=d.gate_interval)
        for d in comparison.differences
    }
