"""Reports: the versioned JSON document and the rich table.

Schema ``fedeval.report/2``. Compatibility contract: within schema version 2, fields are never
removed, renamed or given a new meaning; new fields may appear. ``simulation`` says whether the
release was simulated from a raw table (``exact`` values exist only then, and only when asked
for); it is false for estimates from a real deployment's aggregate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import fedeval
from fedeval.calibration import CalibrationResult
from fedeval.config import PrivacyModel, Unit
from fedeval.curves import CurveResult
from fedeval.evaluate import Evaluation
from fedeval.results import Estimate
from fedeval.simulate import Simulated

SCHEMA = "fedeval.report/2"
CURVES_SCHEMA = "fedeval.curves/2"


def guarantee(run: Simulated) -> str:
    """The privacy claim in words, as the run's mechanism states it."""
    return run.mechanism.guarantee()


def _num(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return float(x)


def _estimate(e: Estimate) -> dict[str, Any]:
    """estimate, ci95, exact, abs_error; and `note` (why the estimate is barely determined) only
    when there is one (an additive field of schema 2)."""
    ci = None if e.ci95 is None else [_num(e.ci95[0]), _num(e.ci95[1])]
    out: dict[str, Any] = {
        "estimate": _num(e.estimate),
        "ci95": ci,
        "exact": _num(e.exact),
        "abs_error": _num(e.abs_error),
    }
    if getattr(e, "note", None):
        out["note"] = e.note
    return out


def privacy_section(run: Simulated) -> dict[str, Any]:
    """The full claim, from the run's mechanism (model, ε, δ, unit, relation, noise, DP event,
    what the server and the analyst learn), and notes that need the raw data (simulation only).
    """
    cfg = run.config
    privacy = run.mechanism.section()
    if run.truth is None:
        return privacy  # from a release, or with --no-exact: nothing beyond the release
    if cfg.unit is Unit.CLIENT:
        if run.dropped:
            privacy["note"] = (
                f"{run.dropped} examples were left out by the cap of {cfg.max_examples} per "
                "client (chosen at random); the exact values cover every example, so the errors "
                "include the cap's effect"
            )
    elif run.clients != run.rows and cfg.model is not PrivacyModel.FEDERATED:
        privacy["note"] = (
            f"{run.rows} examples are held by {run.clients} clients; the guarantee covers one "
            "example, so a client holding k examples is protected at k·ε (group privacy)"
        )
    return privacy


def document(schema: str, run: Simulated, source: str | None) -> dict[str, Any]:
    """The sections every fedeval document shares.

    Exact sizes (rows, clients) and the input's name appear only where the mechanism may
    publish them or the document is a simulation report holding exact values anyway; otherwise
    the document is post-processing of the release alone. A seed appears only in a seeded
    (reproducible, not private) run.
    """
    hist = run.histogram
    exact = run.truth is not None
    data: dict[str, Any] = {}
    if exact:
        data["source"] = source
    if exact or run.mechanism.examples_public:
        data["rows"] = run.rows
    if exact or run.mechanism.clients_public:
        data["clients"] = run.clients
    data |= {
        "examples_estimate": run.examples_estimate,
        "positives_estimate": hist.positives,
        "negatives_estimate": hist.negatives,
    }
    run_section: dict[str, Any] = {
        "path": None if run.path is None else run.path.value,
        "reproducible_simulation": run.mechanism.seeded,
    }
    if run.seed is not None and run.simulation:
        run_section["seed"] = run.seed
    return {
        "schema": schema,
        "fedeval_version": fedeval.__version__,
        "simulation": run.simulation,
        "exact_values": exact,
        "privacy": privacy_section(run),
        "data": data,
        "run": run_section,
        # Public parameters of the release: the score range, and the cell edges that declared
        # thresholds were aligned to (they depend on the options alone).
        "score_axis": run.axis.to_dict(),
    }


def shareable(doc: dict[str, Any]) -> dict[str, Any]:
    """A document fit to hand on under DP (e.g. a calibration map file): the exact values a
    simulation knows (and the sizes and source name beside them) removed, so that what remains
    is post-processing of the release. Without DP, or without exact values, `doc` itself."""
    if not doc.get("exact_values") or doc["privacy"]["model"] == PrivacyModel.FEDERATED.value:
        return doc
    import copy

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: (None if k in ("exact", "abs_error") else strip(v)) for k, v in x.items()}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    out = strip(copy.deepcopy(doc))
    out["exact_values"] = False
    out["privacy"].pop("note", None)
    out["data"] = {k: v for k, v in out["data"].items() if k.endswith("_estimate")}
    return out


