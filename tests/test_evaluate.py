"""The evaluation API: DP estimates are unbiased with the variance the mechanism predicts, and
the API follows scikit-learn's semantics where they overlap."""

import math

import numpy as np
import pytest

import fedeval
from fedeval.api.evaluate import estimate_metrics, evaluate_data, evaluate_run, threshold_axis
from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import InputError, UsageError
from fedeval.core.hierarchy import consistent_leaves
from fedeval.privacy.decode import decode
from fedeval.privacy.noise import discrete_laplace_variance, laplace_alpha
from fedeval.protocol.simulate import fast_release
from fedeval.tables.scored import scored_from_arrays

THRESHOLDS = np.array([0.25, 0.5, 0.75])  # on the grid of every height used here


def population(n: int = 20_000, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.18), 0, 1)
    return scored_from_arrays(y, s, keep_scores=False)


def metric_vector(data, cfg, rng):
    est = estimate_metrics(decode(fast_release(data, cfg, rng)), THRESHOLDS)
    return np.concatenate([[est.auc], est.precision, est.recall, est.accuracy])


@pytest.mark.parametrize(
    ("model", "epsilon", "shape", "height"),
    [
        ("distdp", 1.0, "flat", 6),
        ("distdp", 1.0, "hierarchy", 6),
        ("localdp", 5.0, "flat", 4),
        ("localdp", 5.0, "hierarchy", 4),
    ],
)
def test_dp_estimates_are_unbiased(model, epsilon, shape, height):
    # The expectation of every noisy estimate is the noiseless estimate from the same leaves:
    # privacy noise adds variance, not bias (ratio estimators carry an O(1/n²) bias, far below
    # the tolerance). Mean over T trials within 4 standard errors.
    data = population()
    truth_cfg = PrivacyConfig(PrivacyModel.FEDERATED, height, Shape(shape))
    truth = metric_vector(data, truth_cfg, np.random.default_rng(0))
    cfg = PrivacyConfig(PrivacyModel(model), height, Shape(shape), epsilon)
    rng = np.random.default_rng(1)
    trials = np.stack([metric_vector(data, cfg, rng) for _ in range(1500)])
    mean, se = trials.mean(axis=0), trials.std(axis=0, ddof=1) / math.sqrt(len(trials))
    assert np.all(se > 0)
    assert np.all(np.abs(mean - truth) <= 4 * se), (mean - truth) / se


def _consistency_operator(levels, variances):
    """Leaves as a linear function of every measured node: one row per node."""
    sizes = [1 << k for k in levels]
    n_nodes = sum(sizes)
    eye = np.eye(n_nodes)
    parts = np.split(eye, np.cumsum(sizes)[:-1], axis=1)
    return consistent_leaves(parts, variances, levels)  # (n_nodes, n_leaves)


@pytest.mark.parametrize("shape", ["flat", "hierarchy"])
def test_distdp_count_variance_matches_the_mechanism(shape):
    # TP(t) after constrained inference is linear in the noisy nodes, so its variance is
    # σ²·Σ_node (a·c_node)² with σ² = 2α/(1 − α)² and c_node the leaves one unit of noise on
    # that node moves. The sample variance must match within 4 of its own standard errors.
    h, eps = 5, 1.0
    cfg = PrivacyConfig(PrivacyModel.DISTDP, h, Shape(shape), eps)
    sigma2 = discrete_laplace_variance(laplace_alpha(eps, len(cfg.levels)))
    op = _consistency_operator(cfg.levels, [sigma2] * len(cfg.levels))
    a = np.zeros(1 << h)
    a[(1 << h) // 2 :] = 1  # leaves with score ≥ 0.5
    predicted = sigma2 * np.sum((op @ a) ** 2)

    data = population(2000)
    rng = np.random.default_rng(5)
    tp = np.array([decode(fast_release(data, cfg, rng)).leaves[1] @ a for _ in range(4000)])
    dev = tp - tp.mean()
    s2 = dev @ dev / (len(tp) - 1)
    se = math.sqrt((np.mean(dev**4) - s2**2) / len(tp))  # from the sample's fourth moment
    assert abs(s2 - predicted) <= 4 * se, (s2, predicted, se)
    if shape == "hierarchy":
        # Consistency must beat using the leaf level alone (h leaves' worth of variance).
        assert predicted < sigma2 * a.sum()


def test_seed_reproduces_and_is_reported():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 3000)
    s = rng.random(3000)
    a = fedeval.evaluate(y, s, model="distdp", seed=42)
    b = fedeval.evaluate(y, s, model="distdp", seed=42)
    c = fedeval.evaluate(y, s, model="distdp")
    assert a.auc.estimate == b.auc.estimate and a.seed == 42
    # A private run draws from the OS CSPRNG and reports no seed; a seeded one says it is not
    # private.
    assert c.seed is None and not c.run.mechanism.seeded
    assert a.run.mechanism.seeded and "NOT private" in a.run.mechanism.guarantee()
    d = fedeval.evaluate(y, s, model="distdp")
    assert d.auc.estimate != c.auc.estimate  # fresh OS entropy each run


