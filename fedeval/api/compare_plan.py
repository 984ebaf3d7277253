"""Plan a comparison: the population at which `compare` tells a difference of δ from none.

`fedeval plan --detect auc=0.005 --model distdp -e 1`. The comparison of `fedeval.compare`
makes two releases (ε split between them); the half-width w(n) of its 95% interval on
candidate − baseline at population n is measured the planner's way: the baseline's release drawn
from a reference population of n examples
(`fedeval.api.plan_population.reference_population`, the binormal model or a pilot file's
scores), the candidate's from the same scores or the same ranking
recalibrated (`RECALIBRATIONS`: both models equally good, the widest reading kept), and the
interval computed as `compare` computes it. With σ(n) = w(n)/1.96 the noise's spread, a
non-inferiority gate ``--fail-if-worse METRIC=δ`` (fail unless the lower bound of
candidate − baseline ≥ −δ):

* has **80% power** — an equal candidate passes it 80% of the time; equivalently, a true
  difference of δ puts 0 outside the 95% interval 80% of the time — where
  δ ≥ w(n) + z₀.₈·σ(n) (z₀.₈ = 0.8416; the usual non-inferiority sample size,
  n ∝ (z₀.₉₇₅ + z₀.₈)²σ₁²/δ², Chow, Shao & Wang, *Sample Size Calculations in Clinical
  Research*, section 3.2);
* **fails an equal candidate at most 5% of the time** where δ ≥ w(n) + z₀.₉₅·σ(n)
  (z₀.₉₅ = 1.6449). There it also fails a candidate worse by 2δ at least 97.5% of the time:
  its lower bound is then below −2δ + w + z₀.₉₇₅·σ ... ≤ −δ unless the noise is 1.96σ high.

Both populations are found by bisection on the log scale, to two significant digits, as
`fedeval.api.plan.population_needed` does. w(n) is the mean over `runs` pairs of releases: the
interval's width varies little between releases of one population.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, TypedDict, Unpack

import numpy as np

from fedeval.api.compare import _shares, check_split
from fedeval.api.compare_intervals import differences
from fedeval.api.evaluate import evaluate_run, threshold_axis
from fedeval.api.plan import _check
from fedeval.api.plan_population import reference_population
from fedeval.core.config import DEFAULT_EPSILON, PrivacyModel
from fedeval.core.errors import UsageError
from fedeval.core.spec import ReleaseSpec
from fedeval.estimate import metric_registry
from fedeval.estimate.uncertainty import Z95
from fedeval.privacy.registry import model_of
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import ScoredData, read_scored

Z80 = 0.8416212335729143
"""z₀.₈: the one-sided normal quantile of 80% power."""
Z90 = 1.6448536269514722
"""z₀.₉₅: the one-sided normal quantile of a 5% false-failure rate."""


def detect_metrics() -> tuple[str, ...]:
    """What `detect` plans for: the AUC, and every threshold metric of the registry
    (`fedeval.estimate.metric_registry.THRESHOLD_METRICS`) at a threshold."""
    return ("auc", *(m.name for m in metric_registry.THRESHOLD_METRICS))


@dataclass(frozen=True)
class Detection:
    """The populations a difference of `delta` in `metric` needs (None: beyond `max_rows`)."""

    metric: str
    delta: float
    model: PrivacyModel
    epsilon: float | None
    rows_80_power: int | None
    rows_5_percent_false_failures: int | None
    half_width: float | None  # the interval's half-width at rows_5_percent_false_failures

    def to_dict(self) -> dict[str, Any]:
        """The `fedeval.plan-detect/1` document's `detect` section."""
        return {
            "metric": self.metric,
            "delta": self.delta,
            "model": self.model.value,
            "epsilon": self.epsilon,
            "rows_80_power": self.rows_80_power,
            "rows_5_percent_false_failures": self.rows_5_percent_false_failures,
            "half_width_there": self.half_width,
        }