def _curve_areas(c: CurveResult) -> dict[str, Any]:
    return {
        "quantiles": c.quantiles,
        "method": c.method,
        "roc_auc": _estimate(c.roc_auc),
        "average_precision": _estimate(c.average_precision),
        "roc_area_error": _num(c.roc_area_error),
        "pr_area_error": _num(c.pr_area_error),
    }


def to_dict(ev: Evaluation, *, source: str | None = None) -> dict[str, Any]:
    """The JSON report as a dict (see the module docstring for the compatibility contract)."""
    doc = document(SCHEMA, ev.run, source)
    doc["privacy"]["buckets"] = ev.buckets if ev.buckets is not None else ev.config.n_leaves
    doc["privacy"]["bucketing"] = "equi-depth" if ev.buckets is not None else "leaves"
    doc["metrics"] = {
        "auc": _estimate(ev.auc),
        "thresholds": [
            {
                "threshold": t.threshold,
                "precision": _estimate(t.precision),
                "recall": _estimate(t.recall),
                "accuracy": _estimate(t.accuracy),
            }
            for t in ev.thresholds
        ],
        "curves": _curve_areas(ev.curves),
        "ece": None if ev.ece is None else _estimate(ev.ece) | {"bins": 15},
    }
    return doc


def curves_dict(c: CurveResult, *, source: str | None = None) -> dict[str, Any]:
    """`fedeval.curves/2`: areas and the curves at the estimated quantiles (threshold null at
    the two ends, where every example is negative / positive)."""
    doc = document(CURVES_SCHEMA, c.run, source)
    pts = c.points
    doc["curves"] = _curve_areas(c) | {
        "points": {
            "threshold": [_num(t) if math.isfinite(t) else None for t in pts.thresholds],
            "fpr": pts.fpr.tolist(),
            "tpr": pts.tpr.tolist(),
            "precision": pts.precision.tolist(),
        }
    }
    return doc


def curves_csv(c: CurveResult) -> str:
    """One row per point: threshold (empty at the two ends), fpr, tpr (= recall), precision."""
    pts = c.points
    lines = ["threshold,fpr,tpr,precision"]
    for t, f, r, p in zip(pts.thresholds, pts.fpr, pts.tpr, pts.precision, strict=True):
        cells = ["" if not math.isfinite(t) else repr(float(t))]
        lines.append(",".join(cells + [repr(float(x)) for x in (f, r, p)]))
    return "\n".join(lines) + "\n"


def map_dict(
    cal: CalibrationResult, *, source: str | None = None, score_col: str = "score"
) -> dict[str, Any]:
    """`fedeval.calibration-map/2`: the map in the scores' own units, with its provenance."""
    from fedeval.mapfile import SCHEMA as MAP_SCHEMA

    lo, hi = cal.run.score_range
    doc = document(MAP_SCHEMA, cal.run, source)
    m = cal.map
    doc |= {
        "kind": "binary",
        "method": cal.method.value,
        "interpolation": "step",
        "score_column": score_col,
        "score_range": [lo, hi],
        "edges": np.asarray(cal.run.from_unit(m.edges)).tolist(),
        "values": m.values.tolist(),
        "mass": m.mass.tolist(),
        "ece": {
            "bins": cal.n_bins,
            "raw": None if cal.ece_raw is None else _estimate(cal.ece_raw),
            "calibrated": _estimate(cal.ece_calibrated) | {"in_sample": True},
        },
    }
    return doc


