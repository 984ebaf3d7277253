"""Plan before deploying: the error to expect for a population size, ε and privacy model, the
parameters to use, and the population needed for a target error.

The papers bound the error (Cormode & Markov, Table 1: P/R/A ≈ 2^-h | (εn)^{-2/3} |
ε^{-2/3} n^{-1/3}; AUC ≈ 1/B² | + 1/(εn) | h/(ε√n)); the constants depend on the score
distribution and on the estimator. Instead of fitting them once, the planner runs fedeval's own
estimators on a reference population of the requested size, built directly as fine leaf counts
(no rows, so n = 10^6 costs milliseconds): a binormal score model with the given AUC and
positive fraction, or the score distribution of a pilot file (`like`). The prediction is the
mean absolute error over noise draws and thresholds. `benchmarks/plan.py` compares it with
errors measured on real data.

The population is laid out on the axis `evaluate` reads data on
(`fedeval.api.evaluate.threshold_axis`:
the default thresholds are cell edges), so the predicted P/R/A errors are noise only, as
evaluate's are, with no term for interpolating inside the leaf that holds a threshold.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fedeval.api.calibrate import auto_buckets
from fedeval.api.evaluate import estimate_auc
from fedeval.api.plan_caveats import BINORMAL_CAVEAT, Caveat, pilot_caveats
from fedeval.api.plan_population import RESOLUTION, check_pilot, reference_population
from fedeval.core.axis import DEFAULT_THRESHOLDS
from fedeval.core.config import DEFAULT_LEVEL_SPLIT, PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import UsageError
from fedeval.core.params import (
    auto_quantiles,
    parse_height,
    resolve_config,
)
from fedeval.core.results import ByMetricName
from fedeval.estimate import metric_registry
from fedeval.estimate.sparse_precision import sparse_thresholds
from fedeval.privacy import probe
from fedeval.privacy.decode import decode, noise_draws
from fedeval.privacy.registry import MODELS, model_of
from fedeval.protocol.simulate import fast_release
from fedeval.tables.scored import ScoredData, read_scored

UNSTEADY_RUNS = 3
"""A prediction with a threshold where the sparse rule fired in some draws but fewer than half
(`Prediction.unsteady_thresholds`) is drawn again with this many times the runs."""

SPARSE_DRAWS = 50
"""Noise draws per predicted release behind evaluate's sparse-precision rule (its 2 noise sds of
the predicted-positive count; evaluate takes them from its own 200)."""

TABLE1 = {model: module.error_rates() for model, module in MODELS.items()}
"""The papers' error rates (Table 1) for P/R/A and AUC, shown for orientation."""


@dataclass(frozen=True)
class Prediction(ByMetricName[float]):
    """Expected absolute errors (mean over noise draws and the ten default thresholds)."""

    config: PrivacyConfig
    rows: int
    auc: float
    thresholds: dict[str, float] = field(hash=False)
    """Each threshold metric's (`fedeval.estimate.metric_registry.THRESHOLD_METRICS`), by name."""
    sparse_thresholds: tuple[float, ...] = ()
    """Default thresholds where few examples score above in at least half the draws: evaluate
    reports precision (a `sparse_limit` metric) there as sparse (over [0, 1], with a note), and
    its error is not predicted (left out of `precision`)."""
    unsteady_thresholds: tuple[float, ...] = field(default=(), hash=False)
    """Default thresholds where the sparse rule fired in some draws but fewer than half: few
    examples score above, the precision's error there swings between draws, and its mean over
    `runs` draws is itself uncertain (`plan_caveats.unsteady_caveat`)."""
    caveats: tuple[Caveat, ...] = ()
    """Metrics whose error may be several times this prediction, and why
    (`fedeval.api.plan_caveats`): always without a pilot, and where a pilot's scores are coarse
    for the release."""

    def by_name(self) -> Mapping[str, float]:
        return self.thresholds

    @property
    def pra(self) -> float:
        """The largest of the threshold metrics' expected errors (infinite where one is
        undetermined: no population that leaves it undetermined reaches a target)."""
        return max(math.inf if math.isnan(x) else x for x in self.thresholds.values())

    @property
    def undetermined(self) -> list[str]:
        """The metrics no noise draw determines (e.g. recall when the noisy positives are ≤ 0
        at every threshold in every draw): their expected error is NaN."""
        return [k for k, v in _errors(self).items() if v is None]


