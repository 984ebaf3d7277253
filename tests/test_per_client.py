"""The per-client path's sparse shares: Pólya by compound Poisson has Pólya's distribution, and
a batch's summed reports are its dense reports summed, draw for draw."""

import numpy as np
import pytest
from scipy import stats

from fedeval.core.config import PrivacyModel
from fedeval.core.params import resolve_config
from fedeval.privacy import distdp, federated
from fedeval.privacy.base import ClientBatch
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
    args = (ClientBatch(cells, labels, client, n_clients), config, 80)
    reports, _ = module.client_reports(*args, np.random.default_rng(9))
    total, _ = module.chunk_sum(*args, np.random.default_rng(9))
    np.testing.assert_array_equal(reports.sum(axis=0), total)


def _patterns(bits: np.ndarray) -> np.ndarray:
    """Each report's bits as one integer (bit j of the report is bit j of the integer)."""
    return bits.astype(np.int64) @ (1 << np.arange(bits.shape[1]))


def _oue_pmf(width: int, col: int | None, p: float, q: float) -> np.ndarray:
    """The OUE law of a report over its 2^width bit patterns: the one-hot bit at `col` (none
    for an empty report) on with probability p, every other bit with q, independently."""
    codes = np.arange(1 << width)
    bits = (codes[:, None] >> np.arange(width)) & 1
    prob = np.where(bits == 1, q, 1 - q)
    if col is not None:
        prob[:, col] = np.where(bits[:, col] == 1, p, 1 - p)
    return prob.prod(axis=1)


@pytest.mark.parametrize(("width", "epsilon"), [(4, 0.5), (4, 5.0), (8, 1.0), (8, 3.0)])
def test_sparse_oue_reports_have_the_oue_law(width, epsilon):
    """Every report's whole bit pattern against the exact OUE law (a chi-square over all
    2^width patterns, rare ones pooled), for each true column and for empty reports; and
    against the dense encoder (`oue_perturb_at`, uniforms compared with p and q) by a
    two-sample chi-square. The sample is large (60,000 reports per column), so a wrong rate
    of one bit by 0.01 fails."""
    from fedeval.privacy.noise import oue_perturb_at, oue_probabilities, oue_sparse

    p, q = oue_probabilities(epsilon)
    per, cols = 60_000, [0, 1, width - 1, None]
    col = np.repeat([c if c is not None else 0 for c in cols], per)
    on = np.repeat([c is not None for c in cols], per)
    rng = np.random.default_rng([width, int(epsilon * 10)])
    new = _patterns(oue_sparse(col, width, epsilon, rng, on).dense())
    old = _patterns(oue_perturb_at(col, width, epsilon, rng, on))
    for j, c in enumerate(cols):
        got = np.bincount(new[j * per : (j + 1) * per], minlength=1 << width)
        ref = np.bincount(old[j * per : (j + 1) * per], minlength=1 << width)
        expected = per * _oue_pmf(width, c, p, q)
        # Patterns expected fewer than 5 times pooled into one cell (the chi-square needs it).
        rare = expected < 5
        f_obs = np.append(got[~rare], got[rare].sum())
        f_exp = np.append(expected[~rare], expected[rare].sum())
        if f_exp[-1] == 0:
            f_obs, f_exp = f_obs[:-1], f_exp[:-1]
        assert stats.chisquare(f_obs, f_exp).pvalue > 1e-4
        both = (got + ref) > 0
        assert stats.chi2_contingency(np.stack([got[both], ref[both]]))[1] > 1e-4
        # Each bit's rate within 5 standard errors of p (the one-hot bit) or q.
        rate = oue_sparse(np.full(per, c or 0), width, epsilon, rng, np.full(per, c is not None))
        rate = rate.dense().mean(axis=0)
        want = np.full(width, q)
        if c is not None:
            want[c] = p
        assert np.all(np.abs(rate - want) <= 5 * np.sqrt(want * (1 - want) / per))


def test_sparse_oue_positions_are_distinct_and_skip_the_own_column():
    """Many 0-bits on at once (ε small, q near ½) make equal first draws common: every
    report's turned-on positions are distinct, never its own column, and as many as drawn."""
    from fedeval.privacy.noise import oue_sparse

    rng = np.random.default_rng(4)
    col = rng.integers(0, 16, 20_000)
    on = rng.random(20_000) < 0.8
    r = oue_sparse(col, 16, 0.01, rng, on)
    key = r.flip_rows * 16 + r.flip_cols
    assert len(np.unique(key)) == len(key)
    assert not np.any(on[r.flip_rows] & (r.flip_cols == col[r.flip_rows]))
    assert np.any(~on[r.flip_rows] & (r.flip_cols == col[r.flip_rows]))  # padding: any column
    assert np.all(np.diff(r.flip_rows) >= 0)
    assert not np.any(r.kept & ~on)
    assert r.dense().sum() == len(key) + r.kept.sum()
    # About half of a real report's 15 other bits are on (q = 0.4975), 8 of an empty one's 16.
    per_report = np.bincount(r.flip_rows, minlength=20_000)
    assert per_report[on].mean() == pytest.approx(15 * 0.4975, abs=5 * np.sqrt(15 / 4 / 16_000))


