"""The tree's ε split unequally over its levels (distdp, `fedeval.privacy.level_split`): the
shares, the claim (each level's ε sums to the tree's), the noise each level really gets (its
variance against its stated α), and the consistency step's weighted least squares."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_hierarchy import design_matrix

from fedeval import audit
from fedeval.core.config import (
    PrivacyConfig,
    PrivacyModel,
    Relation,
    Shape,
    Unit,
    config_dict,
    config_from_dict,
)
from fedeval.core.errors import UsageError
from fedeval.core.hierarchy import consistent_leaves
from fedeval.core.release import level_offsets
from fedeval.documents.release_file import load_release, save_release
from fedeval.privacy import decode as decoding
from fedeval.privacy import distdp, level_split, probe
from fedeval.privacy.accounting import compose
from fedeval.privacy.base import ClientBatch
from fedeval.privacy.events import event_from_dict
from fedeval.privacy.mechanism import Mechanism, mechanism_from_section
from fedeval.privacy.noise import discrete_laplace_variance


def _config(height: int = 5, f: int = 2, s: float = 0.8, **kw) -> PrivacyConfig:
    return PrivacyConfig(
        PrivacyModel.DISTDP,
        height,
        Shape.HIERARCHY,
        epsilon=1.0,
        split_level=f,
        split_share=s,
        **kw,
    )


def test_shares_put_s_on_the_levels_up_to_f_and_sum_to_one():
    cfg = _config(height=7, f=4, s=0.8)
    assert cfg.level_split
    assert cfg.level_shares == pytest.approx([0.2] * 4 + [0.2 / 3] * 3)
    assert math.fsum(cfg.level_shares) == pytest.approx(1.0, abs=1e-15)
    even = PrivacyConfig(PrivacyModel.DISTDP, 7, Shape.HIERARCHY, epsilon=1.0)
    assert not even.level_split and even.level_shares == (1 / 7,) * 7
    # A split with one side empty at this height is the even tree (a probe may choose h ≤ f).
    for degenerate in (_config(height=4, f=4), _config(height=3, f=5)):
        assert not degenerate.level_split
        assert distdp.count_alpha(degenerate) == distdp.count_alpha(
            replace(degenerate, split_level=0, split_share=0.0)
        )


def test_a_split_is_a_stored_setting_of_distdp_only():
    cfg = _config(relation=Relation.REPLACE)
    assert config_from_dict(config_dict(cfg)) == cfg
    assert "split_share" not in config_dict(replace(cfg, split_level=0, split_share=0.0))
    with pytest.raises(UsageError, match=r"localdp \(of the reports\) only"):
        PrivacyConfig(PrivacyModel.FEDERATED, 5, Shape.HIERARCHY, split_level=2, split_share=0.8)
    for f, s in ((2, 0.0), (0, 0.5), (2, 1.0), (-1, 0.5), (2, -0.1)):
        with pytest.raises(UsageError):
            _config(f=f, s=s)


@pytest.mark.parametrize(
    ("relation", "unit", "cap", "delta_k"),
    [
        (Relation.ADD_REMOVE, Unit.EXAMPLE, None, 1),
        (Relation.REPLACE, Unit.EXAMPLE, None, 2),
        (Relation.ADD_REMOVE, Unit.CLIENT, 3, 3),
        (Relation.REPLACE, Unit.CLIENT, 3, 6),
    ],
)
def test_the_claim_states_each_levels_epsilon_and_they_sum_to_epsilon(relation, unit, cap, delta_k):
    # Δ_k per level is what the even tree's Δ divides into (Δ = levels·Δ_k), and each level's
    # α_k = exp(−ε_k/Δ_k) with ε_k = share_k·ε_tree; after a probe, ε_probe + Σ ε_k = ε.
    for probe_share in (0.0, 0.05):
        cfg = _config(relation=relation, unit=unit, max_examples=cap, probe_share=probe_share)
        mech = Mechanism(cfg)
        even = Mechanism(replace(cfg, split_level=0, split_share=0.0))
        assert even.sensitivity == len(cfg.levels) * delta_k
        records = mech.parameters()["levels"]
        assert [r["level"] for r in records] == list(cfg.levels)
        tree = cfg.epsilon * (1 - probe_share)
        assert math.fsum(r["epsilon"] for r in records) == pytest.approx(tree, rel=1e-14)
        for r in records:
            assert r["sensitivity"] == delta_k
            assert r["alpha"] == pytest.approx(math.exp(-r["epsilon"] / delta_k), rel=1e-15)
            assert r["noise_variance_per_count"] == discrete_laplace_variance(r["alpha"])
        # The DP event composes to ε exactly (pure: the levels' ε, and the probe's, add up).
        assert compose([mech.event()], 0.0) == pytest.approx(cfg.epsilon, rel=1e-14)
        # The words state every level's ε and the sum; the section round-trips.
        text = mech.guarantee()
        assert all(f"level {r['level']}: ε = {r['epsilon']:.6g}" in text for r in records)
        assert f"= {tree:.6g}" in text
        if not probe_share:  # (a two-phase section must hold its released probe)
            assert mechanism_from_section(mech.section()) == mech


def _leaves(rng: np.random.Generator, h: int, n: int = 5000) -> np.ndarray:
    leaves = np.zeros((2, 1 << h), np.int64)
    np.add.at(leaves, (rng.integers(0, 2, n), rng.integers(0, 1 << h, n)), 1)
    return leaves


def _level_noise_within_claim(noise: np.ndarray, cfg: PrivacyConfig) -> None:
    """Each level's noise (runs × its counts) has a variance whose 99.9% χ² interval (kurtosis
    corrected, `fedeval.audit.variance_interval`) holds the stated 2α_k/(1 − α_k)²."""
    off = np.concatenate([[0], np.cumsum([2 << k for k in cfg.levels])])
    stated = level_split.level_variances(level_split.level_alphas(cfg, cfg.epsilon))
    for i, v in enumerate(stated):
        lo, hi = audit.variance_interval(noise[:, off[i] : off[i + 1]])
        assert lo <= v <= hi, f"level {cfg.levels[i]}: [{lo:.3f}, {hi:.3f}] against {v:.3f}"


def test_each_level_gets_the_noise_its_alpha_states():
    # Levels 1–2 at 0.4ε each, 3–5 at 0.0667ε: variances 10.4 and 448 (a 43× spread), so a level
    # drawn at another level's α falls far outside its interval. Both paths: the fast draw and
    # the per-client Pólya shares of a cohort of 7 (and their chunk sum).
    cfg = _config(height=5, f=2, s=0.8)
    rng = np.random.default_rng(11)
    leaves = _leaves(rng, 5)
    exact = distdp.federated.exact_counts(leaves, cfg)
    fast = np.stack([distdp.draw(leaves, 7, cfg, rng).counts - exact for _ in range(3000)])
    _level_noise_within_claim(fast, cfg)
    cells = rng.integers(0, 32, 40)
    labels = rng.integers(0, 2, 40).astype(bool)
    rows = ClientBatch(cells, labels, rng.integers(0, 7, 40), 7)
    onehot = distdp.federated.onehot_reports(rows, cfg).sum(axis=0)
    shares = np.stack(
        [distdp.client_reports(rows, cfg, 7, rng)[0].sum(axis=0) - onehot for _ in range(3000)]
    )
    _level_noise_within_claim(shares, cfg)
    chunks = np.stack([distdp.chunk_sum(rows, cfg, 7, rng)[0] - onehot for _ in range(3000)])
    _level_noise_within_claim(chunks, cfg)


def test_the_intervals_redraw_each_level_at_its_own_alpha():
    cfg = _config(height=4, f=2, s=0.7)
    rng = np.random.default_rng(12)
    release = distdp.draw(_leaves(rng, 4), 1, cfg, rng)
    hist = decoding.decode(release)
    stated = level_split.level_variances(distdp.level_alphas(cfg))
    assert hist.level_variances == pytest.approx(stated, rel=1e-15)
    draws = distdp.measurement_noise(hist, 4000, rng)
    flat = np.concatenate([d.reshape(4000, -1) for d in draws], axis=1)
    _level_noise_within_claim(flat, cfg)


@pytest.mark.parametrize(("height", "f", "s"), [(5, 2, 0.8), (6, 4, 0.8), (4, 1, 0.3)])
def test_consistency_with_a_split_is_the_dense_gls_solve(height, f, s):
    # The decoder's consistent leaves from a split release equal (AᵀWA)⁻¹AᵀWy with W the
    # inverse of each level's stated variance; and differ from the even-weight solve (so the
    # weights are used).
    cfg = _config(height=height, f=f, s=s)
    rng = np.random.default_rng(13)
    release = distdp.draw(_leaves(rng, height), 1, cfg, rng)
    hist = decoding.decode(release)
    a = design_matrix(list(cfg.levels))
    for c in (0, 1):
        y = np.concatenate([m[c] for m in release.level_counts()]).astype(float)
        w = np.concatenate(
            [np.full(1 << k, 1 / v) for k, v in zip(cfg.levels, hist.level_variances, strict=True)]
        )
        gls = np.linalg.solve(a.T @ (w[:, None] * a), a.T @ (w * y))
        np.testing.assert_allclose(hist.leaves[c], gls, rtol=1e-9, atol=1e-9)
        even = np.linalg.solve(a.T @ a, a.T @ y)
        assert np.max(np.abs(hist.leaves[c] - even)) > 1e-3


def test_a_split_lowers_the_threshold_counts_noise_as_designed():
    # The point of the split, exactly (no sampling): the variance of a count of [t, 1] for t a
    # level-f edge, read from the consistent leaves, against the even tree, from the
    # consistency operator and each level's stated variance.
    h, f = 7, 4
    even = PrivacyConfig(PrivacyModel.DISTDP, h, Shape.HIERARCHY, epsilon=1.0)
    split = _config(height=h, f=f, s=0.8)

    def variances(cfg: PrivacyConfig) -> tuple[float, float]:
        alphas = distdp.level_alphas(cfg)
        v = [discrete_laplace_variance(a) for a in alphas]
        sizes = [1 << k for k in cfg.levels]
        eye = np.split(np.eye(sum(sizes)), np.cumsum(sizes)[:-1], axis=1)
        op = consistent_leaves(eye, v, cfg.levels)  # rows: measurements, columns: leaves
        cov = np.concatenate([np.full(n, x) for n, x in zip(sizes, v, strict=True)])
        at_edges = [(op[:, (j << (h - f)) :].sum(axis=1) ** 2 * cov).sum() for j in range(1, 16)]
        leaf = (op**2 * cov[:, None]).sum(axis=0).mean()
        return float(np.mean(at_edges)), float(leaf)

    (edge_even, leaf_even), (edge_split, leaf_split) = variances(even), variances(split)
    assert edge_split < 0.75 * edge_even  # the P/R/A counts: most of ε is on their levels
    assert leaf_split > leaf_even  # and each leaf pays for it


def test_a_saved_split_release_reads_back_and_its_ledger_event_composes_to_epsilon(tmp_path):
    cfg = _config(height=5, f=2, s=0.8, probe_share=0.0)
    rng = np.random.default_rng(14)
    release = distdp.draw(_leaves(rng, 5), 3, cfg, rng)
    save_release(tmp_path / "r.fedeval", release, (0.0, 1.0))
    back, _ = load_release(tmp_path / "r.fedeval")
    assert back.config == cfg
    np.testing.assert_array_equal(decoding.decode(back).leaves, decoding.decode(release).leaves)
    for probe_share in (0.0, 0.05):
        mech = Mechanism(replace(cfg, probe_share=probe_share))
        event = event_from_dict(mech.dp_event())
        assert compose([event], 0.0) == pytest.approx(1.0, rel=1e-14)


def test_read_variances_are_the_least_squares_variances():
    # a'(AᵀWA)⁻¹a of each metric's reading, against a dense solve with a split's variances.
    levels, variances, floor = (1, 2, 3, 4, 5), (0.5, 0.5, 0.5, 4.0, 4.0), 3
    a = design_matrix(list(levels))
    w = np.concatenate([np.full(1 << k, 1 / v) for k, v in zip(levels, variances, strict=True)])
    cov = np.linalg.inv(a.T @ (w[:, None] * a))
    j = np.arange(32)
    ramp, leaf = (j + 0.5) / 32, (j == 0).astype(float)
    prefixes = [(j >= 4 * e).astype(float) for e in range(1, 8)]  # edges of level 3
    want = [ramp @ cov @ ramp, leaf @ cov @ leaf, np.mean([p @ cov @ p for p in prefixes])]
    got = level_split.read_variances(variances, levels, floor)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_a_split_moves_the_noise_the_height_choice_predicts():
    # Above f + 1 the split lowers the noise of P/R/A's counts and of the AUC's sum over the
    # leaves, and raises each leaf's (which the AP reads); at h ≤ f + 1 with s·(f + 1) = f
    # nothing changes. The old model took the even tree's count sd for every metric.
    split = _config(height=4, f=4, s=0.8, probe_share=0.05)
    even = replace(split, split_level=0, split_share=0.0)
    heights = np.arange(4, 15)
    got, base = probe.count_sd(split, heights, 0), probe.count_sd(even, heights, 0)
    assert got.shape == (3, len(heights))
    np.testing.assert_allclose(got[:, :2], np.stack([base[:2]] * 3), rtol=1e-12)
    auc, ap, pra = got[:, 2:] / base[2:]
    assert np.all(auc < 1) and np.all(pra < 1) and np.all(ap > 1)
    assert np.all(np.diff(pra) < 0) and np.all(np.diff(ap) > 0)


def test_read_sd_factors_match_the_decoded_noise():
    # The factors against the decoded noise of the deployed draw (per level at α_k, weighted
    # consistency): the sd of one leaf and of the count of [t, 1] at level-f edges, split over
    # even, over 3,000 draws of h = 7, f = 3 (both classes' leaves pooled: 2·128 leaf readings
    # and 2·7 edge readings a draw; relative sd of a variance ratio ≈ 2/√(draws·readings),
    # under 1.5% for the edges: 6% is 4 of those sds).
    rng = np.random.default_rng(11)
    cfg = _config(height=7, f=3, s=0.8)
    even = replace(cfg, split_level=0, split_share=0.0)
    sds = []
    for c in (cfg, even):
        alphas = distdp.level_alphas(c)
        off = level_offsets(c)
        noise = np.stack([level_split.noise_vector(c, alphas, rng) for _ in range(3000)])
        v = [discrete_laplace_variance(x) for x in alphas]
        parts = [noise[:, off[i] : off[i + 1]].reshape(3000, 2, -1) for i in range(len(v))]
        leaves = consistent_leaves(parts, v, c.levels)
        tops = np.cumsum(leaves[..., ::-1], axis=-1)[..., ::-1][..., 16::16]  # [t, 1], t = e/8
        sds.append([leaves.std(), tops.std()])
    tree_eps = distdp.tree_epsilon(cfg)
    want = level_split.read_sd_factors(cfg, tree_eps, 3)[1:]
    np.testing.assert_allclose(np.divide(*sds), want, rtol=0.06)


def test_level_split_setting_resolves_to_the_split_before_data_are_read():
    # auto (the default): f = the thresholds' alignment level (public), s = SPLIT_SHARE,
    # distdp only; F:S as given; off: the even tree.
    from fedeval.core.params import AP_LEAF_BOUND, SPLIT_SHARE
    from fedeval.core.spec import ReleaseSpec

    def split(**kw):
        cfg = ReleaseSpec.of(**kw).config(n=100_000, min_height=3)
        return cfg.split_level, cfg.split_share, cfg.split_leaf_bound

    assert split() == (3, SPLIT_SHARE, AP_LEAF_BOUND)  # the default under distdp: auto
    assert split(level_split="off") == (0, 0.0, 0.0)
    assert split(level_split="auto") == (3, SPLIT_SHARE, AP_LEAF_BOUND)  # the AP is reported
    assert split(level_split="auto", height="auto:ap,auc") == (3, SPLIT_SHARE, AP_LEAF_BOUND)
    assert split(level_split="auto", height="auto:auc,recall") == (3, SPLIT_SHARE, 0.0)
    assert split(level_split="5:0.6", height=9) == (5, 0.6, 0.0)
    assert split(level_split="auto", model="localdp") == (0, 0.0, 0.0)
    for bad in ("3", "0:0.5", "4:1", "4:nan", "even"):
        with pytest.raises(UsageError, match="off, auto or F:S"):
            ReleaseSpec.of(level_split=bad)
    with pytest.raises(UsageError, match="distdp"):
        ReleaseSpec.of(model="localdp", level_split="4:0.8")


def test_level_split_option_reaches_every_document(cli, workdir):
    # --level-split on the command line: the report states f and s and the levels' own ε; a
    # setting the saved release fixes is refused with --from; a bad one exits 2, writes nothing.
    import json

    import pandas as pd

    rng = np.random.default_rng(0)
    y = rng.random(4000) < 0.4
    pd.DataFrame({"score": rng.beta(2 + 2 * y, 3), "label": y}).to_parquet("t.parquet")
    args = ["evaluate", "t.parquet", "--thresholds", "0.25,0.5,0.75", "--height", "6"]
    ok = cli(*args, "--level-split", "auto", "--save-release", "r.fedeval", "-f", "json")
    assert ok.exit_code == 0, ok.stderr
    privacy = json.loads(ok.stdout)["privacy"]
    assert (privacy["split_level"], privacy["split_share"]) == (2, 0.8)
    # h = 6, f = 2, the AP reported: s = min(0.8, 1 − 4/(1.25·6)) = 7/15
    assert privacy["split_leaf_bound"] == 1.25
    assert [r["share"] for r in privacy["mechanism"]["levels"]] == pytest.approx(
        [7 / 30, 7 / 30, 2 / 15, 2 / 15, 2 / 15, 2 / 15]
    )
    assert "a share 0.466667 spread evenly over the levels up to 2" in privacy["guarantee"]
    saved = json.loads(Path("r.fedeval").read_text())
    assert (saved["privacy"]["split_level"], saved["privacy"]["split_share"]) == (2, 0.8)
    again = cli("evaluate", "--from", "r.fedeval", "--level-split", "4:0.5")
    assert again.exit_code == 2 and "--level-split" in again.stderr
    bad = cli(*args, "--level-split", "2:1.5", "-o", "out.json")
    assert bad.exit_code == 2 and not Path("out.json").exists()


def test_encode_takes_the_level_split_and_the_release_states_it(cli, workdir):
    # The deployed path (encode → aggregate → evaluate --from) releases the split asked for, as
    # the one-shot evaluate does; off releases the even tree; F:S under localdp exits 2, no
    # directory written.
    import json

    import pandas as pd

    rng = np.random.default_rng(1)
    y = rng.random(3000) < 0.4
    frame = pd.DataFrame({"score": rng.beta(2 + 2 * y, 3), "label": y, "client": np.arange(3000)})
    frame.to_parquet("c.parquet")
    args = ["encode", "c.parquet", "--thresholds", "0.25,0.5,0.75", "--seed", "1"]
    for setting, want in (("2:0.7", (2, 0.7)), ("off", (None, None))):
        out = f"reports-{setting.replace(':', '-')}"
        ok = cli(*args, "--level-split", setting, "-o", out)
        assert ok.exit_code == 0, ok.stderr
        stated = json.loads(Path(out, "manifest.json").read_text())["privacy"]
        assert (stated.get("split_level"), stated.get("split_share")) == want
    assert cli("aggregate", "reports-2-0.7", "-o", "r.fedeval").exit_code == 0
    report = cli("evaluate", "--from", "r.fedeval", "-f", "json")
    privacy = json.loads(report.stdout)["privacy"]
    assert (privacy["split_level"], privacy["split_share"]) == (2, 0.7)
    bad = cli(*args, "-m", "localdp", "--level-split", "2:0.7", "-o", "bad")
    assert bad.exit_code == 2 and "--level-split" in bad.stderr and not Path("bad").exists()


def test_a_leaf_bound_keeps_the_aps_noise_within_it_at_every_height():
    # s(h) = min(s, 1 − (h − f)/(c·h)): the leaves' read sd (what the AP reads) at most c ×
    # the even tree's, exactly where the leaf's own level dominates and below it elsewhere;
    # without the bound s = 0.8 gives 2.5× at h = 8. The bound is stated and read back.
    for h in range(5, 15):
        cfg = _config(height=h, f=4, s=0.8, split_leaf_bound=1.25)
        assert cfg.split_share_here == pytest.approx(min(0.8, 1 - (h - 4) / (1.25 * h)))
        assert sum(cfg.level_shares) == pytest.approx(1.0)
        _, ap, pra = level_split.read_sd_factors(cfg, 1.0, 4)
        assert ap <= 1.25 * 1.001 and pra <= 1.0 + 1e-9  # 2α/(1 − α)² ≈ 2/ε² + …
    assert level_split.read_sd_factors(_config(height=8, f=4, s=0.8), 1.0, 4)[1] > 2.4
    cfg = _config(height=8, f=4, s=0.8, split_leaf_bound=1.25)
    assert config_from_dict(config_dict(cfg)) == cfg
    with pytest.raises(UsageError, match="split_leaf_bound"):
        _config(height=8, f=4, s=0.8, split_leaf_bound=0.5)
