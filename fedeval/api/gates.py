"""Quality gates for CI: floors and ceilings on metrics, judged on the confidence bound.

A floor `auc=0.85` holds when the metric is at least 0.85; judged on the bound (the default),
the lower end of its 95% interval must clear it, so a noisy estimate that merely might be good
enough fails. A ceiling `ece=0.03` likewise uses the upper end. Names: `auc`, `ap`,
`roc_auc_curve`, `ece`, `ece_calibrated`, and ``name@t`` for each threshold metric of
`fedeval.estimate.metric_registry` (`precision@t`, `recall@t`, `accuracy@t`) at a threshold t
the report holds (written exactly, or to at least 4 significant digits).

Gates read result objects (`result_metrics`: an evaluation, curves, a calibration result);
`fedeval check` reads a saved document by the same names (`report_metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar, cast

from fedeval.core.axis import DEFAULT_THRESHOLDS
from fedeval.core.errors import GateFailed, UsageError
from fedeval.core.results import Estimate

if TYPE_CHECKING:  # annotations only: `fedeval check` judges a saved document without them
    from fedeval.api.calibrate import CalibrationResult
    from fedeval.api.curves import CurveResult
    from fedeval.api.evaluate import Evaluation


class GateOn(StrEnum):
    BOUND = "bound"
    ESTIMATE = "estimate"


class Kind(StrEnum):
    FLOOR = "floor"  # --fail-under
    CEILING = "ceiling"  # --fail-over


@dataclass(frozen=True)
class Gate:
    metric: str
    limit: float
    kind: Kind


@dataclass(frozen=True)
class Verdict:
    gate: Gate
    value: float  # the number the gate was judged on
    passed: bool

    def judged_on(self, on: GateOn) -> str:
        """What the value is: 'lower 95% bound', 'upper 95% bound' or 'estimate'."""
        if on is GateOn.ESTIMATE:
            return "estimate"
        return "lower 95% bound" if self.gate.kind is Kind.FLOOR else "upper 95% bound"

    def describe(self, on: GateOn) -> str:
        sign = "≥" if self.gate.kind is Kind.FLOOR else "≤"
        state = "ok" if self.passed else "FAILED"
        g = self.gate
        what = self.judged_on(on)
        return f"{state}: {g.metric} {what} {self.value:.4g}, required {sign} {g.limit:g}"

    def to_dict(self, on: GateOn) -> dict[str, Any]:
        """The verdict as a report's ``gates.verdicts`` entry states it."""
        g = self.gate
        return {
            "metric": g.metric,
            "kind": g.kind.value,
            "limit": g.limit,
            "judged_on": self.judged_on(on),
            "value": self.value,
            "passed": self.passed,
        }


def metric_values(
    specs: list[str] | None, usage: str, *, non_negative: bool = False
) -> list[tuple[str, float]]:
    """(metric, number) of each METRIC=NUMBER part of `specs` (comma-separated, the option
    repeatable), the metric lower-cased. A part that is not a metric, '=' and a finite number
    (≥ 0 with `non_negative`) is refused with `usage` and the part."""
    pairs = []
    for spec in specs or []:
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            negative = non_negative and number < 0
            if not sep or not name.strip() or not math.isfinite(number) or negative:
                raise UsageError(f"{usage} Found {part!r}.")
            pairs.append((name.strip().lower(), number))
    return pairs


def parse_gates(specs: list[str] | None, kind: Kind) -> list[Gate]:
    """'auc=0.85' or 'auc=0.85,recall@0.5=0.7' (repeatable) → gates."""
    option = "`fail_under`" if kind is Kind.FLOOR else "`fail_over`"
    usage = f"{option} takes METRIC=VALUE, e.g. {option} auc=0.85 or recall@0.5=0.7."
    return [Gate(name, limit, kind) for name, limit in metric_values(specs, usage)]


