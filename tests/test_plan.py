"""The planner: its reference populations are what they claim, its predictions scale as the
papers say and match errors measured on rows drawn from the same model, and `fedeval plan`
reports them."""

import json
import math
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score
from typer.testing import CliRunner

import fedeval.api.plan
from fedeval.api.evaluate import DEFAULT_THRESHOLDS, estimate_metrics, threshold_axis
from fedeval.api.plan import plan, population_needed
from fedeval.api.plan_population import binormal_density, reference_population
from fedeval.cli import app
from fedeval.core.config import PrivacyModel
from fedeval.core.errors import UsageError
from fedeval.core.params import (
    PROBE_SHARE,
    auto_quantiles,
    oue_sigma2,
    probe_height,
    resolve_config,
)
from fedeval.estimate import metric_registry
from fedeval.estimate.metrics import auc_from_buckets
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import read_scored, scored_from_arrays

METRICS = ("auc", "precision", "recall", "accuracy")
THRESHOLDS = np.asarray(DEFAULT_THRESHOLDS)

runner = CliRunner()


def binormal_arrays(n: int, auc: float, rng: np.random.Generator):
    """n real rows from the planner's binormal model: logit ~ N(±d′/2, 1), d′ = √2·Φ⁻¹(AUC),
    half of them positive on average."""
    d = math.sqrt(2) * norm.ppf(auc)
    y = (rng.random(n) < 0.5).astype(np.int8)
    logit = rng.normal(np.where(y == 1, d / 2, -d / 2), 1.0)
    return y, 1 / (1 + np.exp(-logit))


def exact_metrics(y: np.ndarray, s: np.ndarray):
    """AUC (scikit-learn) and P/R/A at the default thresholds, counted directly."""
    tp = np.array([np.sum((s >= t) & (y == 1)) for t in THRESHOLDS], dtype=float)
    fp = np.array([np.sum((s >= t) & (y == 0)) for t in THRESHOLDS], dtype=float)
    pos, neg = float(np.sum(y == 1)), float(np.sum(y == 0))
    return roc_auc_score(y, s), tp / (tp + fp), tp / pos, (tp + neg - fp) / (pos + neg)


def measured_errors(y, s, model: str, epsilon: float, seeds) -> np.ndarray:
    """|AUC error| and the mean over thresholds of |P|, |R|, |A| errors, one row per seed (the
    definition `fedeval.api.plan.Prediction` uses). The estimates are evaluate_data's: it runs
    simulate and estimate_metrics, then intervals and curves, which cost 50× more."""
    data = scored_from_arrays(y, s, keep_scores=False, axis=threshold_axis((0.0, 1.0), None))
    auc, p, r, a = exact_metrics(y, s)
    out = []
    for seed in seeds:
        run = simulate(data, model=model, epsilon=epsilon, seed=seed, ci_draws=0)
        est = estimate_metrics(run.histogram, run.to_unit(THRESHOLDS))
        out.append(
            [
                abs(est.auc - auc),
                np.nanmean(np.abs(est.precision - p)),
                np.nanmean(np.abs(est.recall - r)),
                np.nanmean(np.abs(est.accuracy - a)),
            ]
        )
    return np.asarray(out)


# --- the reference population ----------------------------------------------------------------


@pytest.mark.parametrize("auc", [0.5, 0.6, 0.85, 0.95])
def test_binormal_density_is_a_distribution_with_the_requested_auc(auc):
    # 2^16 cells: ties inside a cell are counted half, an error far below 1e-3 at this width.
    neg = binormal_density(False, auc, 1 << 16)
    pos = binormal_density(True, auc, 1 << 16)
    for dens in (neg, pos):
        assert np.all(dens >= 0)
        assert dens.sum() == pytest.approx(1.0, abs=1e-12)
    assert float(auc_from_buckets(neg, pos)) == pytest.approx(auc, abs=1e-3)


@pytest.mark.parametrize("like", [False, True])
def test_reference_population_has_the_requested_rows_and_positives(like):
    rng = np.random.default_rng(0)
    pilot = scored_from_arrays(*binormal_arrays(3000, 0.8, rng)) if like else None
    pop = reference_population(12_345, 0.3, rng, like=pilot)
    assert pop.rows == pop.n_clients == 12_345
    assert pop.fine_counts.sum() == 12_345
    assert pop.positives == round(12_345 * 0.3)
    assert pop.negatives == 12_345 - round(12_345 * 0.3)


