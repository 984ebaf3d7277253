"""localdp's reports split over the levels by a public rule (`fedeval.privacy.report_split`):
each report's level follows the stated probabilities on every path and is drawn independently of
the data; the decoded counts and the intervals' fresh draws have the spread the split release
really has; the height choice's noise model of the split is the consistency step's own
least-squares variance; and without a split everything is drawn as before."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import chi2
from test_hierarchy import design_matrix

from fedeval.audit import heights
from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape, config_dict, config_from_dict
from fedeval.core.hierarchy import coarsen
from fedeval.privacy import localdp, probe, report_split
from fedeval.privacy.base import ClientBatch
from fedeval.privacy.decode import decode, noise_draws
from fedeval.privacy.mechanism import Mechanism, mechanism_from_section

EPSILON = 8.0
"""High enough that the sampling over the levels, not OUE, dominates the counts (what the split
changes)."""


def _config(height: int = 6, f: int = 3, s: float = 0.8, **kw) -> PrivacyConfig:
    return PrivacyConfig(
        PrivacyModel.LOCALDP,
        height,
        Shape.HIERARCHY,
        epsilon=EPSILON,
        first_level=2,
        split_level=f,
        split_share=s,
        **kw,
    )


def _chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = counts.sum() * probs
    stat = float(((counts - expected) ** 2 / expected).sum())
    return float(chi2.sf(stat, len(probs) - 1))


def test_the_rule_gives_s_to_the_levels_up_to_f_and_is_stored_and_stated():
    cfg = _config()  # levels 2..6: 2, 3 ≤ f
    assert cfg.level_split
    probs = report_split.level_probabilities(cfg)
    np.testing.assert_allclose(probs, [0.4, 0.4, 0.2 / 3, 0.2 / 3, 0.2 / 3])
    assert config_from_dict(config_dict(cfg)) == cfg
    mech = Mechanism(cfg)
    params = mech.parameters()
    assert params["level_probabilities"] == pytest.approx(
        {"2": 0.4, "3": 0.4, "4": 0.2 / 3, "5": 0.2 / 3, "6": 0.2 / 3}
    )
    assert "share 0.8" in params["level_assignment"]
    assert "independently of the data" in mech.guarantee()
    assert mechanism_from_section(mech.section()) == mech
    # The uniform tree states what it always did.
    even = replace(cfg, split_level=0, split_share=0.0)
    assert "level_probabilities" not in Mechanism(even).parameters()
    assert Mechanism(even).parameters()["level_assignment"] == (
        "uniform at random over the released levels"
    )


def _cells_labels(n: int, h: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(np.int64)
    cells = np.minimum((rng.beta(2 + 3 * labels, 4, n) * (1 << h)).astype(np.int64), (1 << h) - 1)
    return cells, labels


def test_reports_per_level_follow_the_stated_probabilities_on_every_path():
    # 20,000 reports: a χ² goodness of fit of the reports per level against the probabilities
    # (α = 0.001 each). Drawn uniformly (1/5 each) they would be rejected at p < 1e-300.
    cfg = _config()
    probs = report_split.level_probabilities(cfg)
    cells, labels = _cells_labels(20_000, cfg.height, 0)
    client = np.arange(len(cells)) % 50
    rng = np.random.default_rng(1)
    group, _ = localdp.sparse_reports(cells, labels, cfg, rng)
    per_client = np.bincount(group, minlength=len(probs))
    rows = ClientBatch(cells, labels, client, 50)
    _, summed = localdp.chunk_sum(rows, cfg, 50, rng)
    _, each = localdp.client_reports(rows, cfg, 50, rng)
    leaf_counts = np.stack([np.bincount(cells[labels == c], minlength=64) for c in (0, 1)])
    fast = localdp.draw(leaf_counts, 50, cfg, rng).reporters
    for counts in (per_client, summed, each.sum(axis=0), fast):
        assert _chi2_pvalue(np.asarray(counts, float), probs) > 0.001, counts


def test_each_reports_level_is_drawn_independently_of_the_data():
    # The same generator gives the same levels whatever the reports say: the level is drawn
    # before, and without reading, the report's label and cell (so the reports per level,
    # which the server and the release see, have the same law on neighbouring datasets).
    cfg = _config()
    a_cells, a_labels = _cells_labels(5_000, cfg.height, 2)
    b_cells, b_labels = (1 << cfg.height) - 1 - a_cells, 1 - a_labels
    ga, _ = localdp.sparse_reports(a_cells, a_labels, cfg, np.random.default_rng(3))
    gb, _ = localdp.sparse_reports(b_cells, b_labels, cfg, np.random.default_rng(3))
    np.testing.assert_array_equal(ga, gb)


def test_without_a_split_the_draws_are_the_uniform_ones_bit_for_bit():
    # A split with one side empty at this height (h ≤ f) is the uniform tree, drawn through
    # the same generator calls.
    cells, labels = _cells_labels(3_000, 4, 4)
    uniform = PrivacyConfig(PrivacyModel.LOCALDP, 4, Shape.HIERARCHY, epsilon=5.0, first_level=2)
    split_off = replace(uniform, split_level=4, split_share=0.8)
    assert not split_off.level_split
    ga, ra = localdp.sparse_reports(cells, labels, uniform, np.random.default_rng(5))
    gb, rb = localdp.sparse_reports(cells, labels, split_off, np.random.default_rng(5))
    np.testing.assert_array_equal(ga, gb)
    for x, y in zip(ra, rb, strict=True):
        np.testing.assert_array_equal(x.dense(), y.dense())


RELEASES = 400
DRAWS = 8


@pytest.fixture(scope="module")
def split_releases() -> dict[str, np.ndarray]:
    """RELEASES fast releases of 4,000 rows at h = 6 (levels 2..6, 0.8 of the reports to the
    levels 2, 3), decoded; with the draws' variance of each release's leaves, level-3 edge
    counts and per-level decoded counts."""
    cfg = _config()
    cells, labels = _cells_labels(4_000, cfg.height, 6)
    leaf_counts = np.stack([np.bincount(cells[labels == c], minlength=64) for c in (0, 1)])
    tops = np.arange(1, 8) * 8  # the level-3 edges: P/R/A's counts of [t, 1]
    levels, stated, edges, edge_draws, leaves, leaf_draws = [], [], [], [], [], []
    for r in range(RELEASES):
        rng = np.random.default_rng([11, r])
        release = localdp.draw(leaf_counts, 40, cfg, rng)
        measured, variances = localdp.decode(release)
        levels.append(np.concatenate([m.ravel() for m in measured]))
        stated.append(np.concatenate([np.ravel(v) for v in variances]))
        hist = decode(release)
        draws = noise_draws(hist, DRAWS, rng)
        assert draws is not None
        above = np.cumsum(hist.leaves[..., ::-1], axis=-1)[..., ::-1]
        edges.append(above[..., tops].ravel())
        d_above = np.cumsum(draws[..., ::-1], axis=-1)[..., ::-1]
        edge_draws.append(d_above[..., tops].reshape(DRAWS, -1).var(axis=0, ddof=1))
        leaves.append(hist.leaves.ravel())
        leaf_draws.append(draws.reshape(DRAWS, -1).var(axis=0, ddof=1))
    return {
        k: np.asarray(v)
        for k, v in {
            "levels": levels,
            "stated": stated,
            "edges": edges,
            "edges_draws": edge_draws,
            "leaves": leaves,
            "leaves_draws": leaf_draws,
        }.items()
    }


def _bounds() -> tuple[float, float]:
    # A sum of variances over several quantities is a weighted mean of χ²_{R−1}/(R−1) ratios,
    # at most as spread as one: its α = 0.001 quantiles (two-sided) bound it.
    df = RELEASES - 1
    lo, hi = chi2.ppf([0.0005, 0.9995], df) / df
    return float(lo), float(hi)


def test_decoded_level_counts_have_their_stated_variance(split_releases):
    # decode rescales level k by n/n_k and states OUE's and the sampling variance c(n/n_k − 1)
    # at the split's n_k; per level, the spread over the releases must match it. The stated
    # sampling part leaves out the finite-population factor (1 − c/n) of a count estimated from
    # n_k of the n reports (Var = c(1 − c/n)(1/π − 1)): conservative where a cell holds a large
    # share of the rows (the coarse levels here, ≈ 0.85 at level 2), so each level's ratio is
    # bounded around that factor, computed from the true counts.
    cfg = _config()
    cells, labels = _cells_labels(4_000, cfg.height, 6)
    n = len(cells)
    leaf_counts = np.stack([np.bincount(cells[labels == c], minlength=64) for c in (0, 1)])
    spread = split_releases["levels"].var(axis=0, ddof=1)
    stated = split_releases["stated"].mean(axis=0)
    lo, hi = _bounds()
    start = 0
    for k, pi in zip(cfg.levels, report_split.level_probabilities(cfg), strict=True):
        width = 2 << k
        c = coarsen(leaf_counts, k).ravel().astype(float)
        full = localdp.cell_variance(n, round(n * pi), c, EPSILON)
        factor = (full - c * c / n * (1 / pi - 1)).sum() / full.sum()
        ratio = spread[start : start + width].sum() / stated[start : start + width].sum()
        assert lo * factor < ratio < hi * factor, (k, ratio, factor, lo, hi)
        start += width


def test_interval_draws_have_the_split_releases_spread(split_releases):
    # The leaves and the counts of [t, 1] at the level-f edges (what P/R/A read): the fresh
    # draws must resample the levels at the split's probabilities. Drawn at the uniform ones
    # (1/5 each) the leaves' draws are 1.6× too wide (ratio 0.63: the finest level's sampling
    # drawn at π = 0.2 instead of 0.067). The edges' counts hardly tell (0.96 against 0.93): a
    # range measured on every level counts each example once in all, so the levels' sampling
    # errors nearly cancel in the consistent estimate whatever the probabilities.
    lo, hi = _bounds()
    for name in ("edges", "leaves"):
        spread = split_releases[name].var(axis=0, ddof=1).sum()
        claimed = split_releases[f"{name}_draws"].mean(axis=0).sum()
        assert lo < spread / claimed < hi, (name, spread / claimed, lo, hi)


def test_prefix_variances_are_the_least_squares_ones():
    # The consistency step's operator, read column by column, against the dense GLS
    # covariance (AᵀWA)⁻¹: every prefix sum's variance and the mean prefix sum's.
    levels = (2, 3, 4, 5)
    v = np.array([3.0, 0.5, 7.0, 2.0])
    a = design_matrix(list(levels))
    w = np.concatenate([np.full(1 << k, 1 / x) for k, x in zip(levels, v, strict=True)])
    cov = np.linalg.inv(a.T @ (w[:, None] * a))
    prefix = np.tril(np.ones((32, 32)))[:-1]  # [0, j) for j = 1..31
    want = np.einsum("jl,lm,jm->j", prefix, cov, prefix)
    mean = prefix.mean(axis=0)
    got, got_mean = report_split.prefix_variances(levels, v)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert got_mean == pytest.approx(float(mean @ cov @ mean), rel=1e-10)


def test_the_height_choice_sees_the_splits_noise_per_metric():
    # Probe-chosen heights: where the split applies (h > f) the count sd has a row per
    # metric, P/R/A's below the uniform tree's by the split's factor; at h ≤ f (and with no
    # split) the uniform tree's single row, as before.
    base = PrivacyConfig(
        PrivacyModel.LOCALDP, 4, Shape.HIERARCHY, epsilon=5.0, first_level=2, probe_share=0.05
    )
    split = replace(base, split_level=4, split_share=0.8)
    heights = np.arange(4, 11)
    even = probe.count_sd(base, heights, 100_000)
    rows = probe.count_sd(split, heights, 100_000)
    assert even.shape == (7,) and rows.shape == (3, 7)
    np.testing.assert_array_equal(rows[:, 0], even[0])  # h = f: no split
    assert np.all(rows[2, 1:] < even[1:]) and np.all(rows[0, 3:] < even[3:])
    # P/R/A's noise nearly flat in h under the split: 0.8 of the reports stay on levels ≤ f.
    assert rows[2, -1] / rows[2, 1] < even[-1] / even[1]
    # Each factor is the consistency step's: the sd of the level-f edges' prefix sums.
    cfg = replace(split, height=8)
    n = 100_000 * 0.95
    auc, pra = report_split.noise_factors(
        cfg, n, lambda n_k, k: localdp.level_variance(int(n), n_k, k, 5.0)
    )
    assert rows[2, 4] == pytest.approx(even[4] * pra) and rows[0, 4] == pytest.approx(even[4] * auc)


def test_the_audits_batched_height_choice_reads_the_splits_rows():
    # The audit's many-probes choice (`fedeval.audit.heights`) must choose what
    # `probe.height` chooses with the split's per-metric noise, probe by probe.
    cfg = PrivacyConfig(
        PrivacyModel.LOCALDP,
        4,
        Shape.HIERARCHY,
        epsilon=5.0,
        first_level=2,
        probe_share=0.05,
        split_level=4,
        split_share=0.8,
    )
    rng = np.random.default_rng(12)
    n = 200_000
    labels = (rng.random(n) < 0.2).astype(np.int64)
    scores = np.where(labels == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))
    cells = np.minimum((scores * 1024).astype(np.int64), 1023)
    leaf_counts = np.stack([np.bincount(cells[labels == c], minlength=1024) for c in (0, 1)])
    found = [probe.draw_localdp(leaf_counts, 0, 4, cfg, rng)[0] for _ in range(24)]
    one = [probe.height(p, cfg, n, 4, 10) for p in found]
    many = heights.heights(found, cfg, n, 4, 10)
    assert many.tolist() == one
    assert max(one) > 4  # where the split applies