def test_pos_label_score_range_and_clients():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 4000)
    s = rng.random(4000) + y * 0.5
    labels = np.where(y == 1, "spam", "ham")
    clients = rng.integers(0, 300, 4000)
    ev = fedeval.evaluate(
        labels,
        s * 10 - 5,
        pos_label="spam",
        score_range=(-5, 10),
        model="federated",
        client_ids=clients,
        thresholds=[0.0, 2.5],
    )
    from sklearn.metrics import recall_score, roc_auc_score

    assert ev.auc.exact == pytest.approx(roc_auc_score(y, s))
    assert ev.thresholds[1].recall.exact == pytest.approx(recall_score(y, s * 10 - 5 >= 2.5))
    assert ev.clients == len(np.unique(clients))
    assert ev.rows == 4000


def test_default_thresholds_follow_the_score_range():
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, 1000)
    ev = fedeval.evaluate(y, rng.random(1000) * 2, score_range=(0, 2), model="federated")
    np.testing.assert_allclose([m.threshold for m in ev.thresholds], np.arange(1, 11) * 2 / 11)


def test_usage_errors():
    y = np.array([0, 1, 0, 1])
    s = np.array([0.1, 0.9, 0.2, 0.8])
    with pytest.raises(UsageError, match="epsilon"):
        fedeval.evaluate(y, s, model="federated", epsilon=1.0)
    with pytest.raises(UsageError, match="epsilon"):
        fedeval.evaluate(y, s, model="distdp", epsilon=-1.0)
    with pytest.raises(UsageError, match="unknown privacy model"):
        fedeval.evaluate(y, s, model="central")
    with pytest.raises(UsageError, match="thresholds"):
        fedeval.evaluate(y, s, model="federated", thresholds=[1.5])
    with pytest.raises(UsageError, match="buckets"):
        fedeval.evaluate(y, s, model="federated", buckets=0)
    with pytest.raises(InputError, match="no positive"):
        fedeval.evaluate(np.zeros(4), s, model="federated")


@pytest.mark.parametrize("model", ["distdp", "localdp"])
def test_a_private_run_without_positives_answers_from_its_release(model):
    """Under DP without exact values the labels' classes are not checked before the release:
    refusing would tell a data set from its neighbour with one positive more. The run answers
    from its noisy release, as `--from` does (an undetermined metric: 0.5 over [0, 1])."""
    y, s = np.zeros(40), np.linspace(0.0, 1.0, 40)
    with pytest.raises(InputError, match="no positive"):  # exact values: nothing to hide
        fedeval.evaluate(y, s, model=model, seed=3)
    e = fedeval.evaluate(y, s, model=model, exact=False, seed=3)
    assert 0.0 <= e.auc.estimate <= 1.0
    assert e.auc.ci95 is not None and e.auc.ci95[0] <= e.auc.estimate <= e.auc.ci95[1]


