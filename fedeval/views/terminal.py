"""Rich tables on the terminal: the estimates beside their intervals (and the exact values of a
simulation), the privacy claim in words, and notes on undetermined metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fedeval.core.results import Estimate
from fedeval.estimate.metric_registry import THRESHOLD_METRICS
from fedeval.protocol.simulate import Simulated
from fedeval.views.dicts import group_privacy_caveat, guarantee

if TYPE_CHECKING:  # the result types only annotate: the API modules import these views
    from fedeval.api.calibrate import CalibrationResult
    from fedeval.api.curves import CurveResult
    from fedeval.api.evaluate import Evaluation


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
    caveat = group_privacy_caveat(run)
    if caveat is not None:
        console.print(Text(caveat, style="yellow"))


def columns_table(columns: Sequence[str], *, left: int = 0, dim: Sequence[str] = ()) -> Table:
    """The borderless, bold-headed table of every terminal view: `columns` right-justified but
    the first `left` (labels), then the `dim` columns (exact values beside the estimates)."""
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for i, name in enumerate(columns):
        t.add_column(name, justify="left" if i < left else "right")
    for name in dim:
        t.add_column(name, justify="right", style="dim")
    return t


def _estimates_table(rows: list[tuple[str, Estimate | None]], exact: bool) -> Table:
    t = columns_table(
        ["metric", "estimate ± 95%", *(["exact", "|error|"] if exact else [])], left=1
    )
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
    t = columns_table(
        ["threshold", *(f"{metric.label} ± 95%" for metric in THRESHOLD_METRICS)],
        dim=["worst |error|"] if exact else [],
    )
    notes: list[str] = []
    for m in ev.thresholds:
        row = [m[metric.name] for metric in THRESHOLD_METRICS]
        cells = [f"{m.threshold:.4g}", *(_pm(e) for e in row)]
        if exact:
            errs = [e.abs_error for e in row if e.abs_error is not None]
            cells.append(_err(max(errs)) if errs else "—")
        t.add_row(*cells)
        at = f"@{m.threshold:.4g}"
        notes += _notes([(metric.name + at, m[metric.name]) for metric in THRESHOLD_METRICS])
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
    t = columns_table(["threshold", "FPR", "TPR (recall)", "precision"])
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
    t = columns_table(["from", "to", "calibrated", "examples"])
    step = max(1, len(m.values) // 20)
    for i in range(0, len(m.values), step):
        t.add_row(f"{edges[i]:.4g}", f"{edges[i + 1]:.4g}", _fmt(m.values[i]), f"{m.mass[i]:,.0f}")
    console.print(t)
    shown = "" if step == 1 else f" (one row in {step} shown; the map file holds all)"
    console.print(f"[dim]{cal.method.value}: {len(m.values)} buckets, step map{shown}[/dim]")
    _footer(cal.run, console, exact)
