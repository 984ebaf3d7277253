"""The privacy models: fast path equal in distribution to the per-client reference path, and an
empirical check of the ε-DP guarantee on neighbouring inputs (which also catches a mechanism
whose noise is calibrated to the wrong sensitivity)."""

import math

import numpy as np
import pytest
from scipy import stats

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import UsageError
from fedeval.core.hierarchy import consistent_leaves
from fedeval.estimate.metrics import auc_from_buckets
from fedeval.privacy import distdp, localdp
from fedeval.privacy.base import ClientBatch
from fedeval.privacy.decode import decode
from fedeval.privacy.mechanism import Mechanism
from fedeval.protocol.simulate import fast_release, per_client_release
from fedeval.tables.scored import scored_from_arrays

P_REJECT = 1e-3


def small_population(seed: int = 0, with_clients: bool = True):
    rng = np.random.default_rng(seed)
    n = 30
    y = rng.integers(0, 2, n)
    s = np.clip(0.25 + 0.4 * y + 0.3 * rng.random(n), 0, 1)
    clients = rng.integers(0, 12, n) if with_clients else None
    return scored_from_arrays(y, s, client_ids=clients, keep_examples=True)


def _node_tables(a: np.ndarray, b: np.ndarray, j: int) -> np.ndarray:
    values = np.union1d(a[:, j], b[:, j])
    table = np.array([[np.sum(x[:, j] == v) for v in values] for x in (a, b)])
    return table[:, table.sum(axis=0) >= 10]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "epsilon", "with_clients"),
    [(PrivacyModel.DISTDP, 1.0, True), (PrivacyModel.LOCALDP, 2.0, False)],
)
def test_fast_path_equals_per_client_path_in_distribution(model, epsilon, with_clients):
    data = small_population(with_clients=with_clients)
    cfg = PrivacyConfig(model, height=3, shape=Shape.HIERARCHY, epsilon=epsilon)
    rng = np.random.default_rng(7)
    r = 3000
    fast = [fast_release(data, cfg, rng) for _ in range(r)]
    slow = [per_client_release(data, cfg, rng) for _ in range(r)]
    fc = np.stack([x.counts for x in fast])
    sc = np.stack([x.counts for x in slow])
    # Every released node: chi-square on its value distribution (Bonferroni over the nodes).
    pvals = [stats.chi2_contingency(_node_tables(fc, sc, j)).pvalue for j in range(fc.shape[1])]
    assert min(pvals) > P_REJECT / len(pvals)
    if model is PrivacyModel.LOCALDP:
        fr = np.stack([x.reporters for x in fast])
        sr = np.stack([x.reporters for x in slow])
        assert stats.chi2_contingency(_node_tables(fr, sr, 0)).pvalue > P_REJECT

    # A decoded statistic: the AUC estimate from the consistent leaves.
    def auc(rel):
        leaves = decode(rel).leaves
        return float(auc_from_buckets(leaves[0], leaves[1]))

    a_fast = [auc(x) for x in fast]
    a_slow = [auc(x) for x in slow]
    assert stats.ks_2samp(a_fast, a_slow).pvalue > P_REJECT


def test_federated_per_client_sum_is_exact():
    data = small_population()
    cfg = PrivacyConfig(PrivacyModel.FEDERATED, height=3, shape=Shape.HIERARCHY)
    rng = np.random.default_rng(0)
    a, b = fast_release(data, cfg, rng), per_client_release(data, cfg, rng)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.reporters, b.reporters)
    assert a.n_clients == b.n_clients == data.n_clients


