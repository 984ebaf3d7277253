"""The comparison's documents: the `fedeval.compare/1` JSON, the rich table and the pair's
privacy claim (the gates that read the document live in `fedeval.api.compare`).

Each model's own report is the `fedeval.report/2` document `evaluate` writes for its release
(`baseline`, `candidate`), so everything said there about exact values, sizes and seeds holds
here too: under add-remove without exact values no exact count appears. The `privacy` section
states the pair: both releases' ε, their sum (sequential composition: one example is in both),
and a composed DP event the ledger charges as one entry.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from fedeval.core.results import Estimate
from fedeval.privacy.events import ComposedEvent, DpEvent, NoNoiseEvent
from fedeval.views.dicts import _estimate, document_head, run_section
from fedeval.views.dicts import evaluation_dict as report_dict
from fedeval.views.terminal import NOTE_MARK, _notes, _pm, columns_table

if TYPE_CHECKING:  # the result types only annotate: the API module imports this view
    from fedeval.api.compare import Comparison
    from fedeval.api.compare_intervals import Difference
    from fedeval.api.evaluate import Evaluation


def threshold_metrics(c: Comparison) -> list[str]:
    """The threshold metrics the two evaluations hold (every one of
    `fedeval.estimate.metric_registry.THRESHOLD_METRICS`), in the registry's order."""
    return list(c.baseline.thresholds[0].estimates) if c.baseline.thresholds else []


SCHEMA = "fedeval.compare/1"
"""Compatibility contract: within version 1, fields are never removed, renamed or given a new
meaning; new fields may appear."""

PAIRING_NOTE = {
    True: "both releases were made in one run from the same examples; each carries its own "
    "noise, so the difference's interval adds both, and the pairing (which examples both models "
    "get right) is not released",
    False: "two releases made separately, read as releases of the same population (not "
    "checked: a release holds no example); the difference's interval adds both noises; the "
    "pairing was never released, so paired statistics are not available",
}


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else math.fsum(v for v in values if v)


def pair_privacy(c: Comparison) -> dict[str, Any]:
    """The pair's claim: model, unit, relation, ε of each release and their sum, the composed DP
    event, and each release's own section."""
    sides = {"baseline": c.baseline.run.mechanism, "candidate": c.candidate.run.mechanism}
    sections = {k: m.section() for k, m in sides.items()}
    models = {s["model"] for s in sections.values()}
    units = {s["unit"] for s in sections.values()}
    relations = {s["relation"] for s in sections.values()}
    eps = {k: s["epsilon"] for k, s in sections.items()}
    total = _sum_or_none(list(eps.values()))
    seeded = any(s["reproducible_simulation"] for s in sections.values())
    events = tuple(m.event() for m in sides.values())
    private = not any(isinstance(e, NoNoiseEvent) for e in events)
    if private:
        event: DpEvent = ComposedEvent(events)
        claim = (
            f"pure {total:g}-DP (δ = 0) for the pair: the baseline's release at ε = "
            f"{eps['baseline']:g} and the candidate's at ε = {eps['candidate']:g}, independent "
            "noise; one unit is in both, so their ε add (sequential composition)"
        )
        if c.split is None:
            claim += (
                "; the two releases were made separately, each under its own claim, and add up "
                "to this only if they cover the same population"
            )
    else:
        event = NoNoiseEvent()
        claim = (
            "no differential privacy for the pair: at least one release has exact sums (federated)"
        )
    if seeded:
        claim += "; a reproducible simulation (seeded): NOT private"
    return {
        "model": models.pop() if len(models) == 1 else sorted(models),
        "epsilon": total if private else None,
        "delta": 0.0 if private else None,
        "unit": units.pop() if len(units) == 1 else sorted(units),
        "relation": relations.pop() if len(relations) == 1 else sorted(r or "" for r in relations),
        "neighbouring": sections["baseline"]["neighbouring"],
        "split": {
            "baseline": eps["baseline"],
            "candidate": eps["candidate"],
            "baseline_share": c.split,
        },
        "composition": "sequential: the baseline's and the candidate's releases each hold "
        "every unit once, so ε = ε_baseline + ε_candidate",
        "mechanism": {
            "name": "two releases, one per model's scores, with independent noise",
            "baseline": sections["baseline"]["mechanism"],
            "candidate": sections["candidate"]["mechanism"],
        },
        "dp_event": event.to_dict(),
        "guarantee": claim,
        "server_learns": "both releases' inputs, as for each release: "
        + sections["baseline"]["server_learns"],
        "analyst_learns": "both releases: everything compared is post-processing of them",
        "reproducible_simulation": seeded,
        "releases": sections,
    }


def _difference(d: Difference) -> dict[str, Any]:
    out = _estimate(d.difference)
    if d.generalisation_ci95 is not None:
        out["generalisation_ci95"] = list(d.generalisation_ci95)
    return out