@pytest.mark.parametrize("model", ["federated", "distdp"])
def test_precision_with_nothing_predicted_positive_is_defined(model):
    # No score reaches 0.9: precision is undefined there (nan, or 0 with a warning in
    # scikit-learn). We report the precision of the top scores, the full [0, 1] interval and
    # a note, in the JSON and the table; recall and accuracy keep their values, and a gate on
    # the precision's lower bound fails safe.
    import json

    from rich.console import Console

    from fedeval.api.gates import Kind, judge, parse_gates, report_metrics
    from fedeval.views.dicts import evaluation_dict
    from fedeval.views.terminal import render_table

    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 5000)
    s = np.clip(0.25 * y + 0.5 * rng.random(5000), 0, 0.74)
    ev = fedeval.evaluate(y, s, model=model, thresholds=[0.5, 0.9], seed=3)
    ok, empty = ev.thresholds
    assert ok.precision.note is None and ok.precision.ci95[0] > 0.5
    p = empty.precision
    assert 0 <= p.estimate <= 1 and p.ci95 == (0.0, 1.0)
    assert "few or no examples score ≥ 0.9" in p.note and "predicted positive" in p.note
    assert math.isnan(p.exact) and p.abs_error is None
    if model == "federated":
        assert p.estimate == 1.0  # the top scores are all positives (score 0.74)
    assert empty.recall.note is None and empty.recall.estimate == pytest.approx(0, abs=0.02)
    assert empty.accuracy.note is None

    doc = json.loads(json.dumps(evaluation_dict(ev)))
    j = doc["metrics"]["thresholds"][1]["precision"]
    assert j["estimate"] == pytest.approx(p.estimate) and j["ci95"] == [0.0, 1.0]
    assert j["note"] == p.note
    assert "note" not in doc["metrics"]["thresholds"][0]["precision"]
    assert "note" not in doc["metrics"]["auc"]

    console = Console(record=True, width=200)
    render_table(ev, console)
    text = console.export_text()
    assert "± [0, 1] †" in text
    assert f"† precision@0.9: {p.note}" in text

    (v,) = judge(parse_gates(["precision@0.9=0.5"], Kind.FLOOR), report_metrics(doc))
    assert v.value == 0.0 and not v.passed


def test_precision_barely_predicted_positive_under_noise_has_a_note():
    # A handful of examples above t under localdp noise: the count is within 2 noise sds of 0
    # but in about 2.3% of releases (3 examples, a noise sd far above 3: P(Z > 2)), so over 20
    # releases at least 17 carry the note (4 or more misses: probability < 0.002), each with
    # [0, 1] and a precision in [0, 1].
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 20_000)
    s = np.clip(0.25 * y + 0.5 * rng.random(20_000), 0, 1)
    s[:3] = 0.97
    noted = 0
    for seed in range(1, 21):
        p = fedeval.evaluate(y, s, model="localdp", thresholds=[0.9], seed=seed).thresholds[0]
        p = p.precision
        if p.note is not None:
            noted += 1
            assert p.ci95 == (0.0, 1.0) and 0 <= p.estimate <= 1
    assert noted >= 17


def test_no_silent_null_when_the_noisy_class_totals_are_not_positive():
    # ε/L = 0.005 per OUE report: the release's positive total can come out negative. Recall,
    # accuracy and AUC are then undetermined: an uninformative 0.5 with [0, 1] and a reason,
    # never nan.
    rng = np.random.default_rng(8)
    y = (rng.random(3000) < 0.1).astype(int)
    s = rng.random(3000)
    clients = rng.integers(0, 30, 3000)
    seen = 0
    for seed in range(40):
        r = fedeval.evaluate(
            y, s, model="localdp", unit="client", max_examples=1000, client_ids=clients,
            seed=seed, ci_draws=20,
        )  # fmt: skip
        estimates = [r.auc] + [e for m in r.thresholds for e in (m.precision, m.recall, m.accuracy)]
        assert all(np.isfinite(e.estimate) for e in estimates)
        if r.histogram.positives <= 0:
            seen += 1
            assert r.auc.estimate == 0.5 and r.auc.ci95 == (0.0, 1.0)
            assert "undetermined" in r.auc.note
            assert all(m.recall.note and m.recall.ci95 == (0.0, 1.0) for m in r.thresholds)
            for area in (r.curves.roc_auc, r.curves.average_precision):
                assert area.estimate == 0.5 and area.ci95 == (0.0, 1.0)
                assert "undetermined" in area.note
    assert seen > 0  # the case was exercised


