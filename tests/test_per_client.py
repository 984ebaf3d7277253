"""The per-client path's sparse shares: Pólya by compound Poisson has Pólya's distribution, and
a batch's summed reports are its dense reports summed, draw for draw."""

import numpy as np
import pytest
from scipy import stats

from fedeval.config import PrivacyModel
from fedeval.params import resolve_config
from fedeval.privacy import distdp, federated
from fedeval.privacy.noise import dense, polya, polya_events, polya_share, polya_share_events


@pytest.mark.parametrize(("r", "alpha"), [(0.002, 0.9), (0.3, 0.7), (1.0, 0.5), (2.5, 0.95)])
def test_polya_events_have_the_polya_distribution(r, alpha):
    rng = np.random.default_rng(int(r * 1000 + alpha * 100))
    n = 200_000
    at, value = polya_events(r, alpha, n, rng)
    sparse = np.bincount(at, weights=value, minlength=n).astype(np.int64)
    direct = polya(r, alpha, n, rng)
    # Two-sample chi-square over the values both samples hold (tails pooled).
    top = int(np.quantile(direct, 0.999)) + 1
    a = np.bincount(np.minimum(sparse, top), minlength=top + 1)
    b = np.bincount(np.minimum(direct, top), minlength=top + 1)
    keep = (a + b) > 0
    assert stats.chi2_contingency(np.stack([a[keep], b[keep]]))[1] > 1e-3
    mean, var = r * alpha / (1 - alpha), r * alpha / (1 - alpha) ** 2
    assert sparse.mean() == pytest.approx(mean, abs=6 * np.sqrt(var / n))


def test_summed_sparse_shares_are_the_dense_shares_sum_in_distribution():
    rng = np.random.default_rng(3)
    alpha, m, trials = 0.8, 7, 40_000
    at, value = polya_share_events(m, alpha, m * trials, rng)
    sparse = dense(at, value, (trials, m)).sum(axis=1)
    direct = polya_share(m, alpha, (trials, m), rng).sum(axis=1)
    lo = min(sparse.min(), direct.min())
    size = max(sparse.max(), direct.max()) - lo + 1
    a, b = np.bincount(sparse - lo, minlength=size), np.bincount(direct - lo, minlength=size)
    keep = (a + b) > 0
    assert stats.chi2_contingency(np.stack([a[keep], b[keep]]))[1] > 1e-3


@pytest.mark.parametrize("module", [federated, distdp])
def test_chunk_sum_is_the_sum_of_the_dense_reports_for_one_seed(module):
    config = resolve_config(PrivacyModel(module.__name__.rsplit(".", 1)[1]), n=500, height=4)
    rng = np.random.default_rng(0)
    n_clients = 60
    cells = rng.integers(0, 16, 500)
    labels = rng.integers(0, 2, 500)
    client = rng.integers(0, n_clients, 500)
    args = (cells, labels, client, n_clients, config, 80)
    reports, _ = module.client_reports(*args, np.random.default_rng(9))
    total, _ = module.chunk_sum(*args, np.random.default_rng(9))
    np.testing.assert_array_equal(reports.sum(axis=0), total)


def test_rows_summed_by_client_match_add_at():
    # The localdp per-client sums by one sort and reduceat equal numpy's unbuffered add.
    from fedeval.privacy.localdp import _sum_rows_by

    rng = np.random.default_rng(3)
    key = rng.integers(0, 60, 2_000)
    key[key == 7] = 8  # a client with no report keeps a zero row
    rows = rng.random((2_000, 9)) < 0.3
    want = np.zeros((60, 9), np.int64)
    np.add.at(want, key, rows.astype(np.int64))
    got = _sum_rows_by(key, rows, 60)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert not got[7].any()
    assert np.array_equal(_sum_rows_by(key[:0], rows[:0], 60), np.zeros((60, 9), np.int64))
