"""compare and plan list the threshold metrics of the registry, not a hand-written trio: a
metric registered in `fedeval.estimate.metric_registry.THRESHOLD_METRICS` appears in compare's
differences, document and table, in plan's predicted errors (library, JSON and table) and in
what `plan --detect` accepts."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from rich.console import Console

from fedeval.api.compare import compare
from fedeval.api.compare_plan import parse_detect
from fedeval.api.plan import plan, plan_report
from fedeval.estimate import metric_registry
from fedeval.estimate.metric_registry import ThresholdMetric
from fedeval.estimate.uncertainty import worst_case
from fedeval.views.render import Context, Format, render


def specificity(tp, fp, positives, negatives):
    """TN/N = 1 − FP/N (nan where N ≤ 0): constant in TP and falling with FP, so `worst_case`
    bounds it."""
    fp, n = np.asarray(fp, float), np.asarray(negatives, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, 1.0 - fp / n, np.nan)


THROWAWAY = ThresholdMetric("specificity", "specificity", specificity, worst_case(specificity))


@pytest.fixture
def registered(monkeypatch):
    """The registry with one more metric, in every module that bound it by name."""
    metrics = (*metric_registry.THRESHOLD_METRICS, THROWAWAY)
    names = tuple(m.name for m in metrics)
    for module in [m for name, m in sys.modules.items() if name.startswith("fedeval")]:
        if hasattr(module, "THRESHOLD_METRICS"):
            monkeypatch.setattr(module, "THRESHOLD_METRICS", metrics)
        if hasattr(module, "THRESHOLD_METRIC_NAMES"):
            monkeypatch.setattr(module, "THRESHOLD_METRIC_NAMES", names)


def test_compare_shows_a_registered_metric(registered):
    rng = np.random.default_rng(5)
    y = rng.random(3000) < 0.4
    base = np.clip(0.3 + 0.3 * y + 0.2 * rng.standard_normal(y.size), 0, 1)
    cand = np.clip(0.25 + 0.4 * y + 0.2 * rng.standard_normal(y.size), 0, 1)
    c = compare(y, base, cand, model="federated", seed=1, thresholds=[0.5], ci_draws=0)
    d = c["specificity@0.5"]
    exact = np.mean(cand[~y] < 0.5) - np.mean(base[~y] < 0.5)
    # federated: exact sums, and a declared threshold is a cell edge
    assert d.difference.estimate == pytest.approx(exact, abs=1e-12)
    doc = render(c, Format.JSON)
    assert "specificity" in doc["metrics"]["thresholds"][0]
    console = Console(record=True, width=200)
    render(c, Format.TABLE, Context(console=console))
    assert "Δ specificity" in console.export_text()


def test_plan_predicts_a_registered_metric(registered):
    best, by_height = plan(5000, model="distdp", heights=range(6, 7), runs=3)
    assert set(best.thresholds) == {"precision", "recall", "accuracy", "specificity"}
    assert 0 < best.thresholds["specificity"] < 0.25
    assert best.pra >= best.thresholds["specificity"]
    assert "specificity" in by_height[0].thresholds
    report = json.loads(plan_report(5000, model="distdp").to_json())
    assert report["expected_abs_error"]["specificity"] > 0


def test_plan_command_shows_a_registered_metric(registered, cli):
    table = cli("plan", "--rows", "5000", "-m", "distdp", "--heights")
    assert table.exit_code == 0, table.output
    assert table.stdout.count("specificity") == 2  # the errors, and the column by height


def test_plan_detect_accepts_a_registered_metric(registered):
    assert parse_detect("specificity@0.5=0.01") == ("specificity@0.5", 0.01, 0.5)