def test_localdp_chunk_sum_and_client_reports_are_the_example_reports_for_one_seed():
    """The per-client sums, their total and the encoder's dense reports come from the same
    draws: one seed, the same reports (padding and a probe's taken slots included)."""
    from fedeval.core.config import Unit
    from fedeval.privacy import localdp

    config = resolve_config(
        PrivacyModel.LOCALDP, n=500, height=4, unit=Unit.CLIENT, max_examples=20
    )
    rng = np.random.default_rng(0)
    n_clients = 60
    cells = rng.integers(0, 16, 500)
    labels = rng.integers(0, 2, 500)
    client = rng.integers(0, n_clients, 500)
    taken = np.ones(n_clients, np.int64)
    args = (ClientBatch(cells, labels, client, n_clients, taken), config, 80)
    reports, reporters = localdp.client_reports(*args, np.random.default_rng(9))
    total, per_level = localdp.chunk_sum(*args, np.random.default_rng(9))
    np.testing.assert_array_equal(reports.sum(axis=0), total)
    np.testing.assert_array_equal(reporters.sum(axis=0), per_level)
    b_cells, b_labels, b_client, real = localdp.padded(
        cells, labels, client, n_clients, config, taken
    )
    group, bits = localdp.example_reports(b_cells, b_labels, config, np.random.default_rng(9), real)
    off = np.cumsum([0] + [b.shape[1] for b in bits])
    want = np.zeros_like(reports)
    for i, b in enumerate(bits):
        np.add.at(want[:, off[i] : off[i + 1]], b_client[group == i], b.astype(np.int64))
    np.testing.assert_array_equal(reports, want)
    assert np.all(reporters.sum(axis=1) == 20 - taken)


def test_padding_sits_among_its_clients_reports_not_after_everyones():
    """Under unit client the encoder's rows are in client order, a client's empty reports
    among its own: appended after every client's real ones, their place would tell the server
    which reports are empty. D (every client holds L = 2) and D' (client 3 holds one) give the
    same client and level columns for one seed."""
    from fedeval.core.config import Unit
    from fedeval.protocol.encode import local_reports

    config = resolve_config(
        PrivacyModel.LOCALDP, n=20, height=2, unit=Unit.CLIENT, max_examples=2, epsilon=1.0
    )
    columns = []
    for drop in (None, 7):
        client = np.repeat(np.arange(10), 2)
        keep = np.arange(20) != drop
        t = local_reports(
            np.zeros(keep.sum(), int),
            np.zeros(keep.sum(), int),
            client[keep],
            0,
            10,
            config,
            np.random.default_rng(1),
        )
        levels = t.column("level").to_numpy()
        clients = t.column("client").to_numpy()
        for lv in np.unique(levels):
            assert np.all(np.diff(clients[levels == lv].astype(np.int64)) >= 0)
        columns.append((clients.tolist(), levels.tolist()))
    assert columns[0] == columns[1]


def test_sparse_reports_group_each_level_in_report_order():
    """Each level's OUE reports are those of the reports that chose it, in their order, drawn
    as a mask per level draws them: one seed, the same reports (padding included)."""
    from fedeval.core.config import Unit
    from fedeval.privacy import localdp
    from fedeval.privacy.noise import oue_sparse

    config = resolve_config(
        PrivacyModel.LOCALDP, n=3000, height=6, unit=Unit.CLIENT, max_examples=3
    )
    rng = np.random.default_rng(4)
    cells = rng.integers(0, 64, 3000)
    labels = rng.random(3000) < 0.4
    real = rng.random(3000) < 0.8
    group, got = localdp.sparse_reports(cells, labels, config, np.random.default_rng(8), real)
    replay = np.random.default_rng(8)
    np.testing.assert_array_equal(replay.integers(len(config.levels), size=3000), group)
    h = config.height
    for i, k in enumerate(config.levels):
        sel = group == i
        cols = (labels[sel].astype(np.int64) << k) + (cells[sel] >> (h - k))
        want = oue_sparse(cols, 2 << k, localdp.report_epsilon(config), replay, real[sel])
        np.testing.assert_array_equal(got[i].dense(), want.dense())
        np.testing.assert_array_equal(got[i].cols[want.kept], want.cols[want.kept])


@pytest.mark.parametrize(
    "ids",
    [
        np.repeat([3, 7, 8, 20], [2, 1, 3, 2]),  # grouped and sorted: counted
        np.array([5, 5, 2, 9, 2, 5]),  # unsorted: hashed
        np.array(["b", "a", "b", "c"]),
    ],
)
def test_client_codes_are_numbered_in_the_order_of_the_sorted_ids(ids):
    import pandas as pd
    import pyarrow as pa

    from fedeval.tables.scored import _factorize

    chunks = pa.chunked_array([pa.array(ids[:3]), pa.array(ids[3:])])
    codes, uniques = _factorize(chunks)
    # Canonical, not the file's order: moving a client's first row must change nothing.
    want_codes, want_uniques = pd.factorize(pd.Series(ids), sort=True)
    np.testing.assert_array_equal(codes, want_codes)
    np.testing.assert_array_equal(np.asarray(uniques), np.asarray(want_uniques))
