"""Reports: the versioned JSON document and the rich table.

Schema ``fedeval.report/2``. Compatibility contract: within schema version 2, fields are never
removed, renamed or given a new meaning; new fields may appear. ``simulation`` says whether the
release was simulated from a raw table (``exact`` values exist only then, and only when asked
for); it is false for estimates from a real deployment's aggregate.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fedeval.core.config import PrivacyModel, Unit
from fedeval.core.results import Estimate
from fedeval.core.version import __version__
from fedeval.documents.map_file import SCHEMA as MAP_SCHEMA
from fedeval.estimate.metric_registry import THRESHOLD_METRICS
from fedeval.privacy.registry import model_of
from fedeval.protocol.simulate import Simulated

if TYPE_CHECKING:  # the result types only annotate: the API modules import these views
    from fedeval.api.calibrate import CalibrationResult
    from fedeval.api.curves import CurveResult
    from fedeval.api.evaluate import Evaluation

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
    elif run.clients != run.rows and model_of(cfg.model).TRAITS.adds_noise:
        privacy["note"] = (
            f"{run.rows} examples are held by {run.clients} clients; the guarantee covers one "
            "example, so a client holding k examples is protected at k·ε (group privacy)"
        )
    return privacy


def document_head(schema: str, simulation: bool, exact: bool) -> dict[str, Any]:
    """The keys every report opens with: its schema, the version that wrote it, whether it is a
    simulation, and whether it holds exact values."""
    return {
        "schema": schema,
        "fedeval_version": __version__,
        "simulation": simulation,
        "exact_values": exact,
    }


def run_section(
    reproducible: bool, seed: int | None, simulation: bool, **first: Any
) -> dict[str, Any]:
    """A report's ``run`` section: the `first` fields, whether the run is reproducible, and the
    seed only where a seeded simulation made it (a private run's seed is never written)."""
    section: dict[str, Any] = {**first, "reproducible_simulation": reproducible}
    if seed is not None and simulation:
        section["seed"] = seed
    return section


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
    path = None if run.path is None else run.path.value
    return document_head(schema, run.simulation, exact) | {
        "privacy": privacy_section(run),
        "data": data,
        "run": run_section(run.mechanism.seeded, run.seed, run.simulation, path=path),
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

    out: dict[str, Any] = strip(copy.deepcopy(doc))
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


def evaluation_dict(ev: Evaluation, *, source: str | None = None) -> dict[str, Any]:
    """The JSON report as a dict (see the module docstring for the compatibility contract)."""
    doc = document(SCHEMA, ev.run, source)
    doc["privacy"]["buckets"] = ev.buckets if ev.buckets is not None else ev.config.n_leaves
    doc["privacy"]["bucketing"] = "equi-depth" if ev.buckets is not None else "leaves"
    doc["metrics"] = {
        "auc": _estimate(ev.auc),
        "thresholds": [
            {"threshold": t.threshold} | {m.name: _estimate(t[m.name]) for m in THRESHOLD_METRICS}
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


def curves_parquet(c: CurveResult) -> bytes:
    """The points of `curves_csv` as a Parquet file: threshold (null at the two ends), fpr,
    tpr (= recall), precision, all float64."""
    pts = c.points
    thresholds = [float(t) if math.isfinite(t) else None for t in pts.thresholds]
    table = pa.table(
        {
            "threshold": pa.array(thresholds, pa.float64()),
            "fpr": pa.array(pts.fpr, pa.float64()),
            "tpr": pa.array(pts.tpr, pa.float64()),
            "precision": pa.array(pts.precision, pa.float64()),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


GROUP_PRIVACY = (
    "group privacy: ε covers one example; a client holding k examples is covered at k·ε "
    "(--unit client --max-examples L covers whole clients)"
)


def group_privacy_caveat(run: Simulated) -> str | None:
    """The line a table shows when clients may hold several examples under ``--unit example``
    with DP (the JSON's ``privacy.note`` says the same), or None.

    It states no count: the largest number of examples a client holds is exact and depends on
    the data. Whether the line shows is decided from what the reader may know: with exact
    values (a simulation's report, not private) whether some client holds more than one
    example; without them, whether the input names clients at all (a client column: the
    table's schema, not its values; `Simulated.grouped`); from a saved release, which cannot
    tell, always.
    """
    cfg = run.config
    if not model_of(cfg.model).TRAITS.adds_noise or cfg.unit is not Unit.EXAMPLE:
        return None
    if not run.simulation:
        return GROUP_PRIVACY
    if run.truth is not None and run.rows is not None and run.clients is not None:
        return GROUP_PRIVACY if run.clients < run.rows else None
    return GROUP_PRIVACY if run.grouped else None


def map_dict(
    cal: CalibrationResult, *, source: str | None = None, score_col: str = "score"
) -> dict[str, Any]:
    """`fedeval.calibration-map/2`: the map in the scores' own units, with its provenance."""

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
    if cal.check is not None:  # an additive field: the noisy map's check against the scores
        doc["shrinkage"] = cal.check.to_dict()
    return doc