def parse_detect(spec: str) -> tuple[str, float, float | None]:
    """'auc=0.005' or 'recall@0.5=0.01' → (metric, δ, threshold or None)."""
    name, sep, value = spec.partition("=")
    name = name.strip().lower()
    base, _, t = name.partition("@")
    try:
        delta = float(value)
        threshold = float(t) if t else None
    except ValueError:
        delta, threshold = math.nan, None
    if (
        not sep
        or base not in detect_metrics()
        or (base == "auc") != (not t)
        or not (math.isfinite(delta) and 0 < delta < 1)
        or (threshold is not None and not 0 < threshold < 1)
    ):
        at = "/".join(detect_metrics()[1:])
        raise UsageError(
            f"`detect` takes METRIC=δ with 0 < δ < 1: auc=0.005, or {at} at a threshold in "
            f"(0, 1), e.g. recall@0.5=0.01. Found {spec!r}."
        )
    return name, delta, threshold


def difference_half_width(
    rows: int,
    metric: str,
    *,
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    epsilon: float | None = None,
    split: float = 0.5,
    positives_fraction: float = 0.5,
    auc: float = 0.85,
    like: ScoredData | None = None,
    seed: int = 0,
    runs: int = 2,
    ci_draws: int = 100,
) -> float:
    """Mean lower half-width of `compare`'s 95% interval on candidate − baseline of `metric`
    ('auc' or e.g. 'recall@0.5') for two equally good models on a reference population of
    `rows` examples: the widest over the candidates of `RECALIBRATIONS`."""
    split = check_split(split)
    eps_b, eps_c = _shares(model, epsilon, split)
    t = metric.partition("@")[2]
    thresholds = [float(t)] if t else None
    rng = np.random.default_rng(seed)
    widths = []
    for _ in range(runs):
        pop = reference_population(rows, positives_fraction, rng, auc=auc, like=like)
        for slope in RECALIBRATIONS:
            base = pop if thresholds is None else _on_axis(pop, thresholds)
            cand = _recalibrated(pop, slope)
            if thresholds is not None:
                cand = _on_axis(cand, thresholds)
            # The ECE is left out: no difference reads it (`fedeval.api.compare.compare_data`).
            pair = [
                evaluate_run(
                    simulate(
                        data,
                        spec=ReleaseSpec.of(
                            model=model,
                            epsilon=eps,
                            seed=int(rng.integers(1 << 62)),
                            ci_draws=ci_draws,
                        ),
                    ),
                    thresholds=thresholds,
                    ece=False,
                )
                for data, eps in ((base, eps_b), (cand, eps_c))
            ]
            d = {x.metric: x for x in differences(pair[0], pair[1], "population")}
            name = "auc" if thresholds is None else f"{metric.partition('@')[0]}@{thresholds[0]!r}"
            ci = d[name].difference.ci95
            if ci is None:
                return math.nan
            widths.append((slope, d[name].difference.estimate - ci[0]))
    # The widest reading of the candidates, each averaged over the runs.
    return max(float(np.mean([w for s, w in widths if s == slope])) for slope in RECALIBRATIONS)


RECALIBRATIONS = (1.0, 0.8, 1.25)
"""The equally good candidates the planner reads the difference for: the baseline's own scores,
and the same ranking recalibrated (s ↦ σ(c·logit s), c = 0.8 and 1.25: squeezed toward and
spread away from ½), which sits on other cells of the release. A real candidate's scores are
distributed differently from the baseline's, and with other cells the two releases' within-leaf
ranges add rather than coincide: planning with the baseline's own scores alone called 31,000
rows enough for ≤ 5% false failures of `--fail-if-worse auc=0.05` (distdp ε = 1, 2% positives)
where a recalibrated equal candidate failed 8% of 200 releases. The widest of the three is
planned for."""


def _recalibrated(population: ScoredData, slope: float) -> ScoredData:
    """The population with every score s mapped to σ(slope·logit s) on the unit axis (the same
    order, so the same AUC and the same P/R/A at the mapped thresholds), re-binned on its fine
    cells by the cell midpoints' images."""
    if slope == 1.0:
        return population
    fine = population.fine_counts
    cells = fine.shape[-1]
    target = _recalibrated_cells(cells, slope)
    counts = np.stack([np.bincount(target, weights=c, minlength=cells) for c in fine])
    return replace(population, fine_counts=counts.astype(np.int64))