def compare_dict(c: Comparison, *, source: str | None = None) -> dict[str, Any]:
    """The JSON document (see the module docstring)."""
    base = report_dict(c.baseline, source=source)
    cand = report_dict(c.candidate, source=source)
    diffs = {d.metric: d for d in c.differences}
    thresholds = [t.threshold for t in c.baseline.thresholds]
    metrics = threshold_metrics(c)
    run = run_section(base["run"]["reproducible_simulation"], c.seed, c.simulation)
    return document_head(SCHEMA, c.simulation, base["exact_values"]) | {
        "paired": c.paired,
        "pairing": PAIRING_NOTE[c.paired],
        "interval": c.interval.value,
        "privacy": pair_privacy(c),
        "run": run,
        "difference": "candidate − baseline",
        "metrics": {
            "auc": _difference(diffs["auc"]),
            "ap": _difference(diffs["ap"]),
            "thresholds": [
                {
                    "threshold": t,
                    **{m: _difference(diffs[f"{m}@{t!r}"]) for m in metrics},
                }
                for t in thresholds
            ],
        },
        "baseline": base,
        "candidate": cand,
    }


# --- the table -----------------------------------------------------------------------------


def _diff_pm(d: Difference) -> str:
    """The difference with its interval shown as [lo, hi] (gates read the lower end)."""
    e = d.difference
    lo_hi = d.gate_interval
    mark = f" {NOTE_MARK}" if e.note else ""
    if lo_hi is None:
        return f"{e.estimate:+.4f}{mark}"
    return f"{e.estimate:+.4f} [{lo_hi[0]:+.4f}, {lo_hi[1]:+.4f}]{mark}"


def _exact(e: Estimate) -> str:
    x = e.exact
    return "—" if x is None or math.isnan(x) else f"{x:+.4f}"


def render_compare_table(c: Comparison, console: Console, *, source: str | None = None) -> None:
    """Both releases' settings and the pair's claim; AUC and AP of each model with
    candidate − baseline and its 95% interval; then candidate − baseline of each threshold
    metric at each threshold; (in simulation) the exact differences."""
    for side, ev in (("baseline", c.baseline), ("candidate", c.candidate)):
        console.print(f"[bold]{side}[/bold] · {_setting(ev, source)}", soft_wrap=True)
    console.print(f"[dim]{escape(pair_privacy(c)['guarantee'])}[/dim]")
    exact = c.differences[0].difference.exact is not None
    span = "generalisation 95%" if c.interval.value == "generalisation" else "95%"
    t = columns_table(
        ["metric", "baseline ± 95%", "candidate ± 95%", f"Δ [{span}]"],
        left=1,
        dim=["exact"] if exact else [],
    )
    notes: list[tuple[str, Estimate | None]] = []
    for d in c.differences[:2]:
        label = {"auc": "ROC AUC", "ap": "average precision"}[d.metric]
        cells = [label, _pm(d.baseline), _pm(d.candidate), _diff_pm(d)]
        t.add_row(*cells, *([_exact(d.difference)] if exact else []))
        notes.append((label, d.difference))
    console.print(t)
    by_name = {d.metric: d for d in c.differences}
    metrics = threshold_metrics(c)
    t = columns_table(
        ["threshold", *(f"Δ {m} [{span}]" for m in metrics)],
        dim=[f"exact Δ {' / '.join(m[0] for m in metrics)}"] if exact else [],
    )
    for row in c.baseline.thresholds:
        diffs_at = [by_name[f"{m}@{row.threshold!r}"] for m in metrics]
        cells = [f"{row.threshold:.4g}", *(_diff_pm(d) for d in diffs_at)]
        if exact:
            cells.append(" / ".join(_exact(d.difference) for d in diffs_at))
        t.add_row(*cells)
        notes += [
            (f"{m}@{row.threshold:.4g}", d.difference)
            for m, d in zip(metrics, diffs_at, strict=True)
        ]
    console.print(t)
    for line in _notes(notes):
        console.print(escape(line), soft_wrap=True)
    covers = (
        "the 95% intervals of Δ also cover the sampling of the examples (generalisation; "
        "conservative: the pairing is not released)"
        if c.interval.value == "generalisation"
        else "the 95% intervals of Δ cover the difference on these examples"
    )
    console.print(
        f"[dim]Δ = candidate − baseline; {covers} · {escape(PAIRING_NOTE[c.paired])}[/dim]"
    )
    if c.seed is not None and c.simulation:
        console.print(f"[dim]seed {c.seed} (not private)[/dim]")


def _setting(ev: Evaluation, source: str | None) -> str:
    """One release's input and shape in one line (the claim is the pair's, printed once)."""
    run = ev.run
    cfg = run.config
    eps = "" if cfg.epsilon is None else f", ε = {cfg.epsilon:g}"
    if run.rows is not None and (run.truth is not None or run.mechanism.examples_public):
        size = f"{run.rows:,} examples"
        if not run.mechanism.examples_public:
            size += " (known to the simulation, not in the release)"
    else:
        size = f"≈ {run.examples_estimate:,.0f} examples (noisy estimate)"
    return (
        f"{escape(source or 'scores')}: {size} · {cfg.model.value}{eps} · "
        f"{cfg.shape.value} h = {cfg.height}"
    )