def _mean_defined(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Mean over the defined (non-NaN) values; NaN, without a warning, where none is."""
    defined = ~np.isnan(x)
    total = np.where(defined, x, 0.0).sum(axis=axis)
    count = defined.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _thresholds(population: ScoredData) -> np.ndarray:
    lo, hi = population.score_range
    return np.asarray(population.axis.to_unit(lo + (hi - lo) * np.asarray(DEFAULT_THRESHOLDS)))


@dataclass(frozen=True)
class Truth:
    """A reference population's own AUC, and each threshold metric of the registry by name at
    the default thresholds (arrays over them)."""

    auc: float
    thresholds: dict[str, np.ndarray] = field(hash=False)


def population_truth(population: ScoredData, rng: np.random.Generator) -> Truth:
    """The population's own metrics at the default thresholds: its release without noise at
    the reference resolution (the truth every prediction's error is measured against)."""
    # Without noise every shape gives the population's own leaves; flat is the cheapest.
    truth_cfg = PrivacyConfig(PrivacyModel.FEDERATED, RESOLUTION, Shape.FLAT)
    truth = decode(fast_release(population, truth_cfg, rng))
    return Truth(
        estimate_auc(truth), metric_registry.threshold_values(truth, _thresholds(population))
    )


def predict(
    population: ScoredData,
    config: PrivacyConfig,
    rng: np.random.Generator,
    *,
    runs: int = 20,
    truth: Truth | None = None,
) -> Prediction:
    """Mean absolute error of fedeval's estimators on `population` under `config`, at the
    default thresholds on the population's axis. `truth` (`population_truth`) may be passed
    when predicting for several configurations of one population."""
    thr = _thresholds(population)
    if truth is None:
        truth = population_truth(population, rng)
    leaves = None if config.probed else population.leaf_counts(config.height)
    draw = model_of(config.model).draw
    metrics = metric_registry.THRESHOLD_METRICS
    sparse_limited = [m.name for m in metrics if m.sparse_limit]
    others = [m.name for m in metrics if not m.sparse_limit]
    errs, heights = [], []
    sparse_errs: dict[str, list[np.ndarray]] = {name: [] for name in sparse_limited}
    sparse_runs = np.zeros(len(thr), dtype=np.int64)
    spreads: dict[int, np.ndarray | None] = {}
    for _ in range(runs):
        # A two-phase release draws its probe and chooses its height from that noisy probe in
        # every run, as evaluate does: the exact histogram's choice alone underrated the error
        # where the noise takes the tree coarser (grid scores, localdp ε = 5: 2.5× measured).
        if leaves is None:
            release = fast_release(population, config, rng)
            heights.append(release.config.height)
        else:
            release = draw(leaves, population.n_clients, config, rng)
        hist = decode(release)
        values = metric_registry.threshold_values(hist, thr)
        # Where few examples score ≥ t, evaluate reports no precision of its own (the top
        # region's, over [0, 1], with a note: `sparse_precision`); a handful of examples set the
        # truth there, which no reference population predicts. Those thresholds are left out
        # of the precision's error and named (`Prediction.sparse_thresholds`).
        # The rule needs the noise's spread, not its draws: the noise of a release at one height
        # depends on the counts only through their size (localdp's OUE variance), so the first
        # release at each height lends its draws to the rest (20× fewer draws; --heights on a
        # 1M-row localdp pilot took 94 s, nearly all of it here).
        h = release.config.height
        if h not in spreads:
            spreads[h] = noise_draws(hist, SPARSE_DRAWS, rng)
        sparse, _ = sparse_thresholds(hist.leaves, spreads[h], thr)
        sparse_runs += sparse
        for name in sparse_limited:
            sparse_errs[name].append(
                np.abs(np.where(sparse, np.nan, values[name]) - truth.thresholds[name])
            )
        errs.append(
            [
                abs(estimate_auc(hist) - truth.auc),
                *(_mean_defined(np.abs(values[n] - truth.thresholds[n])) for n in others),
            ]
        )
    # A metric undefined in some draws (no noisy positives above a threshold) is averaged over
    # the draws that define it; NaN only where none does.
    auc, *rest = _mean_defined(np.asarray(errs, dtype=np.float64), axis=0)
    mean_errors = dict(zip(others, rest, strict=True))
    # A threshold sparse in at least half the draws is left out whole (not averaged over the
    # draws that happened to see examples above it, which would flatter the prediction), and
    # named; where every threshold is, the precision is undetermined.
    named = 2 * sparse_runs >= runs
    for name in sparse_limited:
        draws = np.where(named, np.nan, np.asarray(sparse_errs[name], dtype=np.float64))
        mean_errors[name] = _mean_defined(_mean_defined(draws, axis=1))
    if heights:  # the height the probe chose most often (the smaller of a tie)
        config = replace(config, height=int(np.bincount(heights).argmax()))
    lo, hi = population.score_range
    sparse_at = tuple(
        float(lo + (hi - lo) * t)
        for t, out in zip(DEFAULT_THRESHOLDS, named.tolist(), strict=True)
        if out
    )
    unsteady = (sparse_runs > 0) & ~named
    unsteady_at = tuple(
        float(lo + (hi - lo) * t)
        for t, out in zip(DEFAULT_THRESHOLDS, unsteady.tolist(), strict=True)
        if out
    )
    errors = {m.name: float(mean_errors[m.name]) for m in metrics}
    return Prediction(config, population.rows, float(auc), errors, sparse_at, unsteady_at)


def evaluate_config(
    model: PrivacyModel | str,
    rows: int,
    epsilon: float | None,
    floor: int,
    *,
    height: int | str = "auto",
    height_for: tuple[str, ...] = (),
) -> PrivacyConfig:
    """The configuration `evaluate` resolves for `rows` examples on an axis whose alignment
    floor is `floor` (`fedeval.core.spec.ReleaseSpec.config`): its default level split too — a
    distdp tree's ε split over its levels from the thresholds' level up. Without it the planner
    drew an even tree where evaluate splits (distdp ε = 5 on the sample data, 10,000-300,000 rows:
    the AUC's and the precision's errors predicted 2-3× the measured, `benchmarks/plan.py`)."""
    return resolve_config(
        model,
        n=rows,
        epsilon=epsilon,
        height=height,
        min_height=floor,
        height_for=height_for,
        level_split=DEFAULT_LEVEL_SPLIT,
    )


def recommended_config(
    rows: int,
    population: ScoredData,
    model: PrivacyModel | str,
    epsilon: float | None,
    height: int | str = "auto",
) -> PrivacyConfig:
    """`--height auto --shape auto` as evaluate resolves it on this population: under DP the
    probe's rule (`fedeval.privacy.probe.choice_from_histogram`) on the population's exact
    histogram at the probe level (a reference population: nothing private), no coarser than the
    thresholds' alignment floor; `height` 'auto:METRIC,…' chooses for those metrics alone, a
    fixed h is taken as given. `predict` then draws the probe in every release, as evaluate
    does, and reports the height those draws chose most often."""
    h_given, height_for = parse_height(height)
    floor = population.axis.auto_floor(RESOLUTION)
    if h_given != "auto":
        return evaluate_config(model, rows, epsilon, floor, height=h_given)
    cfg = evaluate_config(model, rows, epsilon, floor, height_for=height_for)
    if not cfg.probed:
        return cfg
    level = probe.probe_level(cfg.model, RESOLUTION)
    h = probe.choice_from_histogram(
        population.leaf_counts(level), 0.0, cfg, population.rows, floor, RESOLUTION
    ).height
    return replace(cfg, height=h)


def _fraction(positives_fraction: float | None, like: ScoredData | None) -> float:
    """The positive share to plan for: the one given, else the pilot's, else 0.5."""
    if positives_fraction is not None:
        return positives_fraction
    return 0.5 if like is None else like.positives / max(like.rows, 1)


def _check(rows: int, positives_fraction: float, auc: float, seed: int) -> None:
    if not isinstance(rows, int | np.integer) or rows < 100:
        raise UsageError(f"`rows` must be an integer of at least 100. Found {rows!r}.")
    if not 0 < positives_fraction < 1:
        raise UsageError(
            f"`positives_fraction` must lie strictly between 0 and 1. Found {positives_fraction}."
        )
    if not 0 < auc < 1:  # the binormal model's separation is Φ⁻¹(auc): infinite at 0 and 1
        raise UsageError(f"`auc` must lie strictly between 0 and 1. Found {auc}.")
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise UsageError(f"`seed` must be a non-negative integer. Found {seed!r}.")


def plan(
    rows: int,
    *,
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    epsilon: float | None = None,
    positives_fraction: float | None = None,
    auc: float = 0.85,
    like: ScoredData | None = None,
    heights: range | None = None,
    seed: int = 0,
    runs: int = 20,
    progress: Callable[[int, int], None] | None = None,
    height: int | str = "auto",
) -> tuple[Prediction, list[Prediction]]:
    """(prediction at the recommended parameters, predictions for each height in `heights`).

    The recommendation is `--height auto --shape auto`'s rule (`fedeval.core.params`), so what the
    planner predicts is what the other commands will do: under DP a probe of each class's counts
    over a few cells takes PROBE_SHARE of ε (distdp) or of the reports (localdp), and the tree
    the rest; `height` 'auto:METRIC,…' (or a fixed h) as `--height` gives it.
    `positives_fraction` defaults to the pilot's (`like`), else 0.5, as `plan_report` and the
    command do. `progress(done, total)` is told after each prediction.
    """
    if like is not None:
        check_pilot(like)
    positives_fraction = _fraction(positives_fraction, like)
    _check(rows, positives_fraction, auc, seed)
    rng = np.random.default_rng(seed)
    population = reference_population(rows, positives_fraction, rng, auc=auc, like=like)
    best = recommended_config(rows, population, model, epsilon, height)
    truth = population_truth(population, rng)
    floor = population.axis.auto_floor(RESOLUTION)
    todo = [best] + [evaluate_config(model, rows, epsilon, floor, height=h) for h in heights or []]
    done = []
    for cfg in todo:
        done.append(predict(population, cfg, rng, runs=runs, truth=truth))
        if done[-1].unsteady_thresholds:
            # Few examples above a threshold: the precision's error there is 0.005 in one
            # release and 0.4 in the next, and a mean of `runs` such draws moved 2x with the
            # seed (squeezed scores, localdp: 0.0068 against 0.011-0.013 from 60); more draws.
            done[-1] = predict(population, cfg, rng, runs=UNSTEADY_RUNS * runs, truth=truth)
        if progress is not None:
            progress(len(done), len(todo))
    h = done[0].config.height
    caveats = (BINORMAL_CAVEAT,) if like is None else pilot_caveats(population, like, h)
    return replace(done[0], caveats=caveats), done[1:]


def population_needed(
    target: float,
    *,
    metric: str = "pra",
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    epsilon: float | None = None,
    positives_fraction: float | None = None,
    auc: float = 0.85,
    like: ScoredData | None = None,
    seed: int = 0,
    max_rows: int = 10**9,
    height: int | str = "auto",
) -> int | None:
    """The smallest population (to two significant digits) whose predicted error of `metric`
    ('auc' or 'pra') is at most `target`; None if even `max_rows` is not enough."""
    positives_fraction = _fraction(positives_fraction, like)
    if not target > 0:
        raise UsageError(f"`target_error` must be positive. Found {target}.")
    if metric not in ("auc", "pra"):
        raise UsageError(f"`metric` must be 'auc' or 'pra'. Found {metric!r}.")

    def error(n: int) -> float:
        pred, _ = plan(
            n,
            model=model,
            epsilon=epsilon,
            positives_fraction=positives_fraction,
            auc=auc,
            like=like,
            seed=seed,
            height=height,
        )
        return pred.auc if metric == "auc" else pred.pra

    lo, hi = 100, 1000
    while error(hi) > target:
        lo, hi = hi, hi * 10
        if hi > max_rows:
            return None
    # Bisect on the log scale to two significant digits.
    while hi / lo > 1.05:
        mid = int(math.sqrt(lo * hi))
        if error(mid) > target:
            lo = mid
        else:
            hi = mid
    digits = 10 ** max(0, int(math.log10(hi)) - 1)
    return int(math.ceil(hi / digits) * digits)


@dataclass(frozen=True)
class PlanReport:
    """What `fedeval plan` shows: the recommended release, the errors to expect, optionally the
    errors at every height and the population a target error needs."""

    rows: int
    positives_fraction: float
    auc: float
    like: str | None
    best: Prediction
    by_height: list[Prediction]
    recommended: dict[str, Any]
    target_error: float | None = None
    metric: str = "pra"
    rows_needed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The `fedeval.plan/1` document (`fedeval plan --format json`)."""
        cfg = self.best.config
        head = {
            "schema": "fedeval.plan/1",
            "privacy": {"model": cfg.model.value, "epsilon": cfg.epsilon}
            | ({"probe_share": cfg.probe_share, "probe": probe_words(cfg)} if cfg.probed else {}),
            "rows": self.rows,
            "positives_fraction": self.positives_fraction,
            "reference": {"source": self.like}
            if self.like
            else {"model": "binormal", "auc": self.auc, "cannot_predict": BINORMAL_LIMITS},
            "recommended": self.recommended,
            "expected_abs_error": _errors(self.best),
            "precision_not_predicted_at": list(self.best.sparse_thresholds),
        }
        # only where one applies: a smooth pilot's document is as it was
        caveats = {"caveats": [c.to_dict() for c in self.best.caveats]} if self.best.caveats else {}
        return (
            head
            | caveats
            | {
                "scaling_table1": dict(zip(("pra", "auc"), TABLE1[cfg.model], strict=True)),
                "by_height": [{"height": p.config.height} | _errors(p) for p in self.by_height],
                "target": None
                if self.target_error is None
                else {
                    "error": self.target_error,
                    "metric": self.metric,
                    "rows_needed": self.rows_needed,
                },
            }
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"


def probe_words(cfg: PrivacyConfig) -> str:
    """What the probe of a two-phase `auto` takes, in words."""
    return model_of(cfg.model).probe_words(cfg)


GUESS_ERROR = 0.25
"""A metric in [0, 1] predicted with a mean |error| this large is no better than a guess: a value
drawn uniformly from [0, 1] is off by at least 0.25 on average (exactly 0.25 from a truth of ½).
`plan_report` refuses when every metric is undetermined or this far off."""


def _errors(p: Prediction) -> dict[str, float | None]:
    """The expected errors (AUC, then each threshold metric), None where undetermined (JSON has
    no NaN)."""
    values = {"auc": p.auc} | p.thresholds
    return {k: None if math.isnan(v) else v for k, v in values.items()}


BINORMAL_LIMITS = (
    "the binormal reference stands for smooth scores spread over the score range; on scores "
    "with many ties (a 0.01 grid, a tree model's leaf values), squeezed into a narrow range, "
    "or with a class on a few values, the AUC error measured was up to 10-30x this prediction, "
    "and on rare positives with most negatives near 0 the precision error up to 9x: pass a "
    "pilot table with --like (measured within 2x on every kind of data)"
)
"""What the binormal reference cannot predict (`benchmarks/plan_families.py`)."""


def plan_report(
    rows: int | None = None,
    *,
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    epsilon: float | None = None,
    positives_fraction: float | None = None,
    auc: float = 0.85,
    like: str | os.PathLike[str] | None = None,
    heights: bool = False,
    target_error: float | None = None,
    metric: str = "pra",
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    height: int | str = "auto",
) -> PlanReport:
    """`fedeval plan` as a library call: the population is `rows` (default: the rows of the
    pilot table `like`), its positive share `positives_fraction` (default: the pilot's, else
    0.5); with `heights`, the errors at h = 2..16 too; with `target_error`, the n it needs;
    `height` as `--height` gives it ('auto', 'auto:METRIC,…' or h).

    >>> r = plan_report(1000, model="federated")
    >>> r.to_dict()["recommended"]["height"] >= 1
    True
    """

    parse_height(height)  # refused before the pilot is read
    like_data = None if like is None else read_scored(like, keep_scores=False)
    if rows is None:
        if like_data is None:
            raise UsageError("give the population as `rows`, or a pilot table as `like`.")
        rows = max(like_data.rows, 100)
    if positives_fraction is None:
        positives_fraction = 0.5 if like_data is None else like_data.positives / like_data.rows
    kwargs: dict[str, Any] = {
        "model": model,
        "epsilon": epsilon,
        "positives_fraction": positives_fraction,
        "auc": auc,
        "like": like_data,
        "seed": seed,
        "height": height,
    }
    best, others = plan(
        rows, heights=range(2, 17) if heights else None, progress=progress, **kwargs
    )
    cfg = best.config
    if all(math.isnan(x) or x >= GUESS_ERROR for x in (best.auc, *best.thresholds.values())):
        raise UsageError(
            f"no finite or useful error can be predicted for {rows:,} examples at "
            f"ε = {cfg.epsilon:g}: the noise swamps every count (every metric undetermined or "
            f"off by {GUESS_ERROR:g} or more, as a guess would be). Plan with a larger `epsilon` "
            "or population."
        )
    needed = None
    if target_error is not None:
        needed = population_needed(target_error, metric=metric, **kwargs)
    recommended = {
        "shape": cfg.shape.value,
        "height": cfg.height,
        "height_rule": "chosen by a probe of the class totals (two-phase auto)"
        + (f" for {', '.join(cfg.height_for)}" if cfg.height_for else "")
        if cfg.probed
        else ("auto" if parse_height(height)[0] == "auto" else "given"),
        "leaves": cfg.n_leaves,
        "quantiles": auto_quantiles(cfg.model, rows, cfg.epsilon),
        "calibration_buckets": auto_buckets(cfg.model, rows, cfg.epsilon, cfg.n_leaves),
    }
    return PlanReport(
        rows=rows,
        positives_fraction=positives_fraction,
        auc=auc,
        like=None if like is None else str(like),
        best=best,
        by_height=others,
        recommended=recommended,
        target_error=target_error,
        metric=metric,
        rows_needed=needed,
    )
