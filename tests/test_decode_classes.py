"""`decode` and `noise_draws` run the consistency passes over both classes at once where each
level has one variance (`fedeval.privacy.decode._both_classes`): the leaves must be those of a
pass per class, value for value, for every model, a one-level tree and per-cell variances."""

from __future__ import annotations

import numpy as np
import pytest

from fedeval.core.axis import ScoreAxis
from fedeval.core.hierarchy import class_variances, consistent_leaves
from fedeval.core.spec import ReleaseSpec
from fedeval.privacy.decode import decode, noise_draws
from fedeval.privacy.registry import model_of
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import ScoredData


def _per_class(measured, variances, levels, axis):
    return np.stack(
        [
            consistent_leaves(
                [np.take(m, c, axis=axis) for m in measured], class_variances(variances, c), levels
            )
            for c in (0, 1)
        ],
        axis=axis,
    )


@pytest.mark.parametrize("model", ["federated", "distdp", "localdp"])
@pytest.mark.parametrize("shape", [{"height": 6}, {"height": 1}, {"shape": "flat", "height": 5}])
def test_both_classes_at_once_equal_a_pass_per_class(model, shape):
    fine = np.random.default_rng(0).integers(0, 30, (2, 1 << 12)).astype(np.int64)
    rows = int(fine.sum())
    data = ScoredData(fine, 12, rows, rows, ScoreAxis.linear(0.0, 1.0))
    run = simulate(data, spec=ReleaseSpec.of(model=model, seed=3, **shape))
    measured, variances = model_of(model).decode(run.release)
    hist = decode(run.release)
    want = _per_class(measured, variances, run.release.config.levels, 0)
    assert hist.leaves.dtype == want.dtype and np.array_equal(hist.leaves, want)
    noise = model_of(model).measurement_noise(hist, 7, np.random.default_rng(1))
    got = noise_draws(hist, 7, np.random.default_rng(1))
    if noise is None:
        assert got is None
    else:
        want = _per_class(noise, hist.level_variances, hist.config.levels, 1)
        assert got.shape == want.shape and np.array_equal(got, want)
