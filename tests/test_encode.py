"""The staged protocol (encode → aggregate) against the one-shot simulation.

federated: identical counts and metrics for every partition scheme. distdp and localdp: the
staged reports sum to exactly the per-client path's release for the same seed, and to the fast
path's release in distribution.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedeval.api.evaluate import evaluate_data, evaluate_run
from fedeval.core.axis import release_axis
from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape, Unit
from fedeval.core.errors import UsageError
from fedeval.core.params import data_resolution
from fedeval.privacy import distdp
from fedeval.privacy.noise import discrete_laplace_variance
from fedeval.protocol.aggregate import aggregate_reports
from fedeval.protocol.encode import bytes_per_report, encode_file
from fedeval.protocol.partition import partition_file
from fedeval.protocol.simulate import Simulated, fast_release, simulate
from fedeval.tables.scored import cap_examples, read_scored, scored_from_arrays


def table(n: int, seed: int, clients: int | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)
    df = pd.DataFrame({"score": s, "label": y})
    if clients is not None:
        df["client"] = rng.integers(0, clients, n)
    return df


def default_axis(height):
    """The axis encode and the one-shot both declare by default (`release_axis`)."""
    return release_axis((0.0, 1.0), None, height)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    d = tmp_path_factory.mktemp("staged")
    path = d / "scores.parquet"
    table(3000, 1).to_parquet(path)
    return path


@pytest.mark.parametrize("scheme", ["iid", "dirichlet", "sizes", "column"])
def test_federated_staged_equals_one_shot_for_every_partition(scored, tmp_path, scheme):
    src = scored
    if scheme == "column":
        src = tmp_path / "with_ids.parquet"
        table(3000, 1, clients=37).to_parquet(src)
        clients = src
    else:
        clients = tmp_path / "clients.parquet"
        partition_file(scored, clients, scheme=scheme, n_clients=50, seed=3)
    encode_file(
        clients, tmp_path / "reports", model="federated", height=10, seed=5, max_cells=20_000
    )  # several parts
    agg = aggregate_reports([tmp_path / "reports"])
    staged = agg.release
    # The one-shot release of the unpartitioned table (on the axis both declare): exact counts.
    data = read_scored(
        src, keep_examples=False, keep_scores=True, resolution=10, axis=default_axis(10)
    )
    one_shot = simulate(data, model="federated", height=10, seed=5)
    np.testing.assert_array_equal(staged.counts, one_shot.release.counts)
    np.testing.assert_array_equal(staged.reporters, one_shot.release.reporters)
    a = evaluate_run(Simulated.from_release(staged, agg.axis, seed=1, ci_draws=0))
    b = evaluate_data(data, model="federated", height=10, seed=1, ci_draws=0)
    assert a.auc.estimate == b.auc.estimate
    for x, y in zip(a.thresholds, b.thresholds, strict=True):
        assert (x.precision.estimate, x.recall.estimate, x.accuracy.estimate) == (
            y.precision.estimate,
            y.recall.estimate,
            y.accuracy.estimate,
        )


@pytest.mark.parametrize(
    "model,eps,unit,cap",
    [
        ("distdp", 1.0, "example", None),
        ("localdp", 2.0, "example", None),
        ("distdp", 1.0, "client", 3),
        ("localdp", 2.0, "client", 3),
        ("federated", None, "client", 2),
    ],
)
def test_staged_sum_is_the_per_client_release(tmp_path, model, eps, unit, cap):
    # encode runs the per-client encoder in the same batches and from the same generator as
    # the one-shot per-client path: one seed, one release.
    src = tmp_path / "t.parquet"
    table(2500, 2, clients=400).to_parquet(src)
    encode_file(
        src, tmp_path / "r", model=model, epsilon=eps, height=4, unit=unit, max_examples=cap,
        seed=9,
    )  # fmt: skip
    staged = aggregate_reports([tmp_path / "r"]).release
    data = read_scored(
        src, keep_examples=True, keep_scores=False, resolution=4, axis=default_axis(4)
    )
    run = simulate(
        data, model=model, epsilon=eps, height=4, unit=unit, max_examples=cap, seed=9,
        path="per-client",
    )  # fmt: skip
    np.testing.assert_array_equal(staged.counts, run.release.counts)
    if run.release.reporters is None:  # distdp: no exact count travels
        assert staged.reporters is None
    else:
        np.testing.assert_array_equal(staged.reporters, run.release.reporters)
    assert staged.n_clients == run.release.n_clients
    assert staged.n_clients == (None if model == "distdp" else 400)
    assert staged.config == run.config


@pytest.mark.parametrize(
    "model,eps,unit,cap",
    [
        ("distdp", 1.0, "example", None),
        ("localdp", 2.0, "example", None),
        ("distdp", 1.0, "client", 3),
        ("localdp", 2.0, "client", 3),
    ],
)
def test_two_phase_staged_is_the_per_client_release(tmp_path, model, eps, unit, cap):
    # `--height auto` under DP: encode plays the probe round, then the tree at the height the
    # probe chose; with one seed, the same probe, height and tree as the per-client path.
    src = tmp_path / "t.parquet"
    table(2500, 2, clients=400).to_parquet(src)
    summary = encode_file(
        src, tmp_path / "r", model=model, epsilon=eps, unit=unit, max_examples=cap, seed=9
    )
    staged = aggregate_reports([tmp_path / "r"]).release
    data = read_scored(
        src,
        keep_examples=True,
        keep_scores=False,
        resolution=data_resolution(model, "auto"),
        axis=default_axis("auto"),
    )
    run = simulate(
        data, model=model, epsilon=eps, unit=unit, max_examples=cap, seed=9, path="per-client"
    )
    assert run.config.probed and staged.config == run.config == summary.config
    assert staged.probe is not None and staged.probe.same(run.release.probe)
    np.testing.assert_array_equal(staged.counts, run.release.counts)
    if run.release.reporters is not None:
        np.testing.assert_array_equal(staged.reporters, run.release.reporters)
    # The manifest states the probe's released counts, and no exact count beside them.
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    released = manifest["privacy"]["probe"]["released"]
    assert released["counts"] == staged.probe.counts.tolist()
    assert manifest["privacy"]["height"] == run.config.height


def test_two_phase_auto_needs_the_whole_population_in_one_cohort(tmp_path):
    src = tmp_path / "t.parquet"
    table(500, 2, clients=100).to_parquet(src)
    with pytest.raises(UsageError, match="probe round over every client"):
        encode_file(src, tmp_path / "r", model="distdp", population=200)
    assert not (tmp_path / "r").exists()
    encode_file(src, tmp_path / "r", model="distdp", height=3, population=200)  # a given h


def _exact_counts(df: pd.DataFrame, cfg: PrivacyConfig) -> np.ndarray:
    data = scored_from_arrays(
        df["label"],
        df["score"],
        keep_scores=False,
        resolution=cfg.height,
        axis=default_axis(cfg.height),
    )
    fed = PrivacyConfig(PrivacyModel.FEDERATED, cfg.height, cfg.shape)
    return fast_release(data, fed, np.random.default_rng(0)).counts


def test_distdp_staged_noise_is_discrete_laplace(tmp_path):
    # Staged release − exact counts, pooled over nodes and runs, against the fast path's noise:
    # both must be discrete Laplace with α = exp(−ε/Δ). Two-sample χ² on the pooled values
    # (binned with tails merged) and a variance check with a 5-SE tolerance.
    df = table(300, 3)
    src = tmp_path / "t.parquet"
    df.to_parquet(src)
    cfg = PrivacyConfig(PrivacyModel.DISTDP, 2, Shape.HIERARCHY, 1.0)
    exact = _exact_counts(df, cfg)
    staged = []
    for r in range(40):
        out = tmp_path / f"r{r}"
        encode_file(src, out, model="distdp", epsilon=1.0, height=2, seed=100 + r)
        staged.append(aggregate_reports([out]).release.counts - exact)
    staged = np.concatenate(staged)
    data = scored_from_arrays(df["label"], df["score"], keep_scores=False, resolution=2)
    rng = np.random.default_rng(7)
    fast = np.concatenate(
        [distdp.draw(data.leaf_counts(2), 300, cfg, rng).counts - exact for _ in range(400)]
    )
    bins = np.array([-np.inf, -8, -4, -2, -1, 0, 1, 2, 4, 8, np.inf])  # Var ≈ 8 at α = e^−½
    a, _ = np.histogram(staged, bins - 0.5)
    b, _ = np.histogram(fast, bins - 0.5)
    assert stats.chi2_contingency(np.stack([a, b])).pvalue > 0.001
    var = discrete_laplace_variance(distdp.alpha(cfg))
    # Var of a sample variance ≈ (μ4 − σ⁴)/m; discrete Laplace μ4 ≈ 6σ⁴ (Laplace kurtosis 6).
    se = var * np.sqrt(5 / len(staged))
    assert abs(staged.var() - var) < 5 * se
    assert abs(staged.mean()) < 5 * np.sqrt(var / len(staged))


def test_localdp_staged_matches_fast_path_in_distribution(tmp_path):
    # The decoded count of one cell, staged (30 runs) vs fast (600 draws): KS two-sample test,
    # plus equal means within 5 SE (OUE decoding is unbiased on both paths).
    df = table(400, 4)
    src = tmp_path / "t.parquet"
    df.to_parquet(src)
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, 2, Shape.FLAT, 2.0)
    staged = []
    for r in range(30):
        out = tmp_path / f"r{r}"
        encode_file(src, out, model="localdp", epsilon=2.0, height=2, shape="flat", seed=r)
        staged.append(aggregate_reports([out]).release.counts)
    staged = np.array(staged, float)
    data = scored_from_arrays(df["label"], df["score"], keep_scores=False, resolution=2)
    rng = np.random.default_rng(3)
    fast = np.array(
        [fast_release(data, cfg, rng).counts for _ in range(600)], float
    )  # shape (600, 8)
    for node in range(staged.shape[1]):
        assert stats.ks_2samp(staged[:, node], fast[:, node]).pvalue > 0.001 / 8
    se = np.sqrt(staged.var(0) / len(staged) + fast.var(0) / len(fast))
    assert np.all(np.abs(staged.mean(0) - fast.mean(0)) < 5 * se)


def test_federated_dropout_is_recovered_exactly(tmp_path):
    df = table(2000, 5, clients=300)
    src = tmp_path / "t.parquet"
    df.to_parquet(src)
    s = encode_file(
        src, tmp_path / "r", model="federated", height=6, dropout=0.1, seed=2, max_cells=5000
    )
    assert s.dropped_out == round(0.1 * s.clients)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    agg = aggregate_reports([tmp_path / "r"])
    assert (agg.reported, agg.recovered) == (s.clients - s.dropped_out, s.dropped_out)
    # The survivors' exact counts: drop the clients whose reports are absent.
    import pyarrow.parquet as pq

    roster = pq.read_table(tmp_path / "r" / "roster.parquet")["client"].to_numpy()
    reported = np.concatenate(
        [pq.read_table(tmp_path / "r" / p["file"])["client"].to_numpy() for p in manifest["parts"]]
    )
    survivors = df[df["client"].isin(roster[reported])]
    cfg = PrivacyConfig(PrivacyModel.FEDERATED, 6, Shape.FLAT)
    np.testing.assert_array_equal(agg.release.counts, _exact_counts(survivors, cfg))
    assert agg.release.examples == len(survivors)


def test_distdp_refuses_simulated_dropout(scored, tmp_path):
    with pytest.raises(UsageError, match="noise share"):
        encode_file(scored, tmp_path / "r", model="distdp", dropout=0.1)
    assert not (tmp_path / "r").exists()


def test_unit_client_scales_the_noise_and_states_it(tmp_path):
    src = tmp_path / "t.parquet"
    table(1000, 6, clients=100).to_parquet(src)
    encode_file(
        src, tmp_path / "r", model="distdp", epsilon=1.0, height=3, unit="client",
        max_examples=4, seed=1,
    )  # fmt: skip
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["privacy"]["unit"] == "client"
    assert manifest["privacy"]["relation"] == "add-remove"
    assert manifest["privacy"]["mechanism"]["sensitivity"] == 4 * 3
    assert manifest["privacy"]["mechanism"]["alpha"] == pytest.approx(np.exp(-1.0 / 12))
    assert manifest["privacy"]["dp_event"] == {
        "type": "discrete_laplace",
        "parameter": 1.0 / 12,
        "sensitivity": 12,
    }
    assert "examples" not in manifest["cohort"]  # no exact count reaches the server
    release = aggregate_reports([tmp_path / "r"]).release
    assert release.config.unit is Unit.CLIENT and release.config.max_examples == 4
    assert release.examples is None and release.reporters is None


def test_cap_keeps_at_most_l_per_client_uniformly():
    # Client 0 holds 10 examples, client 1 holds 2: with L = 3, client 0 keeps 3 of its 10
    # (each with probability 3/10) and client 1 keeps both. Over 4,000 caps, each of client 0's
    # examples is kept Binomial(4000, 0.3) times: within 5 SD of 1,200.
    scores = np.linspace(0.05, 0.95, 12)
    labels = np.array([0, 1] * 6)
    client = np.array([0] * 10 + [1] * 2)
    data = scored_from_arrays(labels, scores, client_ids=client, keep_examples=True, resolution=8)
    rng = np.random.default_rng(5)
    kept = np.zeros(12)
    for _ in range(4000):
        capped = cap_examples(data, 3, rng)
        assert capped.rows == 5 and capped.dropped == 7
        assert capped.fine_counts.sum() == 5
        assert np.bincount(capped.examples.client).tolist() == [3, 2]
        kept[np.searchsorted(scores, capped.examples.unit_scores)] += 1
    sd = np.sqrt(4000 * 0.3 * 0.7)
    assert np.all(np.abs(kept[:10] - 1200) < 5 * sd)
    assert np.all(kept[10:] == 4000)


def test_bytes_per_report():
    # Masked reports hold every node and nothing else (no example count).
    fed = PrivacyConfig(PrivacyModel.FEDERATED, 8, Shape.FLAT)
    assert bytes_per_report(fed) == 4 * (2 * 256)
    dist = PrivacyConfig(PrivacyModel.DISTDP, 8, Shape.HIERARCHY, 1.0)
    assert bytes_per_report(dist) == 4 * (2 * (512 - 2))  # 4,080 bytes at h = 8
    loc = PrivacyConfig(PrivacyModel.LOCALDP, 3, Shape.HIERARCHY, 5.0)
    assert bytes_per_report(loc) == pytest.approx(1 + (1 + 1 + 2) / 3)  # whole bytes