def _fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


NOTE_MARK = "†"
"""Marks an estimate that carries a note; the notes are printed under the table."""


def _pm(e: Estimate, digits: int = 4) -> str:
    """estimate ± the larger side of the 95% interval (it may be asymmetric: clipping, or the
    worst case inside a leaf); with a note, the interval itself and a mark."""
    note = getattr(e, "note", None)
    if e.ci95 is None or e.estimate is None or math.isnan(e.estimate):
        return _fmt(e.estimate, digits) + (f" {NOTE_MARK}" if note else "")
    if note:
        lo, hi = e.ci95
        return f"{e.estimate:.{digits}f} ± [{lo:.2g}, {hi:.2g}] {NOTE_MARK}"
    half = max(e.estimate - e.ci95[0], e.ci95[1] - e.estimate)
    return f"{e.estimate:.{digits}f} ± {half:.1e}"


def _notes(rows: list[tuple[str, Estimate | None]]) -> list[str]:
    """'† label: note' for each estimate that has a note, once per distinct line."""
    out: list[str] = []
    for label, e in rows:
        note = None if e is None else getattr(e, "note", None)
        line = f"{NOTE_MARK} {label}: {note}"
        if note and line not in out:
            out.append(line)
    return out


def _err(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def _render_header(run: Simulated, console: Console, source: str | None) -> None:
    cfg = run.config
    eps = "" if cfg.epsilon is None else f", ε = {cfg.epsilon:g}"
    name = escape(source or "scores")
    if run.rows is not None and (run.truth is not None or run.mechanism.examples_public):
        size = f"{run.rows:,} examples" + (
            "" if run.clients is None else f", {run.clients:,} clients"
        )
        if not run.mechanism.examples_public:
            size += " (known to the simulation, not in the release)"
    else:
        size = f"≈ {run.examples_estimate:,.0f} examples (noisy estimate)"
    head = (
        f"[bold]{name}[/bold]: {size} · "
        f"model [bold]{cfg.model.value}[/bold]{eps} · {cfg.shape.value} release, "
        f"h = {cfg.height} ({cfg.n_leaves:,} leaves)"
    )
    console.print(head, soft_wrap=True)
    # the guarantee is a paragraph (some 270 characters): wrapped at words, for people
    console.print(f"[dim]{run.mechanism.parameters()['name']} · {guarantee(run)}[/dim]")


def _estimates_table(rows: list[tuple[str, Estimate | None]], exact: bool) -> Table:
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("metric")
    t.add_column("estimate ± 95%", justify="right")
    if exact:
        t.add_column("exact", justify="right")
        t.add_column("|error|", justify="right")
    for label, e in rows:
        if e is None:
            continue
        cells = [label, _pm(e)]
        if exact:
            cells += [_fmt(e.exact), _err(e.abs_error)]
        t.add_row(*cells)
    notes = _notes(rows)
    if notes:
        t.caption = escape("\n".join(notes))
        t.caption_justify = "left"
    return t


def _footer(run: Simulated, console: Console, exact: bool) -> None:
    foot = [f"seed {run.seed} (not private)"] if run.seed is not None and run.simulation else []
    if exact:
        foot.append("exact values: --format json")
    if foot:
        console.print(f"[dim]{' · '.join(foot)}[/dim]")


def render_table(ev: Evaluation, console: Console, *, source: str | None = None) -> None:
    """Human-readable report: the privacy setting, AUC, curve areas, and P/R/A per threshold."""
    _render_header(ev.run, console, source)
    exact = ev.auc.exact is not None
    c = ev.curves
    console.print(
        _estimates_table(
            [
                ("ROC AUC", ev.auc),
                (f"ROC AUC ({_curve_name(c)})", c.roc_auc),
                (f"average precision ({_curve_name(c)})", c.average_precision),
                ("ECE of the scores (15 bins)", ev.ece),
            ],
            exact,
        )
    )
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("threshold", justify="right")
    for name in ("precision ± 95%", "recall ± 95%", "accuracy ± 95%"):
        t.add_column(name, justify="right")
    if exact:
        t.add_column("worst |error|", justify="right", style="dim")
    notes: list[str] = []
    for m in ev.thresholds:
        trio = (m.precision, m.recall, m.accuracy)
        cells = [f"{m.threshold:.4g}", *(_pm(e) for e in trio)]
        if exact:
            errs = [e.abs_error for e in trio if e.abs_error is not None]
            cells.append(_err(max(errs)) if errs else "—")
        t.add_row(*cells)
        names = ("precision", "recall", "accuracy")
        notes += _notes([(f"{n}@{m.threshold:.4g}", e) for n, e in zip(names, trio, strict=True)])
    console.print(t)
    for line in notes:
        console.print(escape(line), soft_wrap=True)
    _footer(ev.run, console, exact)


def _curve_name(c: CurveResult) -> str:
    """Which curve estimator the areas come from, for the table's labels."""
    return f"PCHIP curve, Q = {c.quantiles}" if c.method == "pchip" else "curve from the leaves"


def render_curves_table(c: CurveResult, console: Console, *, source: str | None = None) -> None:
    """Areas, area errors, and about a dozen points of each curve (all of them: --format csv)."""
    _render_header(c.run, console, source)
    exact = c.exact is not None
    console.print(
        _estimates_table(
            [("ROC AUC", c.roc_auc), ("average precision", c.average_precision)], exact
        )
    )
    if exact:
        console.print(
            f"area between estimated and exact curve: ROC {_err(c.roc_area_error)}, "
            f"PR {_err(c.pr_area_error)}"
        )
    pts = c.points
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for name in ("threshold", "FPR", "TPR (recall)", "precision"):
        t.add_column(name, justify="right")
    inner = np.arange(1, len(pts.thresholds) - 1)
    for i in inner[:: max(1, len(inner) // 12)]:
        t.add_row(
            f"{pts.thresholds[i]:.4g}", _fmt(pts.fpr[i]), _fmt(pts.tpr[i]), _fmt(pts.precision[i])
        )
    console.print(t)
    console.print(
        f"[dim]{len(pts.thresholds)} points at Q = {c.quantiles} quantiles per class[/dim]"
    )
    _footer(c.run, console, exact)


def render_calibration_table(
    cal: CalibrationResult, console: Console, *, source: str | None = None
) -> None:
    """The map (bucket edges, values, mass) and the ECE before and after."""
    _render_header(cal.run, console, source)
    exact = cal.ece_calibrated.exact is not None
    console.print(
        _estimates_table(
            [
                (f"ECE raw ({cal.n_bins} bins)", cal.ece_raw),
                (f"ECE calibrated, in-sample ({cal.n_bins} bins)", cal.ece_calibrated),
            ],
            exact,
        )
    )
    m = cal.map
    edges = np.asarray(cal.run.from_unit(m.edges))
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for name in ("from", "to", "calibrated", "examples"):
        t.add_column(name, justify="right")
    step = max(1, len(m.values) // 20)
    for i in range(0, len(m.values), step):
        t.add_row(f"{edges[i]:.4g}", f"{edges[i + 1]:.4g}", _fmt(m.values[i]), f"{m.mass[i]:,.0f}")
    console.print(t)
    shown = "" if step == 1 else f" (one row in {step} shown; the map file holds all)"
    console.print(f"[dim]{cal.method.value}: {len(m.values)} buckets, step map{shown}[/dim]")
    _footer(cal.run, console, exact)