@lru_cache(maxsize=8)
def _recalibrated_cells(cells: int, slope: float) -> np.ndarray:
    """The cell each of `cells` equal cells of the unit axis goes to under s ↦ σ(slope·logit s)
    (its midpoint's image), read-only: the same for every population of one size (`plan
    --detect` recalibrates about 60, each map a log, a log1p and an exp over 2^20 cells)."""
    mids = (np.arange(cells) + 0.5) / cells
    with np.errstate(divide="ignore"):
        logit = np.log(mids) - np.log1p(-mids)
    mapped = 1.0 / (1.0 + np.exp(-slope * logit))
    target = np.minimum((mapped * cells).astype(np.int64), cells - 1)
    target.setflags(write=False)
    return target


def _on_axis(population: ScoredData, thresholds: list[float]) -> ScoredData:
    """The reference population read on an axis where `thresholds` are cell edges, as
    `compare` reads its table (a declared threshold carries no interpolation)."""
    axis = threshold_axis(population.score_range, thresholds)
    if axis == population.axis:
        return population
    # Re-bin: each fine cell's mass moves to the cell of the new axis holding its midpoint.
    fine = population.fine_counts
    cells = fine.shape[-1]
    mids = population.axis.from_unit((np.arange(cells) + 0.5) / cells)
    target = np.minimum((np.asarray(axis.to_unit(mids)) * cells).astype(np.int64), cells - 1)
    counts = np.stack([np.bincount(target, weights=c, minlength=cells) for c in fine])
    return replace(population, fine_counts=counts.astype(np.int64), axis=axis)


class ReferenceKeywords(TypedDict, total=False):
    """The reference population and release split that `detect` passes on to
    `difference_half_width` as they are (defaults and meaning there)."""

    epsilon: float | None
    split: float
    positives_fraction: float
    auc: float
    like: ScoredData | None
    seed: int


def detect(
    spec: str,
    *,
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    max_rows: int = 10**9,
    **reference: Unpack[ReferenceKeywords],
) -> Detection:
    """The populations at which a difference of δ in a metric (`spec`: 'auc=0.005',
    'recall@0.5=0.01') is detected with 80% power, and at which the gate at margin δ fails an
    equal candidate at most 5% of the time (module docstring); the reference population as
    `difference_half_width` takes it."""
    metric, delta, _ = parse_detect(spec)
    model = PrivacyModel(model)
    epsilon = reference.get("epsilon")

    def half(n: int) -> float:
        return difference_half_width(n, metric, model=model, **reference)

    cache: dict[int, float] = {}

    def needed(z: float) -> int | None:
        def ok(n: int) -> bool:
            if n not in cache:
                cache[n] = half(n)
            w = cache[n]
            return bool(math.isfinite(w) and w * (1 + z / Z95) <= delta)

        lo, hi = 100, 1000
        while not ok(hi):
            lo, hi = hi, hi * 10
            if hi > max_rows:
                return None
        while hi / lo > 1.05:
            mid = int(math.sqrt(lo * hi))
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        digits = 10 ** max(0, int(math.log10(hi)) - 1)
        return int(math.ceil(hi / digits) * digits)

    n80 = needed(Z80)
    n95 = needed(Z90)
    w = None if n95 is None else cache.get(n95) or half(n95)
    eps = (epsilon or DEFAULT_EPSILON[model]) if model_of(model).TRAITS.adds_noise else None
    return Detection(metric, delta, model, eps, n80, n95, w)


DETECT_SCHEMA = "fedeval.plan-detect/1"


def detect_report(
    spec: str,
    *,
    model: PrivacyModel | str = PrivacyModel.DISTDP,
    epsilon: float | None = None,
    positives_fraction: float | None = None,
    auc: float = 0.85,
    like: str | os.PathLike[str] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """`fedeval plan --detect` as a library call: `detect` with the reference population the
    planner uses (a pilot table `like`, or the binormal model at `positives_fraction`, default
    the pilot's share, else 0.5), as the `fedeval.plan-detect/1` document."""
    like_data = None if like is None else read_scored(like, keep_scores=False)
    if positives_fraction is None:
        positives_fraction = 0.5 if like_data is None else like_data.positives / like_data.rows
    _check(1000, positives_fraction, auc, seed)
    found = detect(
        spec,
        model=model,
        epsilon=epsilon,
        positives_fraction=positives_fraction,
        auc=auc,
        like=like_data,
        seed=seed,
    )
    return {
        "schema": DETECT_SCHEMA,
        "reference": {
            "positives_fraction": positives_fraction,
            "auc": None if like else auc,
            "like": None if like is None else str(like),
        },
        "detect": found.to_dict(),
    }