def result_metrics(result: Evaluation | CurveResult | CalibrationResult) -> dict[str, Estimate]:
    """Every gateable metric of a result, by name: `auc`, ``name@t`` for each threshold metric
    an evaluation holds (`fedeval.estimate.metric_registry`) at each of its thresholds,
    `roc_auc_curve` and `ap` (its curves, or a curve result), `ece` (the scores' ECE, or a
    calibration's raw one) and `ece_calibrated`."""
    out: dict[str, Estimate] = {}
    # Told apart by their fields, not by class: importing the API modules would cost
    # `fedeval check` (which judges a saved document) seconds of start-up.
    if hasattr(result, "ece_calibrated"):
        cal = cast("CalibrationResult", result)
        if cal.ece_raw is not None:
            out["ece"] = cal.ece_raw
        out["ece_calibrated"] = cal.ece_calibrated
        return out
    if not hasattr(result, "thresholds"):
        return {"roc_auc_curve": result.roc_auc, "ap": result.average_precision}
    ev = cast("Evaluation", result)
    out["auc"] = ev.auc
    for t in ev.thresholds:
        out |= {f"{name}@{t.threshold!r}": e for name, e in t.estimates.items()}
    out["roc_auc_curve"], out["ap"] = ev.curves.roc_auc, ev.curves.average_precision
    if ev.ece is not None:
        out["ece"] = ev.ece
    return out


def _from_document(entry: dict[str, Any]) -> Estimate:
    """A document's {estimate, ci95} as an `Estimate` (a null is nan: undefined)."""

    def number(x: Any) -> float:
        return math.nan if x is None else float(x)

    ci = entry.get("ci95")
    return Estimate(
        number(entry.get("estimate")), ci95=(number(ci[0]), number(ci[1])) if ci else None
    )


def report_metrics(doc: dict[str, Any]) -> dict[str, Estimate]:
    """Every gateable metric of a saved report or calibration map (`fedeval check`), by the
    names `result_metrics` gives the result it was written from."""
    out: dict[str, Estimate] = {}
    metrics = doc.get("metrics") or {}
    if "auc" in metrics:
        out["auc"] = _from_document(metrics["auc"])
    for t in metrics.get("thresholds", []):  # {threshold, one entry per threshold metric}
        at = f"@{float(t['threshold'])!r}"
        out |= {k + at: _from_document(e) for k, e in t.items() if isinstance(e, dict)}
    curves = metrics.get("curves") or doc.get("curves") or {}
    if "roc_auc" in curves:
        out["roc_auc_curve"] = _from_document(curves["roc_auc"])
        out["ap"] = _from_document(curves["average_precision"])
    if metrics.get("ece"):
        out["ece"] = _from_document(metrics["ece"])
    ece = doc.get("ece") or {}
    if ece.get("raw"):
        out["ece"] = _from_document(ece["raw"])
    if ece.get("calibrated"):
        out["ece_calibrated"] = _from_document(ece["calibrated"])
    return out


def gate_thresholds(gates: list[Gate]) -> list[float]:
    """The thresholds that threshold gates (recall@0.5, …) need evaluated."""
    out = []
    for g in gates:
        t = g.metric.partition("@")[2]
        if t:
            try:
                out.append(float(t))
            except ValueError:
                raise UsageError(
                    f"{g.metric!r}: the threshold after '@' must be a number."
                ) from None
    return out


M = TypeVar("M")


def find_metric(metrics: Mapping[str, M], name: str) -> M:
    """`metrics[name]`, where 'recall@t' also finds the metric at threshold t written exactly,
    or (with at least 4 significant digits) as rounded; a `UsageError` naming what there is
    otherwise."""
    if name in metrics:
        return metrics[name]
    base, _, t = name.partition("@")
    if t:
        # Exactly, or — written with at least 4 significant digits — as rounded: recall@0.5455
        # is 6/11, but recall@0.55 is 0.55 and nothing else.
        try:
            want = float(t)
        except ValueError:
            want = math.nan
        digits = len(t.replace(".", "").lstrip("0"))
        decimals = len(t.partition(".")[2])
        tol = 0.5 * 10.0**-decimals if digits >= 4 else 0.0
        for key, value in metrics.items():
            kb, _, kt = key.partition("@")
            if kb == base and kt and abs(float(kt) - want) <= tol + 1e-9:
                return value
    plain = sorted(k for k in metrics if "@" not in k)
    ts = sorted({float(k.partition("@")[2]) for k in metrics if "@" in k})
    shown = ", ".join(plain)
    if ts:
        names = dict.fromkeys(k.partition("@")[0] for k in metrics if "@" in k)
        shown += f"; {'/'.join(names)}@t for t in " + ", ".join(f"{t:.4g}" for t in ts)
    raise UsageError(
        f"the report has no metric {name!r}. It has: {shown}. Run evaluate with the gate (it "
        "adds the threshold) or with `thresholds`."
    )


