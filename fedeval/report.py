"""Reports: the versioned JSON document and the rich table.

Schema ``fedeval.report/1``. Compatibility contract: within schema version 1, fields are never
removed, renamed or given a new meaning; new fields may appear. ``simulation`` says whether the
release was simulated from a raw table (``exact`` values exist only then, and only when asked
for); it is false for estimates from a real deployment's aggregate.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

import fedeval
from fedeval.config import PrivacyModel
from fedeval.evaluate import Estimate, Evaluation

SCHEMA = "fedeval.report/1"

NEIGHBOURING = {
    PrivacyModel.FEDERATED: None,
    PrivacyModel.DISTDP: "add or remove one example",
    PrivacyModel.LOCALDP: "any two inputs of one example's report (local DP)",
}


def guarantee(ev: Evaluation) -> str:
    """The privacy claim in words: exactly what the added noise supports."""
    eps = ev.config.epsilon
    match ev.config.model:
        case PrivacyModel.FEDERATED:
            return (
                "no differential privacy: secure aggregation hides individual reports but the "
                "released sums are exact"
            )
        case PrivacyModel.DISTDP:
            return (
                f"pure {eps:g}-DP (δ = 0) for the whole release, neighbouring datasets differ by "
                "adding or removing one example; holds if every client adds its noise share"
            )
        case PrivacyModel.LOCALDP:
            return (
                f"pure {eps:g}-local DP (δ = 0) for each example's report; the release is "
                f"{eps:g}-DP as post-processing"
            )
    raise AssertionError(ev.config.model)


def _num(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return float(x)


def _estimate(e: Estimate) -> dict[str, float | None]:
    return {"estimate": _num(e.estimate), "exact": _num(e.exact), "abs_error": _num(e.abs_error)}


def to_dict(ev: Evaluation, *, source: str | None = None) -> dict[str, Any]:
    """The JSON report as a dict (see the module docstring for the compatibility contract)."""
    cfg = ev.config
    hist = ev.histogram
    privacy: dict[str, Any] = {
        "model": cfg.model.value,
        "epsilon": cfg.epsilon,
        "delta": ev.delta,
        "unit": "example",
        "neighbouring": NEIGHBOURING[cfg.model],
        "mechanism": ev.mechanism,
        "height": cfg.height,
        "shape": cfg.shape.value,
        "levels": list(cfg.levels),
        "buckets": ev.buckets if ev.buckets is not None else cfg.n_leaves,
        "bucketing": "equi-depth" if ev.buckets is not None else "leaves",
        "guarantee": guarantee(ev),
    }
    if ev.clients != ev.rows:
        privacy["note"] = (
            f"{ev.rows} examples are held by {ev.clients} clients; the guarantee covers one "
            "example, so a client holding k examples is protected at k·ε (group privacy)"
        )
    return {
        "schema": SCHEMA,
        "fedeval_version": fedeval.__version__,
        "simulation": True,  # evaluate always simulates the protocol on the raw table
        "privacy": privacy,
        "data": {
            "source": source,
            "rows": ev.rows,
            "clients": ev.clients,
            "positives_estimate": hist.positives,
            "negatives_estimate": hist.negatives,
        },
        "run": {"seed": ev.seed, "path": ev.path.value},
        "metrics": {
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
        },
    }


def to_json(ev: Evaluation, *, source: str | None = None) -> str:
    return json.dumps(to_dict(ev, source=source), indent=2, allow_nan=False) + "\n"


def _fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _err(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def render_table(ev: Evaluation, console: Console, *, source: str | None = None) -> None:
    """Human-readable report: the privacy setting, AUC, and P/R/A per threshold."""
    cfg = ev.config
    eps = "" if cfg.epsilon is None else f", ε = {cfg.epsilon:g}"
    name = escape(source or "scores")
    head = (
        f"[bold]{name}[/bold]: {ev.rows:,} examples, {ev.clients:,} clients · "
        f"model [bold]{cfg.model.value}[/bold]{eps} · {cfg.shape.value} release, "
        f"h = {cfg.height} ({cfg.n_leaves:,} leaves)"
    )
    console.print(head, soft_wrap=True)
    console.print(f"[dim]{ev.mechanism['name']} · {guarantee(ev)}[/dim]", soft_wrap=True)
    exact = ev.auc.exact is not None

    auc = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    auc.add_column("metric")
    auc.add_column("estimate", justify="right")
    if exact:
        auc.add_column("exact", justify="right")
        auc.add_column("|error|", justify="right")
    row = ["ROC AUC", _fmt(ev.auc.estimate)]
    if exact:
        row += [_fmt(ev.auc.exact), _err(ev.auc.abs_error)]
    auc.add_row(*row)
    console.print(auc)

    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("threshold", justify="right")
    for name in ("precision", "recall", "accuracy"):
        t.add_column(name, justify="right")
    if exact:
        t.add_column("worst |error|", justify="right", style="dim")
    for m in ev.thresholds:
        trio = (m.precision, m.recall, m.accuracy)
        cells = [f"{m.threshold:.4g}", *(_fmt(e.estimate) for e in trio)]
        if exact:
            errs = [e.abs_error for e in trio if e.abs_error is not None]
            cells.append(_err(max(errs)) if errs else "—")
        t.add_row(*cells)
    console.print(t)
    foot = [f"seed {ev.seed}"] if ev.seed is not None else []
    if exact:
        foot.append("exact values: --format json")
    if foot:
        console.print(f"[dim]{' · '.join(foot)}[/dim]")