def test_a_pilots_point_masses_stay_tied_in_the_population():
    # A pilot whose scores are exactly 0 or 1 (both classes at each, as saturated scores are):
    # each point mass is one value of the population, so the population's own AUC (at the
    # reference resolution) is the ties' AUC, pairs at one value counting half, whatever the
    # draw. Spread over the fine cells a pilot cell covers (the old population), the order
    # inside a mass was drawn at random: the truth moved by ~1e-4 from draw to draw and the
    # AUC error predicted for saturated scores was 2.8x the measured.
    rng = np.random.default_rng(3)
    y = rng.random(4000) < 0.4
    s = np.where(rng.random(4000) < np.where(y, 0.8, 0.2), 1.0, 0.0)
    pilot = scored_from_arrays(y.astype(np.int8), s)
    pop = reference_population(50_000, 0.4, rng, like=pilot)
    fine = pop.leaf_counts(20)
    assert np.count_nonzero(fine.sum(axis=0)) == 2
    neg, pos = fine.astype(float)
    ties = float(auc_from_buckets(neg, pos))
    coarse = float(auc_from_buckets(*pop.leaf_counts(1).astype(float)))
    assert ties == pytest.approx(coarse, abs=1e-12)


def test_a_pilots_singletons_are_spread_over_their_cells():
    # Distinct smooth scores (one example a pilot cell) are spread evenly over the fine cells
    # each pilot cell covers: the population is smooth below the pilot's resolution.
    rng = np.random.default_rng(4)
    y, s = binormal_arrays(500, 0.8, rng)
    pilot = scored_from_arrays(y, s)
    held = np.count_nonzero(pilot.leaf_counts(pilot.resolution).sum(axis=0))
    pop = reference_population(200_000, 0.5, rng, like=pilot)
    # each pilot cell of 2^-16 covers ~16 fine cells: about 16x as many are occupied
    assert np.count_nonzero(pop.leaf_counts(20).sum(axis=0)) > 10 * held


@pytest.mark.parametrize("label", [0, 1])
def test_a_pilot_without_a_class_is_refused_with_its_reason(label):
    rng = np.random.default_rng(5)
    pilot = scored_from_arrays(np.full(300, label, np.int8), rng.random(300))
    for fraction in (None, 0.3):  # the pilot's own share (0 or 1) or one given
        with pytest.raises(UsageError, match=r"pilot holds no (positive|negative) examples"):
            plan(20_000, like=pilot, positives_fraction=fraction)


def test_binormal_population_follows_the_model_on_its_own_axis():
    # The cells are those of evaluate's axis (default thresholds on edges), not equal ones: the
    # expected count of each cell is the binormal mass between the axis's edges. A density
    # taken on equal cells but put on this axis moves mass by up to 1e-6 a cell, and the
    # planner's reference AUC with it (compare's gate test saw a 27% wider half-width).
    rng = np.random.default_rng(0)
    pop = reference_population(2_000_000, 0.5, rng, auc=0.9)
    edges = pop.axis.from_unit(np.linspace(0.0, 1.0, (1 << 20) + 1))
    for c in (0, 1):
        dens = binormal_density(c == 1, 0.9, 1 << 20, edges)
        expected = 1_000_000 * dens
        # Coarsened to 2^10 cells, each a binomial count: within 5 sd of its expectation.
        got = pop.fine_counts[c].reshape(1024, -1).sum(axis=1)
        want = expected.reshape(1024, -1).sum(axis=1)
        assert np.all(np.abs(got - want) <= 5 * np.sqrt(want + 1)), c
        # The same check fails for a density on equal cells (this test tells them apart).
        equal = (1_000_000 * binormal_density(c == 1, 0.9, 1 << 20)).reshape(1024, -1).sum(axis=1)
        assert not np.all(np.abs(got - equal) <= 5 * np.sqrt(equal + 1)), c


# --- predictions: scaling --------------------------------------------------------------------


def test_federated_prediction_is_tiny():
    # Federated releases are exact: only the discretisation at h = 16 is left (≈ 2^-16).
    pred, _ = plan(100_000, model="federated")
    assert pred.config.model is PrivacyModel.FEDERATED
    assert pred.pra <= 1e-4
    assert pred.auc <= 1e-4