def _point_mass_data(n: int, seed: int):
    """Half the rows on five exact scores, two of them equal to declared thresholds."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)
    on = rng.random(n) < 0.5
    masses = np.array([0.1, 0.3, 0.45, 0.62, 0.9])
    s[on] = masses[rng.integers(0, 5, on.sum())]
    return y.astype(int), s


DECLARED = [0.3, 0.333, 0.62, 0.7001]  # two on point masses, one just above one


def test_declared_thresholds_are_exact_without_noise_whatever_the_scores():
    # Federated sums are exact and the declared thresholds are cell edges: P/R/A are exact
    # (not interpolated), and so is the interval: it has nothing left to cover.
    y, s = _point_mass_data(30_000, 1)
    ev = fedeval.evaluate(y, s, model="federated", thresholds=DECLARED)
    for m in ev.thresholds:
        for e in (m.precision, m.recall, m.accuracy):
            assert e.estimate == pytest.approx(e.exact, abs=1e-12)
            assert e.ci95[1] - e.ci95[0] == pytest.approx(0.0, abs=1e-12)
    # Asked for later, from the same leaves but off the edges, they are not exact: the
    # interval then spans where the leaf's mass may sit, and holds the truth.
    later = fedeval.evaluate(y, s, model="federated", thresholds=DECLARED, height=12)
    off = evaluate_run(later.run, thresholds=[0.31, 0.6201])
    assert any(m.recall.ci95[1] > m.recall.ci95[0] for m in off.thresholds)
    assert all(m.recall.covered and m.precision.covered for m in off.thresholds)


def test_declared_thresholds_under_localdp_are_unbiased_and_covered():
    # OUE noise is unbiased, and a threshold on a cell edge adds no discretisation: over R
    # releases the mean error of each recall is within 4 standard errors of 0, and the 95%
    # intervals cover. With R·4 = 160 intervals at nominal 0.95 (sd 1.7%, more with the
    # correlation between thresholds of one release), coverage below 0.85 would be a real miss.
    y, s = _point_mass_data(40_000, 2)
    data = scored_from_arrays(y, s, axis=threshold_axis((0, 1), DECLARED), resolution=10)
    errs, covered = [], []
    for r in range(40):
        ev = evaluate_data(
            data, model="localdp", epsilon=5.0, thresholds=DECLARED, seed=r, ci_draws=60
        )
        errs.append([m.recall.estimate - m.recall.exact for m in ev.thresholds])
        covered += [m.recall.covered for m in ev.thresholds]
    errs = np.array(errs)
    se = errs.std(axis=0, ddof=1) / np.sqrt(len(errs))
    assert np.all(np.abs(errs.mean(axis=0)) < 4 * se + 1e-12)
    assert np.mean(covered) >= 0.85


def test_saved_release_keeps_the_cell_edges(tmp_path):
    from fedeval.documents.release_file import load_release, save_release
    from fedeval.protocol.simulate import Simulated

    y, s = _point_mass_data(20_000, 3)
    ev = fedeval.evaluate(y, s, model="distdp", thresholds=DECLARED, seed=4)
    assert not ev.run.axis.is_linear
    save_release(tmp_path / "r.fedeval", ev.run.release, ev.run.axis)
    release, axis = load_release(tmp_path / "r.fedeval")
    assert axis == ev.run.axis
    again = evaluate_run(Simulated.from_release(release, axis, seed=4))
    assert [m.recall.estimate for m in again.thresholds] == [
        m.recall.estimate for m in evaluate_run(ev.run).thresholds
    ]


def test_a_height_too_coarse_for_the_thresholds_reads_linearly():
    y, s = _point_mass_data(5_000, 5)
    ev = fedeval.evaluate(y, s, model="distdp", thresholds=np.linspace(0.05, 0.95, 19), height=3)
    assert ev.run.axis.is_linear and ev.run.config.height == 3
    assert all(m.recall.ci95 is not None for m in ev.thresholds)
