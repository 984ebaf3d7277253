"""The levels a release starts at: localdp hierarchies release levels 2..h from ε = 5 per report
(`fedeval.core.params.LEVEL_1_FROM_EPSILON`), everything else 1..h; stored configurations
round-trip."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape, config_dict, config_from_dict
from fedeval.core.errors import UsageError
from fedeval.core.params import resolve_config
from fedeval.privacy.decode import decode, noise_draws
from fedeval.protocol.simulate import fast_release
from fedeval.tables.scored import scored_from_arrays


@pytest.mark.parametrize("height", [2, 5, "auto"])
def test_localdp_hierarchy_starts_at_level_2(height):
    cfg = resolve_config("localdp", n=100_000, epsilon=5.0, height=height)
    assert cfg.first_level == 2 and cfg.levels == tuple(range(2, cfg.height + 1))
    # The probe's height keeps the rule (the fast path replaces the height after the probe).
    assert replace(cfg, height=7).levels == (2, 3, 4, 5, 6, 7)


@pytest.mark.parametrize(
    "model, kw",
    [
        ("distdp", {"epsilon": 5.0}),
        ("federated", {}),
        ("localdp", {"epsilon": 4.0}),  # below LEVEL_1_FROM_EPSILON
        ("localdp", {"epsilon": 5.0, "unit": "client", "max_examples": 10}),  # ε/L = 0.5
    ],
)
def test_every_level_elsewhere(model, kw):
    cfg = resolve_config(model, n=100_000, height=6, shape="hierarchy", **kw)
    assert cfg.levels == (1, 2, 3, 4, 5, 6)


def test_flat_and_height_one_release_one_level():
    assert resolve_config("localdp", n=10_000, epsilon=5.0, height=6, shape="flat").levels == (6,)
    one = resolve_config("localdp", n=10_000, epsilon=5.0, height=1)
    assert one.levels == (1,) and one.first_level == 1
    with pytest.raises(UsageError, match="first_level"):
        PrivacyConfig(PrivacyModel.LOCALDP, 4, Shape.HIERARCHY, 5.0, first_level=0)


def test_stored_levels_round_trip_and_older_files_read_as_before():
    cfg = resolve_config("localdp", n=100_000, epsilon=5.0, height=5)
    stored = config_dict(cfg)
    assert stored["levels"] == [2, 3, 4, 5]
    assert config_from_dict(stored) == cfg
    older = {**stored, "levels": [1, 2, 3, 4, 5]}  # written when every tree started at 1
    assert config_from_dict(older).levels == (1, 2, 3, 4, 5)
    with pytest.raises(ValueError, match="levels"):
        config_from_dict({**stored, "levels": [2, 3, 5]})


@pytest.mark.slow
def test_localdp_without_level_1_is_unbiased_and_less_noisy_at_the_top():
    # 3000 releases per level set of the same data (h = 4, ε = 5, fast path). The count of
    # negatives ≥ 13/16 is unbiased with levels 2..4 (mean within 4 standard errors), and its
    # variance is below the 1..4 tree's: computed exactly (the consistency operator on each
    # level's OUE and sampling variance) the ratio is 0.765; two sample variances of n = 3000
    # near-normal values have relative sd √(2/n) ≈ 2.6% each, their ratio ≈ 3.7%, so 0.9 is
    # 3.7 sd above it.
    rng = np.random.default_rng(11)
    n = 20_000
    y = rng.integers(0, 2, n)
    s = 1 / (1 + np.exp(-rng.normal(np.where(y == 1, 1.0, -1.0), 1.0)))
    data = scored_from_arrays(y, s, keep_scores=False)
    truth = data.leaf_counts(4)[0, 13:].sum()
    top = {}
    for first in (1, 2):
        cfg = PrivacyConfig(PrivacyModel.LOCALDP, 4, Shape.HIERARCHY, 5.0, first_level=first)
        assert cfg.levels[0] == first
        top[first] = np.array(
            [decode(fast_release(data, cfg, rng)).leaves[0, 13:].sum() for _ in range(3000)]
        )
    se = np.std(top[2], ddof=1) / math.sqrt(len(top[2]))
    assert abs(top[2].mean() - truth) <= 4 * se
    assert np.var(top[2], ddof=1) / np.var(top[1], ddof=1) < 0.9


@pytest.mark.slow
def test_localdp_noise_draws_match_fresh_releases_without_level_1():
    # The intervals' noise draws must show the spread fresh releases show with levels 2..h
    # (their level sampling is over the released levels). Two sample sds of n = 1500 ~normal
    # values: ratio sd ≈ √(1/n) ≈ 2.6%; the draws use estimated counts, so 4 sd plus 5%.
    rng = np.random.default_rng(12)
    y = rng.integers(0, 2, 20_000)
    data = scored_from_arrays(y, np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), keep_scores=False)
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, 4, Shape.HIERARCHY, 2.0, first_level=2)
    fresh = np.stack([decode(fast_release(data, cfg, rng)).leaves for _ in range(1500)])
    hist = decode(fast_release(data, cfg, rng))
    draws = noise_draws(hist, 1500, rng)
    a = np.zeros(16)
    a[6:] = 1
    s_fresh = np.std(fresh[:, 1] @ a, ddof=1)
    s_draws = np.std(draws[:, 1] @ a, ddof=1)
    assert abs(s_draws / s_fresh - 1) < 4 * math.sqrt(1 / 1500) + 0.05