@pytest.mark.parametrize("like", [False, True])
def test_federated_prediction_has_no_interpolation_term_at_aligned_thresholds(like):
    # The default thresholds are cell edges of every height ≥ 4 (as evaluate reads data), so a
    # federated release gives P/R/A exactly even at h = 4, 5; on a linear axis the leaf that
    # holds 1/11 at h = 4 is taken as uniform and the error is of order 1e-2.
    rng = np.random.default_rng(3)
    pilot = scored_from_arrays(*binormal_arrays(5000, 0.8, rng)) if like else None
    _, coarse = plan(20_000, model="federated", like=pilot, heights=range(4, 6), runs=1)
    for pred in coarse:
        assert pred.precision == pred.recall == pred.accuracy == 0.0, pred
        assert pred.auc > 1e-4  # the AUC still has its within-leaf term at h = 4, 5
    pop = reference_population(20_000, 0.5, rng, like=pilot)
    lo, hi = pop.score_range
    edges = pop.axis.to_unit(lo + (hi - lo) * THRESHOLDS) * 16
    np.testing.assert_array_equal(edges, np.round(edges))


def test_distdp_prediction_falls_with_n_and_with_epsilon():
    # Table 1: P/R/A ∝ (εn)^(-2/3), AUC ∝ 1/(εn) (+ 1/B²). 100× the rows should cut P/R/A
    # about 21× and AUC far more; 10× the ε cuts P/R/A about 4.6×. Asserting half of each
    # leaves room for the 20-draw Monte-Carlo error and for the discretisation, which the
    # auto height only balances approximately.
    small, _ = plan(10_000, model="distdp", epsilon=1.0)
    large, _ = plan(1_000_000, model="distdp", epsilon=1.0)
    assert large.pra < small.pra / 10
    assert large.auc < small.auc / 10
    for m in ("precision", "recall", "accuracy"):
        assert getattr(large, m) < getattr(small, m) / 10, m

    weak, _ = plan(100_000, model="distdp", epsilon=0.5)
    strong, _ = plan(100_000, model="distdp", epsilon=5.0)
    assert strong.pra < weak.pra / 2.3
    assert strong.auc < weak.auc / 2.3


def test_plan_recommends_what_auto_resolves_and_heights_are_optional():
    pred, others = plan(50_000, model="localdp", epsilon=2.0, heights=range(3, 5), runs=5)
    # `auto` under DP is two-phase: the probe's rule, here on the population's exact totals.
    h = probe_height("localdp", negatives=25_000, positives=25_000, epsilon=2.0,
                     reports=50_000, min_height=4)  # fmt: skip
    expected = resolve_config("localdp", n=50_000, epsilon=2.0, min_height=4)
    assert expected.probed and pred.config == replace(expected, height=h)
    assert [p.config.height for p in others] == [3, 4]


@pytest.mark.slow
def test_prediction_matches_errors_measured_on_rows_from_the_same_model():
    # Real rows drawn from the binormal model, released and estimated as evaluate_data does,
    # errors against exact values computed independently, beside the planner's prediction for
    # the same n and ε. The distribution is the same, so only Monte-Carlo noise separates them.
    #
    # The tolerance, from a calibration run (20 populations × 10 seeds at n = 2·10⁴ and 10⁵,
    # distdp ε = 1 and OUE ε = 5): one draw's |error| has a coefficient of variation ≤ 0.83
    # for AUC (the |·| of one roughly normal error) and ≤ 0.46 for P/R/A (a mean over ten
    # thresholds); the population itself (which rows fall inside the leaves that hold the
    # thresholds) adds ≤ 0.14 per population (≤ 0.08 at n = 2·10⁴). Here 8 populations × 50
    # seeds are measured against 4 plans × 100 noise draws, so the standard deviation of
    # log(measured / predicted) is at most
    #   AUC:   √(0.83²/400 + 0.83²/400 + 0.14²/8 + 0.14²/4) ≈ 0.10,
    #   P/R/A: √(0.46²/400 + 0.46²/400 + 0.14²/8 + 0.14²/4) ≈ 0.09,
    # and a factor 1.5 (|log| = 0.41) is 3.9 of them for AUC, 4.5 for P/R/A: it will not flake, yet
    # it catches any real mismatch (a wrong height, noise scale, truth or error definition
    # moves these ratios by 2× or more). The calibration run's grand ratios were 0.90–1.09.
    n, eps, seeds = 20_000, 1.0, 50
    rng = np.random.default_rng(11)
    measured = [
        measured_errors(
            *binormal_arrays(n, 0.85, rng), "distdp", eps, range(k * seeds, (k + 1) * seeds)
        )
        for k in range(8)
    ]
    predicted = []
    for k in range(4):
        pred, _ = plan(n, model="distdp", epsilon=eps, seed=100 + k, runs=100)
        predicted.append([getattr(pred, m) for m in METRICS])
    ratio = np.concatenate(measured).mean(axis=0) / np.mean(predicted, axis=0)
    assert np.all((ratio > 1 / 1.5) & (ratio < 1.5)), dict(zip(METRICS, ratio, strict=True))