def worst_log_ratio_bounds(x: np.ndarray, y: np.ndarray, min_count: int = 300):
    """Over outcomes seen ≥ min_count times under both inputs: the largest estimated
    log P_x(o)/P_y(o), its lower and upper 4-standard-error bounds (delta method)."""
    keys_x, cx = np.unique(x, axis=0, return_counts=True)
    keys_y, cy = np.unique(y, axis=0, return_counts=True)
    index_y = {tuple(k): c for k, c in zip(keys_y, cy, strict=True)}
    best = (-np.inf, -np.inf, -np.inf)
    for k, a in zip(keys_x, cx, strict=True):
        b = index_y.get(tuple(k), 0)
        if a < min_count or b < min_count:
            continue
        pa, pb = a / len(x), b / len(y)
        lr = math.log(pa / pb)
        se = math.sqrt((1 - pa) / a + (1 - pb) / b)
        if lr - 4 * se > best[1]:
            best = (lr, lr - 4 * se, lr + 4 * se)
        if lr + 4 * se > best[2]:
            best = (max(best[0], lr), best[1], lr + 4 * se)
    return best


@pytest.mark.slow
def test_distdp_release_is_epsilon_dp_on_neighbouring_inputs():
    # D' = D without one positive example in leaf 1: it changes one node per released level.
    eps = 1.0
    cfg = PrivacyConfig(PrivacyModel.DISTDP, height=2, shape=Shape.HIERARCHY, epsilon=eps)
    d = np.array([[2, 1, 0, 1], [0, 2, 1, 1]])
    d_prime = d.copy()
    d_prime[1, 1] -= 1
    # Node layout (h = 2): level 1 is [neg 0..1, pos 2..3], level 2 is [neg 4..7, pos 8..11].
    affected = [2, 9]  # the positive class's level-1 cell 0 and level-2 cell 1
    rng = np.random.default_rng(21)
    r = 60_000

    def outputs(leaves):
        out = np.empty((r, 2), np.int64)
        for i in range(r):
            rel = distdp.draw(leaves, 6, cfg, rng)
            out[i] = rel.counts[affected]
        return out

    x, y = outputs(d), outputs(d_prime)
    _, lo, hi = worst_log_ratio_bounds(x, y)
    _, lo2, hi2 = worst_log_ratio_bounds(y, x)
    # The guarantee: no outcome is more than e^ε likelier under one input than the other.
    assert lo <= eps and lo2 <= eps
    # The bound is attained (so the check has power): some outcome reaches ratio e^ε.
    assert max(hi, hi2) >= eps


@pytest.mark.slow
def test_distdp_check_catches_wrong_sensitivity(monkeypatch):
    # Calibrating the hierarchy's noise to Δ = 1 instead of h = 2 doubles the privacy loss.
    eps = 1.0
    cfg = PrivacyConfig(PrivacyModel.DISTDP, height=2, shape=Shape.HIERARCHY, epsilon=eps)
    monkeypatch.setattr(distdp, "alpha", lambda config: math.exp(-config.epsilon / 1))
    d = np.array([[2, 1, 0, 1], [0, 2, 1, 1]])
    d_prime = d.copy()
    d_prime[1, 1] -= 1
    affected = [2, 9]
    rng = np.random.default_rng(22)
    r = 60_000
    x = np.array([distdp.draw(d, 6, cfg, rng).counts[affected] for _ in range(r)])
    y = np.array([distdp.draw(d_prime, 6, cfg, rng).counts[affected] for _ in range(r)])
    _, lo, _ = worst_log_ratio_bounds(x, y)
    _, lo2, _ = worst_log_ratio_bounds(y, x)
    assert max(lo, lo2) > eps


