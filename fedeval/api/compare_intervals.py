"""candidate − baseline with a 95% interval, from two releases of the same examples.

Each release's interval is kept in its parts (`fedeval.estimate.interval_parts`): a range of
readings the release cannot tell apart (deterministic: discretisation, the worst case of the
examples that depart from smooth), the privacy noise's spread (independent between the two
releases) and the spread of the order inside leaves (the same examples under two models: how
the two orders relate is not released). The difference adds the ranges and the order spreads
linearly and the noise in quadrature (`difference_parts`, which argues each), and takes a
bias-aware interval over that range (Armstrong & Kolesár 2020, as each release does). AUC and
AP (the 'leaves' curves) are combined so; P/R/A at a threshold are the worst case of the leaf
that holds it plus the noise (`fedeval.estimate.uncertainty.interval_around`), combined the
same way (`threshold_difference`): on a leaf edge (a declared threshold) that is MOVER (Zou &
Donner, Stat. Med. 2008), exact for independent Gaussian errors. Anything else (a metric whose
estimate carries a note, an interval of the 'pchip' curves) falls back to MOVER on the two
intervals (`mover`), their half-widths added where neither release has noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from fedeval.api.evaluate import Evaluation
from fedeval.core.errors import UsageError
from fedeval.core.results import Estimate
from fedeval.estimate.interval_parts import IntervalParts, difference_interval
from fedeval.estimate.metric_registry import THRESHOLD_METRIC_NAMES
from fedeval.estimate.uncertainty import ROUNDING, Z95
from fedeval.privacy.registry import model_of


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


def _generalised(
    diff: Estimate, sd_baseline: float, sd_candidate: float
) -> tuple[float, float] | None:
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


def area_parts(ev: Evaluation) -> dict[str, IntervalParts]:
    """The parts of a release's AUC interval and of its 'leaves' AP interval (none without
    intervals), as the evaluation kept them (`Evaluation.parts`): what `difference_interval`
    combines."""
    if ev.parts is None:
        return {}
    out = {"auc": ev.parts.auc}
    if ev.parts.ap is not None:
        out["ap"] = ev.parts.ap
    return out


def threshold_pieces(ev: Evaluation) -> dict[str, tuple[float, float, float]]:
    """(noise σ, worst-case low, high) of each threshold metric at each threshold of a
    release (`fedeval.api.evaluate.threshold_parts`, as the evaluation kept them), keyed
    'recall@0.5', …; none without intervals."""
    if ev.parts is None or not ev.thresholds:
        return {}
    out = {}
    for name, (sd, bounds, _) in zip(THRESHOLD_METRIC_NAMES, ev.parts.thresholds, strict=True):
        for i, t in enumerate(ev.thresholds):
            key = f"{name}@{t.threshold!r}"
            out[key] = (float(sd[i]), float(bounds[i, 0]), float(bounds[i, 1]))
    return out


def threshold_difference(
    baseline: Estimate,
    candidate: Estimate,
    pieces_b: tuple[float, float, float],
    pieces_c: tuple[float, float, float],
) -> tuple[float, float]:
    """95% interval of candidate − baseline of precision, recall or accuracy at a threshold:
    each release's range [min(estimate, low), max(estimate, high)] (the worst case of where
    the examples of the leaf holding t sit; a nan bound adds nothing) added linearly, ± z·σ
    with σ² = σ_b² + σ_c² (independent noise), as `interval_around` built each release's
    before its interval became Fieller's pivot on the ratio (`fedeval.estimate.ratio_interval`:
    a difference of two ratios is not a ratio, and keeps each release's σ). On a leaf edge (a
    declared threshold) the ranges are points and this is MOVER."""
    (sd_b, lo_b, hi_b), (sd_c, lo_c, hi_c) = pieces_b, pieces_c

    def reach(est: float, lo: float, hi: float) -> tuple[float, float]:
        below = 0.0 if math.isnan(lo) else max(est - lo, 0.0)
        above = 0.0 if math.isnan(hi) else max(hi - est, 0.0)
        return est - below, est + above

    rb, rc = reach(baseline.estimate, lo_b, hi_b), reach(candidate.estimate, lo_c, hi_c)
    half = Z95 * math.hypot(sd_b, sd_c)
    half = half if math.isfinite(half) else 0.0
    # ROUNDING: a truth exactly on a worst case, or an exact difference computed another way,
    # must not fall out by its last bits.
    return (
        max(rc[0] - rb[1] - half - ROUNDING, -1.0),
        min(rc[1] - rb[0] + half + ROUNDING, 1.0),
    )


def differences(
    baseline: Evaluation, candidate: Evaluation, interval: IntervalKind | str
) -> tuple[Difference, ...]:
    """candidate − baseline for AUC, AP and every threshold metric
    (`fedeval.estimate.metric_registry.THRESHOLD_METRICS`) at every threshold both evaluations
    hold."""
    kind = IntervalKind(interval)
    pairs: list[tuple[str, Estimate, Estimate]] = [
        ("auc", baseline.auc, candidate.auc),
        ("ap", baseline.curves.average_precision, candidate.curves.average_precision),
    ]
    for tb, tc in zip(baseline.thresholds, candidate.thresholds, strict=True):
        if tb.threshold != tc.threshold:
            raise UsageError("the two evaluations hold different thresholds.")
        for m, estimate in tb.estimates.items():  # every metric of the registry, as evaluated
            pairs.append((f"{m}@{tb.threshold!r}", estimate, tc[m]))
    sds_b = sds_c = None
    if kind is IntervalKind.GENERALISATION:
        sds_b, sds_c = _sampling_sds(baseline), _sampling_sds(candidate)
    noisy = all(model_of(e.config.model).TRAITS.adds_noise for e in (baseline, candidate))
    parts_b, parts_c = area_parts(baseline), area_parts(candidate)
    at_b, at_c = threshold_pieces(baseline), threshold_pieces(candidate)
    out = []
    for name, b, c in pairs:
        d = mover(b, c, noisy=noisy)
        if d.ci95 is not None and d.note is None:
            pb, pc = parts_b.get(name), parts_c.get(name)
            if pb is not None and pc is not None:
                d = Estimate(d.estimate, d.exact, difference_interval(pb, pc))
            elif name in at_b and name in at_c:
                d = Estimate(
                    d.estimate, d.exact, threshold_difference(b, c, at_b[name], at_c[name])
                )
        gen = None
        if sds_b is not None and sds_c is not None and name in sds_b:
            gen = _generalised(d, sds_b[name], sds_c[name])
        out.append(Difference(name, b, c, d, gen))
    return tuple(out)