# --- the population needed -------------------------------------------------------------------


@pytest.mark.slow
def test_population_needed_is_the_smallest_that_meets_the_target():
    target = 2e-3
    rows = population_needed(target, model="distdp", epsilon=1.0)
    assert rows is not None
    # Two significant digits: the search stops within 5% and rounds up.
    assert float(f"{rows:.2g}") == rows
    at, _ = plan(rows, model="distdp", epsilon=1.0)
    below, _ = plan(int(rows / 1.2), model="distdp", epsilon=1.0)
    assert at.pra <= target < below.pra


def test_population_needed_is_none_when_max_rows_is_too_small():
    assert population_needed(1e-6, model="distdp", epsilon=1.0, max_rows=20_000) is None


# --- auto_quantiles --------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["distdp", "localdp"])
@pytest.mark.parametrize("eps", [0.5, 1.0, 5.0])
@pytest.mark.parametrize("n", [100, 2_000, 20_000, 50_000, 300_000, 10**7])
def test_auto_quantiles_follows_its_rule(model, eps, n):
    # Q ≈ √(strength)/2 rounded to a power of two (strength εn, or n/σ²_OUE), within [16, 256].
    q = auto_quantiles(model, n, eps)
    strength = eps * n if model == "distdp" else n / oue_sigma2(eps)
    target = math.sqrt(strength) / 2
    assert 16 <= q <= 256
    assert q & (q - 1) == 0  # a power of two
    if q == 16:
        assert target <= 16 * math.sqrt(2)
    elif q == 256:
        assert target >= 256 / math.sqrt(2)
    else:
        assert q / math.sqrt(2) <= target <= q * math.sqrt(2)


def test_auto_quantiles_examples():
    assert auto_quantiles("federated", 1_000, None) == 256
    assert auto_quantiles("distdp", 20_000, 1.0) == 64  # √(2·10⁴)/2 ≈ 71
    assert auto_quantiles("distdp", 50_000, 1.0) == 128  # ≈ 112
    assert auto_quantiles("distdp", 1_000, 1.0) == 16  # ≈ 16, the floor
    assert auto_quantiles("distdp", 10**8, 1.0) == 256  # the ceiling


# --- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: plan(99),
        lambda: plan(1000.0),
        lambda: plan(1000, positives_fraction=0.0),
        lambda: plan(1000, positives_fraction=1.0),
        lambda: plan(1000, model="central"),
        lambda: population_needed(-0.01),
        lambda: population_needed(0.0),
        lambda: population_needed(0.01, metric="f1"),
        lambda: plan(1000, auc=1.0),
        lambda: plan(1000, auc=0.0),
        lambda: plan(1000, auc=float("nan")),
        lambda: plan(1000, seed=-1),
    ],
    ids=[
        "rows<100",
        "rows-float",
        "fraction-0",
        "fraction-1",
        "model",
        "negative-target",
        "zero-target",
        "metric",
        "auc-1",
        "auc-0",
        "auc-nan",
        "seed-negative",
    ],
)
def test_usage_errors(call):
    with pytest.raises(UsageError):
        call()


# --- the command -----------------------------------------------------------------------------


