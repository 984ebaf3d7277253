"""Releases merge: the sum of the releases of disjoint client sets is the release of the union."""

import numpy as np
import pytest
from scipy import stats

from fedeval.config import PrivacyConfig, PrivacyModel, Shape
from fedeval.errors import ReleaseError
from fedeval.privacy import distdp, federated, localdp
from fedeval.privacy.noise import discrete_laplace_variance
from fedeval.release import Release, example_nodes, level_offsets


def leaves(seed: int, h: int = 4, n: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(2 << h, 1 / (2 << h))).reshape(2, 1 << h)


def test_federated_parts_sum_to_the_union():
    cfg = PrivacyConfig(PrivacyModel.FEDERATED, 4, Shape.HIERARCHY)
    a, b = leaves(0), leaves(1)
    rng = np.random.default_rng(0)
    union = federated.draw(a + b, 400, cfg, 400, rng)
    merged = sum([federated.draw(a, 200, cfg, 400, rng), federated.draw(b, 200, cfg, 400, rng)])
    np.testing.assert_array_equal(merged.counts, union.counts)
    np.testing.assert_array_equal(merged.reporters, union.reporters)
    assert merged.n_clients == 400 and merged.complete
    np.testing.assert_array_equal(merged.histogram().leaves, a + b)


def test_distdp_parts_sum_to_full_discrete_laplace_noise():
    # Parts drawn for 3 and 7 of 10 clients carry Pólya(3/10) and Pólya(7/10) noise: their sum
    # must have exactly the discrete Laplace variance of the whole population's release.
    cfg = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, epsilon=1.0)
    a, b = leaves(2, 3, 30), leaves(3, 3, 70)
    rng = np.random.default_rng(1)
    r = 20_000
    noise = np.stack(
        [
            (distdp.draw(a, 3, cfg, 10, rng) + distdp.draw(b, 7, cfg, 10, rng)).counts
            - (a + b).ravel()
            for _ in range(r)
        ]
    ).ravel()
    var = discrete_laplace_variance(distdp.alpha(cfg))
    # Normal approximation of the sample variance's spread, generous for Laplace tails (κ = 6).
    assert abs(noise.var() / var - 1) < 4 * np.sqrt(5 / noise.size)
    assert stats.ttest_1samp(noise, 0).pvalue > 1e-3


def test_incomplete_distdp_release_is_refused():
    cfg = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, epsilon=1.0)
    part = distdp.draw(leaves(4, 3, 30), 3, cfg, 10, np.random.default_rng(0))
    with pytest.raises(ReleaseError, match="3 of 10 clients"):
        part.histogram()


def test_localdp_parts_merge_reporters():
    cfg = PrivacyConfig(PrivacyModel.LOCALDP, 3, Shape.HIERARCHY, epsilon=5.0)
    rng = np.random.default_rng(2)
    a = localdp.draw(leaves(5, 3, 300), 300, cfg, 500, rng)
    b = localdp.draw(leaves(6, 3, 200), 200, cfg, 500, rng)
    m = a + b
    assert m.reporters.sum() == 500 and m.n_clients == 500
    np.testing.assert_array_equal(m.counts, a.counts + b.counts)


def test_merge_refuses_mixed_parameters():
    c1 = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, epsilon=1.0)
    c2 = PrivacyConfig(PrivacyModel.DISTDP, 3, Shape.FLAT, epsilon=2.0)
    with pytest.raises(ReleaseError, match="different parameters"):
        Release.empty(c1, 10) + Release.empty(c2, 10)
    with pytest.raises(ReleaseError, match="different parameters"):
        Release.empty(c1, 10) + Release.empty(c1, 11)
    with pytest.raises(ReleaseError, match="entries"):
        Release(c1, 10, np.zeros(3, np.int64), np.zeros(1, np.int64), 0)


def test_example_nodes_layout():
    cfg = PrivacyConfig(PrivacyModel.FEDERATED, 2, Shape.HIERARCHY)
    # A positive in leaf 1 sets level 1 (pos, cell 0) = node 2 and level 2 (pos, cell 1) = 9.
    np.testing.assert_array_equal(example_nodes(np.array([1]), np.array([1]), cfg), [[2, 9]])
    np.testing.assert_array_equal(level_offsets(cfg), [0, 4, 12])
