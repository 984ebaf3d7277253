"""95% intervals: coverage on the sample data, the noise model behind them, the bounds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

import fedeval
from fedeval.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.data import read_scored, scored_from_arrays
from fedeval.errors import UsageError
from fedeval.estimate.curves import within_leaf_bounds
from fedeval.estimate.uncertainty import Z95, interval, within_leaf_count_variance
from fedeval.evaluate import evaluate_data
from fedeval.hierarchy import consistent_leaves
from fedeval.simulate import fast_release

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "scores.parquet"
RUNS = 200
# For a normal estimate, a 95% interval is 2·1.96σ wide and the median |error| is 0.674σ:
# a ratio of 5.8. Allow up to 8 (a third wider than calibrated) before calling it too wide.
MAX_WIDTH_TO_ERROR = 8.0


@pytest.fixture(scope="module")
def sample():
    return read_scored(SAMPLE)


def _pooled(ev):
    return [e for m in ev.thresholds for e in (m.precision, m.recall, m.accuracy)]


@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_coverage_on_the_sample_data(sample, model):
    # The test: over 200 seeded simulations, the 95% interval holds the exact value
    # 93–97% of the time, for AUC and for P/R/A (pooled over the ten thresholds).
    auc, pra, widths, errors = [], [], [], []
    for seed in range(RUNS):
        ev = evaluate_data(sample, model=model, seed=seed)
        auc.append(ev.auc.covered)
        for e in _pooled(ev):
            pra.append(e.covered)
            widths.append(e.ci95[1] - e.ci95[0])
            errors.append(e.abs_error)
    auc_cov, pra_cov = np.mean(auc), np.mean(pra)
    ratio = np.median(widths) / np.median(errors)
    print(
        f"{model}: AUC coverage {auc_cov:.3f}, P/R/A coverage {pra_cov:.3f}, "
        f"median width {np.median(widths):.1e}, median error {np.median(errors):.1e}"
    )
    assert 0.93 <= auc_cov <= 0.97
    assert 0.93 <= pra_cov <= 0.97
    assert ratio <= MAX_WIDTH_TO_ERROR


def test_federated_coverage_over_thresholds(sample):
    # Without noise the only uncertainty is where examples sit inside a leaf; a single run is
    # deterministic, so coverage is measured over 200 random thresholds instead of seeds.
    thresholds = np.sort(np.random.default_rng(0).uniform(0.02, 0.98, RUNS))
    ev = evaluate_data(sample, model="federated", thresholds=thresholds, seed=0)
    cov = np.mean([e.covered for e in _pooled(ev)])
    assert 0.93 <= cov <= 0.97
    assert ev.auc.covered


def _consistency_operator(levels, variances):
    sizes = [1 << k for k in levels]
    parts = np.split(np.eye(sum(sizes)), np.cumsum(sizes)[:-1], axis=1)
    return consistent_leaves(parts, variances, levels)


def test_distdp_noise_draws_have_the_mechanism_variance():
    # A range count's variance over the draws must equal σ²·‖Cᵀa‖² (C: consistency operator).
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 5000)
    data = scored_from_arrays(y, np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), keep_scores=False)
    cfg = PrivacyConfig(PrivacyModel.DISTDP, 5, Shape.HIERARCHY, 1.0)
    hist = fast_release(data, cfg, rng).histogram()
    draws = hist.noise_draws(4000, rng)
    a = np.zeros(32)
    a[12:] = 1
    sigma2 = hist.level_variances[0]
    predicted = sigma2 * np.sum((_consistency_operator(cfg.levels, hist.level_variances) @ a) ** 2)
    tp = draws[:, 1] @ a
    dev = tp - tp.mean()
    s2 = dev @ dev / (len(tp) - 1)
    se = math.sqrt((np.mean(dev**4) - s2**2) / len(tp))
    assert abs(s2 - predicted) <= 4 * se


def test_localdp_noise_draws_match_fresh_releases():
    # The normal model of decoded OUE counts must give the spread that fresh releases show.
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 20_000)
    data = scored_from_arrays(y, np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), keep_scores=False)
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, 4, Shape.HIERARCHY, 2.0)
    fresh = np.stack([fast_release(data, cfg, rng).histogram().leaves for _ in range(1500)])
    hist = fast_release(data, cfg, rng).histogram()
    draws = hist.noise_draws(1500, rng)
    a = np.zeros(16)
    a[6:] = 1  # positives with score ≥ 6/16
    s_fresh = np.std(fresh[:, 1] @ a, ddof=1)
    s_draws = np.std(draws[:, 1] @ a, ddof=1)
    # Two sample sds of ~normal data, n = 1500 each: their ratio has sd ≈ √(1/n) ≈ 2.6%; the
    # draws use estimated (not true) counts, so allow 4 sd plus 5% for that.
    assert abs(s_draws / s_fresh - 1) < 4 * math.sqrt(1 / 1500) + 0.05


def test_federated_has_no_noise_draws(sample):
    cfg = PrivacyConfig(PrivacyModel.FEDERATED, 8, Shape.FLAT)
    hist = fast_release(sample, cfg, np.random.default_rng(0)).histogram()
    assert hist.noise_draws(10, np.random.default_rng(0)) is None


def test_within_leaf_count_variance():
    leaves = np.array([10.0, 20.0, 30.0, 40.0])
    # t at a leaf edge: nothing uncertain; in the middle of leaf 2 (30 examples): 30·¼.
    np.testing.assert_allclose(within_leaf_count_variance(leaves, np.array([0.5, 0.625])), [0, 7.5])
    # Negative (noisy) leaves count as empty.
    assert within_leaf_count_variance(np.array([-5.0, 1.0]), np.array([0.25]))[0] == 0


@pytest.mark.parametrize("seed", range(6))
def test_within_leaf_bounds_hold_the_exact_areas(seed):
    # Rigorous: whatever the order inside the leaves, AUC and AP lie between the bounds.
    rng = np.random.default_rng(seed)
    n, h = 3000, int(rng.integers(3, 9))
    y = rng.integers(0, 2, n)
    s = np.round(np.clip(rng.normal(0.45 + 0.15 * y, 0.2), 0, 1), 3)
    leaves = scored_from_arrays(y, s, keep_scores=False).leaf_counts(h).astype(float)
    auc_lo, auc_hi, ap_lo, ap_hi = within_leaf_bounds(leaves)
    assert auc_lo - 1e-12 <= roc_auc_score(y, s) <= auc_hi + 1e-12
    assert ap_lo - 1e-12 <= average_precision_score(y, s) <= ap_hi + 1e-12
    assert auc_hi - auc_lo < 0.5 and ap_hi - ap_lo < 0.5


def test_interval_is_clipped_and_symmetric_inside():
    lo, hi = interval(0.5, 0.01)
    assert lo == pytest.approx(0.5 - Z95 * 0.01) and hi == pytest.approx(0.5 + Z95 * 0.01)
    assert tuple(interval(0.999, 0.01)) == (pytest.approx(0.999 - Z95 * 0.01), 1.0)


def test_intervals_can_be_switched_off_and_are_reproducible():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 2000)
    s = rng.random(2000)
    a = fedeval.evaluate(y, s, model="distdp", seed=5)
    b = fedeval.evaluate(y, s, model="distdp", seed=5)
    assert a.auc.ci95 == b.auc.ci95 and a.auc.ci95 is not None
    from fedeval.data import scored_from_arrays as sfa

    off = evaluate_data(sfa(y, s), model="distdp", seed=5)
    assert off.auc.ci95 == a.auc.ci95
    from fedeval.simulate import simulate

    run = simulate(sfa(y, s), model="distdp", seed=5, ci_draws=0)
    assert run.noise_draws is None
    with pytest.raises(UsageError, match="ci_draws"):
        simulate(sfa(y, s), model="distdp", seed=5, ci_draws=1)


def test_curve_and_ece_intervals_hold_on_the_sample(sample):
    # Conservative by construction (hull of rigorous within-leaf bounds, widened by noise).
    from fedeval.curves import curves_data

    for model in ("federated", "distdp"):
        c = curves_data(sample, model=model, seed=1)
        assert c.roc_auc.covered and c.average_precision.covered
    cal = fedeval.calibration.calibrate_data(sample, model="distdp", seed=1)
    assert cal.ece_raw.covered