def invoke_json(*args: str) -> dict:
    result = runner.invoke(app, ["plan", *args, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_cli_plan_json_has_the_documented_keys():
    doc = invoke_json("--rows", "20000", "--model", "distdp")
    assert doc["schema"] == "fedeval.plan/1"
    assert doc["rows"] == 20_000
    # `auto` under DP is two-phase: the plan states the probe's share of ε.
    assert doc["privacy"] == {
        "model": "distdp",
        "epsilon": 1.0,
        "probe_share": PROBE_SHARE,
        "probe": "0.05·ε buys noisy class totals that choose h; the tree gets 0.95·ε",
    }
    rec = doc["recommended"]
    assert set(rec) >= {"shape", "height", "leaves", "quantiles", "calibration_buckets"}
    h = probe_height("distdp", negatives=10_000, positives=10_000, epsilon=0.95, min_height=4)
    cfg = replace(resolve_config("distdp", n=20_000), height=h)
    assert (rec["shape"], rec["height"], rec["leaves"]) == (
        cfg.shape.value,
        cfg.height,
        cfg.n_leaves,
    )
    assert rec["quantiles"] == auto_quantiles("distdp", 20_000, 1.0)
    err = doc["expected_abs_error"]
    assert set(err) == set(METRICS)
    assert all(0 < v < 0.05 for v in err.values()), err
    # The command reports what the API predicts (same seed).
    pred, _ = plan(20_000, model="distdp")
    assert err == {m: getattr(pred, m) for m in METRICS}
    assert doc["target"] is None


def test_cli_plan_target_error_fills_rows_needed(monkeypatch):
    # The search itself is tested above through the API; here, that the command passes the
    # target and the reference on and reports the answer (a spy keeps this test fast).
    calls = []

    def spy(target, **kwargs):
        calls.append((target, kwargs))
        return 123_000

    monkeypatch.setattr(fedeval.api.plan, "population_needed", spy)
    doc = invoke_json(
        "--rows", "20000", "--epsilon", "2", "--target-error", "0.01", "--metric", "auc"
    )
    assert doc["target"] == {"error": 0.01, "metric": "auc", "rows_needed": 123_000}
    ((target, kwargs),) = calls
    assert target == 0.01
    assert kwargs["metric"] == "auc"
    assert kwargs["epsilon"] == 2.0
    assert PrivacyModel(kwargs["model"]) is PrivacyModel.DISTDP


def test_cli_plan_like_uses_a_scored_file(tmp_path):
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 2000).astype(np.int8)
    s = np.clip(0.35 * y + 0.65 * rng.random(2000), 0, 1)
    path = tmp_path / "pilot.parquet"
    pq.write_table(pa.table({"score": s, "label": y}), path)
    doc = invoke_json("--rows", "20000", "--like", str(path))
    assert doc["reference"] == {"source": str(path)}
    like = read_scored(path, keep_scores=False)
    # the positive share, like the score distribution, comes from the file (issue 14)
    assert doc["positives_fraction"] == like.positives / like.rows
    pred, _ = plan(20_000, like=like, positives_fraction=like.positives / like.rows)
    assert doc["expected_abs_error"] == {m: getattr(pred, m) for m in METRICS}


def test_cli_plan_rejects_a_bad_fraction():
    result = runner.invoke(app, ["plan", "--rows", "20000", "--positives-fraction", "1"])
    assert result.exit_code == 2


@pytest.mark.slow
def test_plan_report_is_the_cli_document():
    from fedeval.api.plan import plan_report

    args = ["--rows", "5000", "--model", "distdp", "--epsilon", "1", "--target-error", "0.01"]
    cli = invoke_json(*args)
    lib = plan_report(5000, model="distdp", epsilon=1.0, target_error=0.01)
    assert json.loads(lib.to_json()) == cli
    assert cli["target"]["rows_needed"] == lib.rows_needed and lib.rows_needed is not None


def test_plan_report_needs_rows_or_a_pilot():
    from fedeval.api.plan import plan_report

    with pytest.raises(UsageError, match="`rows`"):
        plan_report()


def test_plan_tells_its_progress_after_each_prediction():
    told = []
    plan(
        1000, model="distdp", heights=range(2, 5), runs=2, progress=lambda d, t: told.append((d, t))
    )
    assert told == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_plan_takes_the_pilots_positive_share_by_default():
    # The library's default is the command's: the pilot's share, not 0.5 (planning 2% positives
    # as 50% predicts a precision error several times too small).
    rng = np.random.default_rng(3)
    y = rng.random(20_000) < 0.02
    s = 1 / (1 + np.exp(-(2.0 * y + rng.standard_normal(y.size) - 2.5)))
    pilot = scored_from_arrays(y.astype(np.int8), s, keep_scores=False)
    given, _ = plan(20_000, model="distdp", like=pilot, positives_fraction=y.mean())
    default, _ = plan(20_000, model="distdp", like=pilot)
    half, _ = plan(20_000, model="distdp", like=pilot, positives_fraction=0.5)
    assert default == given
    assert default.precision > 3 * half.precision


def test_a_metric_no_draw_determines_is_undetermined_not_a_refusal(monkeypatch):
    # Recall is undefined in a draw whose noisy positives are ≤ 0 at every threshold: averaged
    # over the draws that define it, NaN (JSON null, "undetermined") only where none does, and
    # the other metrics are still predicted.
    real = metric_registry.threshold_values

    def no_recall(hist, thresholds):
        values = real(hist, thresholds)
        return values | {"recall": np.full_like(values["recall"], np.nan)}

    monkeypatch.setattr(metric_registry, "threshold_values", no_recall)
    result = CliRunner().invoke(app, ["plan", "--rows", "5000", "-m", "distdp", "-f", "json"])
    assert result.exit_code == 0, result.output
    err = json.loads(result.stdout)["expected_abs_error"]
    assert err["recall"] is None
    assert all(err[m] > 0 for m in ("auc", "precision", "accuracy"))
    table = CliRunner().invoke(app, ["plan", "--rows", "5000", "-m", "distdp"])
    assert table.exit_code == 0
    assert "undetermined: recall" in table.stdout


def test_binormal_plan_says_which_data_it_cannot_predict():
    result = CliRunner().invoke(app, ["plan", "--rows", "5000", "-m", "distdp", "-f", "json"])
    ref = json.loads(result.stdout)["reference"]
    assert ref["model"] == "binormal"
    assert "ties" in ref["cannot_predict"] and "--like" in ref["cannot_predict"]


# --- data the binormal reference cannot stand for: a pilot ------------------------------------


def grid_arrays(n: int, rng: np.random.Generator):
    """5% positives whose scores are rounded to 0.01 and sit low (95% of them in a few cells)."""
    y = rng.random(n) < 0.05
    z = rng.normal(np.where(y, -0.5, -3.5), np.where(y, 1.5, 1.2))
    return y, np.round(1 / (1 + np.exp(-z)), 2)


def test_a_pilots_prediction_draws_the_probe_as_the_release_does():
    # Under localdp at ε = 5 the probe's noise takes the tree coarser than the pilot's exact
    # histogram would, and on scores piled in a few cells a coarser tree costs the AUC 2-3x: a
    # planner that fixed the height from the exact histogram (h = 6 here) predicted 2.5x less
    # than evaluate's error on such data (benchmarks/plan_families.py, grid localdp). The
    # planner now draws the probe in every predicted release, as evaluate does, and reports
    # the height those draws chose most often: the height evaluate's releases take.
    rng = np.random.default_rng(3)
    y, s = grid_arrays(120_000, rng)
    data = scored_from_arrays(y[:100_000], s[:100_000], keep_scores=False,
                              axis=threshold_axis((0.0, 1.0), None))  # fmt: skip
    chosen = [
        simulate(data, model="localdp", epsilon=5.0, seed=seed, ci_draws=0).config.height
        for seed in range(20)
    ]
    pilot = scored_from_arrays(y[100_000:], s[100_000:], keep_scores=False)
    pred, _ = plan(100_000, model="localdp", epsilon=5.0, like=pilot, runs=20)
    assert pred.config.height == np.bincount(chosen).argmax()


def test_plan_names_the_thresholds_where_precision_is_sparse():
    # Scores squeezed into [0.45, 0.55]: above 0.55 nothing scores, and evaluate reports the
    # precision there as sparse (over [0, 1], with a note). The planner leaves those thresholds
    # out of the precision's error and names them; below 0.45 every example counts.
    rng = np.random.default_rng(5)
    y = rng.random(30_000) < 0.3
    s = np.clip(0.5 + 0.02 * rng.standard_normal(30_000) + 0.01 * y, 0.45, 0.55)
    pilot = scored_from_arrays(y, s, keep_scores=False)
    pred, _ = plan(100_000, model="distdp", epsilon=1.0, like=pilot, runs=5)
    above = [t for t in THRESHOLDS if t > 0.56]
    below = [t for t in THRESHOLDS if t < 0.44]
    assert set(np.round(above, 9)) <= set(np.round(pred.sparse_thresholds, 9))
    assert not set(np.round(below, 9)) & set(np.round(pred.sparse_thresholds, 9))
    assert math.isfinite(pred.precision)
