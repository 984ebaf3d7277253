"""localdp's level split (`level_shares`): the rule, the configuration, and that every path
draws levels with the shares and decodes without bias."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedeval.axis import ScoreAxis
from fedeval.config import PrivacyConfig, PrivacyModel, Shape, config_dict, config_from_dict
from fedeval.data import scored_from_arrays
from fedeval.errors import UsageError
from fedeval.privacy import localdp
from fedeval.privacy.mechanism import mechanism_from_section, mechanism_of
from fedeval.simulate import simulate


def _cfg(h: int = 5, shares=None, **kw) -> PrivacyConfig:
    return PrivacyConfig(PrivacyModel.LOCALDP, h, Shape.HIERARCHY, 5.0, level_shares=shares, **kw)


@pytest.mark.parametrize(
    ("units", "height", "top"),
    [
        ([0.875], 5, 3),  # [7/8, 1] is the level-3 node
        ([0.125, 0.5, 0.75], 5, 2),  # highest threshold decides
        ([0.8125], 6, 3),  # 13/16: [7/8, 1] is the largest node inside [13/16, 1]
        ([0.0625], 4, 1),  # near 0: level 1 ([1/2, 1])
        ([0.5], 2, 1),
        ([0.9375], 4, 4),  # on the leaves
    ],
)
def test_level_shares_put_half_on_the_top_thresholds_level(units, height, top):
    shares = localdp.level_shares(units, height)
    assert shares is not None and len(shares) == height
    assert math.isclose(math.fsum(shares), 1.0, abs_tol=1e-12)
    expected = [0.5 / height] * height
    expected[top - 1] += 0.5
    assert shares == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    ("units", "height"),
    [([], 5), ([0.0, 1.0], 5), ([0.96875], 4), ([0.5], 1)],  # none inside; k* = 5 > h; one level
)
def test_level_shares_fall_back_to_uniform(units, height):
    assert localdp.level_shares(units, height) is None


def test_split_for_uses_the_axis_edges_and_only_under_localdp_hierarchy():
    axis = ScoreAxis.aligned(0.0, 1.0, [0.3, 0.85])  # edges 5/16 and 14/16
    cfg = localdp.split_for(_cfg(5), axis)
    assert cfg.level_shares is not None and cfg.level_shares[2] == pytest.approx(0.6)
    assert localdp.split_for(_cfg(5), ScoreAxis.linear()).level_shares is None
    flat = PrivacyConfig(PrivacyModel.LOCALDP, 5, Shape.FLAT, 5.0)
    assert localdp.split_for(flat, axis) is flat
    dist = PrivacyConfig(PrivacyModel.DISTDP, 5, Shape.HIERARCHY, 1.0)
    assert localdp.split_for(dist, axis) is dist


def test_config_checks_and_round_trips_the_shares():
    shares = (0.1, 0.1, 0.6, 0.1, 0.1)
    cfg = _cfg(5, shares)
    assert cfg.level_split == shares
    back = config_from_dict(config_dict(cfg))
    assert back == cfg
    assert "level_shares" not in config_dict(_cfg(5))  # uniform: the document is unchanged
    for bad in [(0.5, 0.5), (0.2, 0.2, 0.2, 0.2, 0.3), (0.0, 0.1, 0.7, 0.1, 0.1)]:
        with pytest.raises(UsageError):
            _cfg(5, bad)
    with pytest.raises(UsageError):
        PrivacyConfig(PrivacyModel.DISTDP, 5, Shape.HIERARCHY, 1.0, level_shares=shares)


def test_mechanism_states_the_split_and_its_section_reloads():
    cfg = _cfg(5, (0.1, 0.1, 0.6, 0.1, 0.1))
    mech = mechanism_of(cfg)
    section = mech.section()
    assert section["level_shares"] == [0.1, 0.1, 0.6, 0.1, 0.1]
    assert "0.6" in section["mechanism"]["level_assignment"]
    assert "before any data is read" in mech.guarantee() or "before any data" in str(section)
    assert section["dp_event"] == {"type": "pure", "epsilon": 5.0}  # the claim is unchanged
    assert mechanism_from_section(section).config == cfg


def _within_binomial(counts: np.ndarray, total: int, shares) -> None:
    """Each level's count within 5 binomial sd of total·π_k (false alarm < 1e-6 per level)."""
    p = np.asarray(shares)
    sd = np.sqrt(total * p * (1 - p))
    assert np.all(np.abs(counts - total * p) <= 5 * sd), (counts, total * p)


def test_draw_splits_reports_and_padding_with_the_shares():
    shares = (0.1, 0.1, 0.6, 0.1, 0.1)
    cfg = _cfg(5, shares, unit="client", max_examples=4)
    leaves = np.full((2, 32), 5_000, np.int64)
    release = localdp.draw(leaves, 100, cfg, np.random.default_rng(1), pad=50_000)
    total = int(leaves.sum()) + 50_000
    assert int(np.sum(release.reporters)) == total
    _within_binomial(np.asarray(release.reporters), total, shares)


def test_example_reports_draw_levels_with_the_shares():
    shares = (0.1, 0.1, 0.6, 0.1, 0.1)
    cfg = _cfg(5, shares)
    rng = np.random.default_rng(2)
    n = 200_000
    group, bits = localdp.example_reports(rng.integers(0, 32, n), rng.integers(0, 2, n), cfg, rng)
    counts = np.bincount(group, minlength=5)
    _within_binomial(counts, n, shares)
    assert [len(b) for b in bits] == counts.tolist()


def test_decoding_with_shares_is_unbiased():
    """Mean decoded leaves over R releases within 5 standard errors (their own sd / √R)."""
    cfg = _cfg(3, (0.1, 0.7, 0.2))
    truth = np.array([[4000, 3000, 2000, 1000, 800, 600, 400, 200]] * 2, np.int64)
    truth[1] = truth[1][::-1]
    rng = np.random.default_rng(3)
    est = np.array([localdp.draw(truth, 1, cfg, rng).histogram().leaves for _ in range(400)])
    se = est.std(axis=0) / math.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 5 * se)


def test_simulate_paths_split_by_the_declared_thresholds():
    rng = np.random.default_rng(4)
    n = 20_000
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0, 1)
    ids = rng.integers(0, 50, n)
    data = scored_from_arrays(
        y, s, client_ids=ids, keep_examples=True, axis=ScoreAxis.aligned(0.0, 1.0, [0.3, 0.85])
    )
    kw = {"model": "localdp", "height": 5, "ci_draws": 0}
    fast = simulate(data, seed=1, **kw)
    per = simulate(data, seed=1, path="per-client", **kw)
    for run in (fast, per):
        assert run.config.level_shares == pytest.approx((0.1, 0.1, 0.6, 0.1, 0.1))
        assert run.mechanism.section()["level_shares"] == list(run.config.level_shares)
    _within_binomial(np.asarray(per.release.reporters), n, per.config.level_shares)
    auto = simulate(data, seed=1, model="localdp", ci_draws=0)  # two-phase: after the probe
    assert auto.config.level_shares == localdp.level_shares([5 / 16, 14 / 16], auto.config.height)