def judge(
    gates: list[Gate], metrics: Mapping[str, Estimate], on: GateOn = GateOn.BOUND
) -> list[Verdict]:
    """Each gate's verdict on metrics by name (`result_metrics`, `report_metrics`). Judged on
    the bound, a metric without an interval is refused; an undefined (nan) value always is."""
    verdicts = []
    for g in gates:
        m = find_metric(metrics, g.metric)
        if on is GateOn.BOUND:
            if m.ci95 is None:
                raise UsageError(
                    f"{g.metric} has no 95% interval in this report; judge it with "
                    "`gate_on` estimate, or produce the report with intervals."
                )
            value = m.ci95[0] if g.kind is Kind.FLOOR else m.ci95[1]
        else:
            value = m.estimate
        if value is None or math.isnan(value):
            raise UsageError(f"{g.metric} is undefined in this report (no value to judge).")
        ok = value >= g.limit if g.kind is Kind.FLOOR else value <= g.limit
        verdicts.append(Verdict(g, float(value), bool(ok)))
    return verdicts


def gates_from(
    fail_under: list[str] | None = None,
    fail_over: list[str] | None = None,
    gate_on: GateOn | str = GateOn.BOUND,
) -> tuple[list[Gate], GateOn]:
    """Floors (`fail_under`) and ceilings (`fail_over`) as 'METRIC=VALUE' specs, and what they
    are judged on: the gates the command line's ``--fail-under``/``--fail-over`` make."""
    try:
        on = GateOn(gate_on)
    except ValueError:
        raise UsageError(f"`gate_on` takes bound or estimate. Found {gate_on!r}.") from None
    return parse_gates(fail_under, Kind.FLOOR) + parse_gates(fail_over, Kind.CEILING), on


def with_gate_thresholds(
    thresholds: list[float] | None, gates: list[Gate], score_range: tuple[float, float]
) -> list[float] | None:
    """The thresholds to evaluate: those given (else the default 1/11 … 10/11 of the score
    range) plus every threshold a gate names, so a `recall@0.5` gate needs no `thresholds`.
    None when neither is given (the default thresholds)."""

    extra = gate_thresholds(gates)
    if thresholds is None and not extra:
        return None
    lo, hi = score_range
    base = (
        thresholds if thresholds is not None else [lo + (hi - lo) * t for t in DEFAULT_THRESHOLDS]
    )
    return sorted(set(base) | set(extra))


def judge_report(
    gates: list[Gate],
    report: Evaluation | CurveResult | CalibrationResult | dict[str, Any],
    on: GateOn = GateOn.BOUND,
) -> list[Verdict]:
    """Each gate's verdict on a report: a result (an evaluation, curves, a calibration result),
    read through `result_metrics`, or a saved document, through `report_metrics`."""
    if isinstance(report, dict):
        return judge(gates, report_metrics(report), on)
    return judge(gates, result_metrics(report), on)


def verdicts_section(verdicts: list[Verdict], on: GateOn) -> dict[str, Any]:
    """The ``gates`` field of a report judged by quality gates (an additive field of schema 2,
    present only when gates were given): what they were judged on, whether all passed, and
    each verdict, so one JSON document says both what was measured and whether it passed.

    The verdicts are post-processing of the report's own estimates and intervals: they carry
    nothing the report does not.
    """
    return {
        "on": on.value,
        "passed": all(v.passed for v in verdicts),
        "verdicts": [v.to_dict(on) for v in verdicts],
    }


def enforce(verdicts: list[Verdict]) -> None:
    """Raise `GateFailed` naming the failed gates, if any (exit 1 on the command line)."""

    failed = [v for v in verdicts if not v.passed]
    if failed:
        names = ", ".join(v.gate.metric for v in failed)
        raise GateFailed(f"{len(failed)} of {len(verdicts)} quality gates failed: {names}.")
