"""Results are plain data shown through one table (`fedeval.views.render`), the threshold metrics
come from one registry (`fedeval.estimate.metric_registry`), and quality gates read result
objects, agreeing with what they read from the saved documents."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rich.console import Console

import fedeval
from fedeval.api.compare import compare, gateable
from fedeval.api.gates import (
    GateOn,
    Kind,
    judge,
    judge_report,
    parse_gates,
    report_metrics,
    result_metrics,
)
from fedeval.core.hierarchy import mass_at_or_above
from fedeval.estimate.metric_registry import THRESHOLD_METRICS
from fedeval.estimate.metrics import threshold_counts
from fedeval.estimate.uncertainty import count_corners, leaf_cut
from fedeval.views.dicts import curves_csv, evaluation_dict
from fedeval.views.render import Context, Format, formats, render
from fedeval.views.terminal import render_table


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    y = rng.integers(0, 2, 4000)
    return y, np.clip(0.25 * y + 0.5 * rng.random(4000), 0, 0.74)


@pytest.fixture(scope="module")
def ev(data):
    """Thresholds inside leaves, one above every score (precision barely determined)."""
    y, s = data
    return fedeval.evaluate(y, s, model="distdp", epsilon=1.0, thresholds=[0.3, 0.55, 0.9], seed=2)


def _same(a: float | None, b: float | None) -> bool:
    """Equal, a document's null standing for nan."""
    a = math.nan if a is None else a
    b = math.nan if b is None else b
    return (math.isnan(a) and math.isnan(b)) or a == b


def _agree(objects, documents) -> None:
    assert list(objects) == list(documents)
    for name, e in objects.items():
        d = documents[name]
        assert _same(e.estimate, d.estimate), name
        assert (e.ci95 is None) == (d.ci95 is None), name
        if e.ci95 is not None:
            assert all(_same(x, z) for x, z in zip(e.ci95, d.ci95, strict=True)), name


def test_gates_read_the_result_as_they_read_its_document(ev, data):
    y, s = data
    doc = json.loads(json.dumps(ev.to_dict()))
    objects = result_metrics(ev)
    assert {"auc", "ap", "roc_auc_curve", "ece", "precision@0.9", "accuracy@0.55"} <= set(objects)
    _agree(objects, report_metrics(doc))
    cal = fedeval.calibrate(y, s, model="distdp", epsilon=1.0, seed=2)
    _agree(result_metrics(cal), report_metrics(json.loads(json.dumps(cal.to_dict()))))
    assert set(result_metrics(cal)) == {"ece", "ece_calibrated"}
    curves = ev.curves
    _agree(result_metrics(curves), report_metrics(json.loads(json.dumps(curves.to_dict()))))
    specs = ["auc=0.6,precision@0.9=0.5,recall@0.5500=0.3,ap=0.99", "accuracy@0.3=0.4"]
    for on in GateOn:
        gates = parse_gates(specs, Kind.FLOOR) + parse_gates(["ece=0.01"], Kind.CEILING)
        from_object = judge_report(gates, ev, on)
        assert from_object == judge_report(gates, doc, on)
        assert [v.passed for v in from_object] != [True] * len(gates)  # some gate can fail


def test_gates_read_a_comparison_as_its_document(data):
    y, s = data
    rng = np.random.default_rng(5)
    other = np.clip(s + 0.05 * rng.standard_normal(len(s)), 0, 1)
    c = compare(y, s, other, model="distdp", epsilon=2.0, thresholds=[0.3, 0.55], seed=4)
    doc = json.loads(json.dumps(c.to_dict()))
    from_doc = {"auc": doc["metrics"]["auc"], "ap": doc["metrics"]["ap"]}  # as gates read it before
    for row in doc["metrics"]["thresholds"]:
        for m in ("precision", "recall", "accuracy"):
            from_doc[f"{m}@{float(row['threshold'])!r}"] = row[m]
    objects = gateable(c)
    assert list(objects) == list(from_doc)
    for name, e in objects.items():
        d = from_doc[name]
        assert _same(e.estimate, d["estimate"])
        ci = d.get("generalisation_ci95") or d["ci95"]
        assert list(e.ci95) == ci


