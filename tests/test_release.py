"""Releases merge: the sum of the releases of disjoint client sets is the release of the union."""

import numpy as np
import pytest

from fedeval.core.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.core.errors import ReleaseError
from fedeval.core.release import Release, example_nodes, level_offsets
from fedeval.privacy import distdp, federated, localdp
from fedeval.privacy.decode import decode
from fedeval.privacy.noise import discrete_laplace_variance


def leaves(seed: int, h: int = 4, n: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(2 << h, 1 / (2 << h))).reshape(2, 1 << h)


def test_federated_parts_sum_to_the_union():
    cfg = PrivacyConfig(PrivacyModel.FEDERATED, 4, Shape.HIERARCHY)
    a, b = leaves(0), leaves(1)
    rng = np.random.default_rng(0)
    union = federated.draw(a + b, 400, cfg, rng)
    merged = sum([federated.draw(a, 200, cfg, rng), federated.draw(b, 200, cfg, rng)])
    np.testing.assert_array_equal(merged.counts, union.counts)
    np.testing.assert_array_equal(merged.reporters, union.reporters)
    assert merged.n_clients == 400 and merged.cohorts == 2
    np.testing.assert_array_equal(decode(merged).leaves, a + b)


def test_distdp_cohorts_each_carry_full_noise():
    # Two cohorts of 3 and 7 clients, each with shares sized to itself: every cohort's sum has
    # the whole discrete Laplace variance, and their merge twice that (and the decoder knows).
    cfg = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, epsilon=1.0)
    a, b = leaves(2, 3, 30), leaves(3, 3, 70)
    rng = np.random.default_rng(1)
    r = 20_000
    var = discrete_laplace_variance(distdp.alpha(cfg))
    parts = [[distdp.draw(x, m, cfg, rng) for _ in range(r)] for x, m in ((a, 3), (b, 7))]
    for x, rels in zip((a, b), parts, strict=True):
        noise = np.stack([rel.counts for rel in rels]).ravel() - np.tile(x.ravel(), r)
        # Normal approximation of the sample variance's spread, generous for Laplace tails.
        assert abs(noise.var() / var - 1) < 4 * np.sqrt(5 / noise.size)
    merged = parts[0][0] + parts[1][0]
    assert merged.cohorts == 2 and merged.reporters is None and merged.n_clients is None
    _, variances = distdp.decode(merged)
    assert variances[0] == pytest.approx(2 * var)


def test_distdp_add_remove_release_holds_no_exact_count():
    cfg = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.HIERARCHY, epsilon=1.0)
    rel = distdp.draw(leaves(4, 3, 30), 30, cfg, np.random.default_rng(0))
    assert rel.reporters is None and rel.n_clients is None and rel.examples is None
    replace = PrivacyConfig(
        PrivacyModel.DISTDP, 3, Shape.HIERARCHY, epsilon=1.0, relation="replace"
    )
    assert distdp.draw(leaves(4, 3, 30), 30, replace, np.random.default_rng(0)).n_clients == 30


def test_localdp_parts_merge_reporters():
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, 3, Shape.HIERARCHY, epsilon=5.0)
    rng = np.random.default_rng(2)
    a = localdp.draw(leaves(5, 3, 300), 300, cfg, rng)
    b = localdp.draw(leaves(6, 3, 200), 200, cfg, rng)
    m = a + b
    assert m.reporters.sum() == 500 and m.n_clients == 500
    np.testing.assert_array_equal(m.counts, a.counts + b.counts)


def test_merge_refuses_mixed_parameters():
    c1 = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, epsilon=1.0)
    c2 = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, epsilon=2.0)
    empty = np.zeros(8 * 2, np.int64)
    with pytest.raises(ReleaseError, match="different parameters"):
        Release(c1, empty, None, None) + Release(c2, empty, None, None)
    with pytest.raises(ReleaseError, match="entries"):
        Release(c1, np.zeros(3, np.int64), None, None)


def test_example_nodes_layout():
    cfg = PrivacyConfig(PrivacyModel.FEDERATED, 2, Shape.HIERARCHY)
    # A positive in leaf 1 sets level 1 (pos, cell 0) = node 2 and level 2 (pos, cell 1) = 9.
    np.testing.assert_array_equal(example_nodes(np.array([1]), np.array([1]), cfg), [[2, 9]])
    np.testing.assert_array_equal(level_offsets(cfg), [0, 4, 12])