@pytest.mark.slow
def test_localdp_report_is_epsilon_ldp():
    # One example's report under two different inputs: (positive, cell 0) and (negative, cell 1).
    claimed_eps = 1.0
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, height=1, shape=Shape.FLAT, epsilon=claimed_eps)
    rng = np.random.default_rng(23)
    r = 200_000
    clients = np.arange(r)

    def reports(label, cell):
        cells = np.full(r, cell)
        labels = np.full(r, label)
        rep, _ = localdp.client_reports(ClientBatch(cells, labels, clients, r), cfg, r, rng)
        return rep

    x, y = reports(1, 0), reports(0, 1)
    lo = max(worst_log_ratio_bounds(x, y)[1], worst_log_ratio_bounds(y, x)[1])
    hi = max(worst_log_ratio_bounds(x, y)[2], worst_log_ratio_bounds(y, x)[2])
    assert lo <= claimed_eps <= hi
    # A report made at ε = 2 is caught when ε = 1 is claimed.
    cfg2 = PrivacyConfig(PrivacyModel.LOCALDP, height=1, shape=Shape.FLAT, epsilon=2.0)
    x2, _ = localdp.client_reports(
        ClientBatch(np.zeros(r, int), np.ones(r, int), clients, r), cfg2, r, rng
    )
    y2, _ = localdp.client_reports(
        ClientBatch(np.ones(r, int), np.zeros(r, int), clients, r), cfg2, r, rng
    )
    assert max(worst_log_ratio_bounds(x2, y2)[1], worst_log_ratio_bounds(y2, x2)[1]) > claimed_eps


@pytest.mark.slow
def test_distdp_unit_client_is_epsilon_dp_for_a_whole_client():
    # Under --unit client with L = 2, D' = D without one client whose two positive examples sit
    # in the same leaf: the flat release's count moves by 2 = Δ. Noise at α = exp(−ε/2) keeps
    # every outcome's ratio within e^ε, and the bound is attained.
    eps = 1.0
    cfg = PrivacyConfig(
        PrivacyModel.DISTDP, height=1, shape=Shape.FLAT, epsilon=eps, unit="client", max_examples=2
    )
    assert Mechanism(cfg).sensitivity == 2
    d = np.array([[3, 1], [2, 4]])
    d_prime = d.copy()
    d_prime[1, 0] -= 2
    rng = np.random.default_rng(24)
    r = 60_000
    x = np.array([distdp.draw(d, 5, cfg, rng).counts[[2]] for _ in range(r)])
    y = np.array([distdp.draw(d_prime, 5, cfg, rng).counts[[2]] for _ in range(r)])
    lo = max(worst_log_ratio_bounds(x, y)[1], worst_log_ratio_bounds(y, x)[1])
    hi = max(worst_log_ratio_bounds(x, y)[2], worst_log_ratio_bounds(y, x)[2])
    assert lo <= eps <= hi


@pytest.mark.slow
def test_distdp_replace_doubles_the_sensitivity():
    # Replacing one example moves one leaf path down and another up: Δ = 2·levels. Noise for
    # that Δ keeps the ratio within e^ε on two leaves that trade one count.
    eps = 1.0
    cfg = PrivacyConfig(
        PrivacyModel.DISTDP, height=1, shape=Shape.FLAT, epsilon=eps, relation="replace"
    )
    assert Mechanism(cfg).sensitivity == 2
    d = np.array([[3, 1], [2, 4]])
    d_prime = d.copy()
    d_prime[1, 0] -= 1
    d_prime[0, 1] += 1
    rng = np.random.default_rng(26)
    r = 60_000
    x = np.array([distdp.draw(d, 5, cfg, rng).counts[[1, 2]] for _ in range(r)])
    y = np.array([distdp.draw(d_prime, 5, cfg, rng).counts[[1, 2]] for _ in range(r)])
    lo = max(worst_log_ratio_bounds(x, y)[1], worst_log_ratio_bounds(y, x)[1])
    assert lo <= eps


def test_localdp_refuses_add_remove():
    with pytest.raises(UsageError, match="add-remove is not available"):
        PrivacyConfig(
            PrivacyModel.LOCALDP, height=1, shape=Shape.FLAT, epsilon=1.0, relation="add-remove"
        )


def test_localdp_unit_client_sends_exactly_l_reports():
    # Clients with 0..3 examples under L = 3: every client's reports number exactly 3, so the
    # report count says nothing of how many examples it holds.
    cfg = PrivacyConfig(
        PrivacyModel.LOCALDP, height=2, shape=Shape.HIERARCHY, epsilon=1.0, unit="client",
        max_examples=3,
    )  # fmt: skip
    client = np.array([1, 2, 2, 3, 3, 3])
    cells = np.array([0, 1, 2, 3, 0, 1])
    labels = np.array([1, 0, 1, 0, 1, 0])
    _, per_level = localdp.client_reports(
        ClientBatch(cells, labels, client, 4), cfg, 4, np.random.default_rng(0)
    )
    np.testing.assert_array_equal(per_level.sum(axis=1), [3, 3, 3, 3])