def test_an_unknown_metric_names_every_threshold_metric_of_the_registry(ev):
    with pytest.raises(fedeval.UsageError) as e:
        judge(parse_gates(["f2@0.3=0.5"], Kind.FLOOR), result_metrics(ev))
    names = "/".join(m.name for m in THRESHOLD_METRICS)
    assert f"{names}@t for t in 0.3, 0.55, 0.9" in str(e.value)


def test_each_registered_metric_is_in_the_report_the_table_and_the_gates(ev):
    rows = evaluation_dict(ev)["metrics"]["thresholds"]
    assert all(list(r) == ["threshold", *(m.name for m in THRESHOLD_METRICS)] for r in rows)
    console = Console(record=True, width=300)
    render_table(ev, console)
    text = console.export_text()
    assert all(f"{m.label} ± 95%" in text for m in THRESHOLD_METRICS)
    gates = [f"{m.name}@0.55=0" for m in THRESHOLD_METRICS]
    assert all(v.passed for v in judge_report(parse_gates(gates, Kind.FLOOR), ev))
    for t in ev.thresholds:
        assert list(t.estimates) == [m.name for m in THRESHOLD_METRICS]
        assert (t.precision, t.recall, t.accuracy) == (t["precision"], t["recall"], t["accuracy"])


@pytest.mark.parametrize("seed", range(5))
def test_each_metrics_bounds_hold_wherever_the_examples_of_t_s_leaf_sit(seed):
    # The worst case over the leaf that holds t: for any share of each class's leaf count that
    # scores ≥ t, the metric on those counts lies inside its bounds (every registered metric).
    rng = np.random.default_rng(seed)
    leaves = rng.integers(0, 40, (2, 16)).astype(float)
    thresholds = rng.random(7)
    corners = count_corners(leaves, thresholds)
    j, _ = leaf_cut(16, thresholds)
    above_leaf = [mass_at_or_above(leaves[c], np.minimum((j + 1) / 16, 1.0)) for c in (0, 1)]
    above_leaf = [np.where(j == 15, 0.0, a) for a in above_leaf]
    p, n = leaves[1].sum(), leaves[0].sum()
    for m in THRESHOLD_METRICS:
        bounds = m.bounds(*corners)
        for a, b in rng.random((200, 2)):
            tp = above_leaf[1] + a * leaves[1, j]
            fp = above_leaf[0] + b * leaves[0, j]
            value = m.value(tp, fp, p, n)
            ok = np.isnan(value) | (
                (bounds[:, 0] - 1e-12 <= value) & (value <= bounds[:, 1] + 1e-12)
            )
            assert ok.all(), (m.name, a, b)
        tp, fp = threshold_counts(leaves, thresholds)
        uniform = m.value(tp, fp, p, n)  # the estimate itself is one of those placements
        assert np.all((bounds[:, 0] - 1e-12 <= uniform) & (uniform <= bounds[:, 1] + 1e-12))


def test_render_dispatches_by_result_type_and_format(ev):
    assert render(ev, Format.JSON, Context("x")) == evaluation_dict(ev, source="x")
    assert render(ev.curves, "csv") == curves_csv(ev.curves)
    shown, direct = Console(record=True, width=160), Console(record=True, width=160)
    render(ev, Format.TABLE, Context("x", console=shown))
    render_table(ev, direct, source="x")
    assert shown.export_text() == direct.export_text()
    assert set(formats("CurveResult")) >= {Format.JSON, Format.TABLE, Format.CSV, Format.PARQUET}
    with pytest.raises(TypeError, match="no csv renderer for a Evaluation"):
        render(ev, Format.CSV)
    with pytest.raises(TypeError, match="no json renderer for a dict"):
        render({}, Format.JSON)


def test_the_multiclass_result_is_in_the_same_table():
    import fedeval.multiclass  # noqa: F401  (its renderers join the table on import)

    assert set(formats("MulticlassResult")) == {Format.JSON, Format.TABLE}