@pytest.mark.slow
def test_localdp_unit_client_composes_to_epsilon():
    # A client with L = 2 examples sends two reports at ε/2; their sum changes by at most e^ε
    # between two inputs of the client (both examples moved), and a per-example ε would not.
    eps = 1.0
    cfg = PrivacyConfig(
        PrivacyModel.LOCALDP, height=1, shape=Shape.FLAT, epsilon=eps, unit="client", max_examples=2
    )
    assert localdp.report_epsilon(cfg) == 0.5
    rng = np.random.default_rng(25)
    r = 200_000
    clients = np.repeat(np.arange(r), 2)

    def reports(label, cell, config):
        cells = np.full(2 * r, cell)
        labels = np.full(2 * r, label)
        rep, _ = localdp.client_reports(ClientBatch(cells, labels, clients, r), config, r, rng)
        return rep

    x, y = reports(1, 0, cfg), reports(0, 1, cfg)
    lo = max(worst_log_ratio_bounds(x, y)[1], worst_log_ratio_bounds(y, x)[1])
    hi = max(worst_log_ratio_bounds(x, y)[2], worst_log_ratio_bounds(y, x)[2])
    assert lo <= eps <= hi
    # Each example at the full ε (the unit-example setting) loses up to 2ε for this client.
    per_example = PrivacyConfig(PrivacyModel.LOCALDP, height=1, shape=Shape.FLAT, epsilon=eps)
    x2, y2 = reports(1, 0, per_example), reports(0, 1, per_example)
    assert max(worst_log_ratio_bounds(x2, y2)[1], worst_log_ratio_bounds(y2, x2)[1]) > eps


def test_localdp_decode_weighs_each_cell_by_its_own_variance():
    # A decoded OUE count's variance grows with the count, so the consistency step weighs each
    # cell by its own (taken at a first pass's counts). A sparse range (the few negatives above
    # a high threshold) must stay unbiased and get no more noise than one weight per level
    # gives: 400 paired releases, fixed seed; its mean is within 4 standard errors of the truth.
    rng = np.random.default_rng(5)
    n = 50_000
    y = rng.integers(0, 2, n)
    s = 1 / (1 + np.exp(-rng.normal(np.where(y == 1, 1.0, -1.0), 1.0)))
    data = scored_from_arrays(y, s, keep_scores=False)
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, 5, Shape.HIERARCHY, 5.0)
    rel = fast_release(data, cfg, rng)
    _, variances = localdp.decode(rel)
    n_total = int(rel.reporters.sum())
    for v, n_k, k in zip(variances, rel.reporters, cfg.levels, strict=True):
        assert v.shape == (2, 1 << k)
        mean_cell = localdp.level_variance(n_total, int(n_k), k, 5.0)
        assert v.min() < mean_cell < v.max()  # sparse cells below the level's mean cell
    per_cell, per_level = [], []
    for _ in range(400):
        rel = fast_release(data, cfg, rng)
        per_cell.append(decode(rel).leaves[0, 28:].sum())
        measured, _ = localdp.decode(rel)
        weights = [
            localdp.level_variance(n_total, int(n_k), k, 5.0)
            for n_k, k in zip(rel.reporters, cfg.levels, strict=True)
        ]
        per_level.append(
            consistent_leaves([m[0] for m in measured], weights, cfg.levels)[28:].sum()
        )
    truth = data.leaf_counts(5)[0, 28:].sum()
    assert abs(np.mean(per_cell) - truth) <= 4 * np.std(per_cell) / math.sqrt(400)
    assert np.std(per_cell) < np.std(per_level)
