"""`ScoredData.leaf_counts` and the class totals, kept once summed (`ScoredData._coarser`): the
same counts as summing the fine cells afresh, at every height, whatever a caller does with
what it was given, and a `replace` of the data reads its own cells."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fedeval.core.axis import ScoreAxis
from fedeval.core.hierarchy import coarsen
from fedeval.tables.scored import ScoredData


def _data(seed: int = 0, resolution: int = 10) -> ScoredData:
    fine = np.random.default_rng(seed).integers(0, 5, (2, 1 << resolution)).astype(np.int64)
    return ScoredData(fine, resolution, int(fine.sum()), 1, ScoreAxis.linear(0.0, 1.0))


def test_every_height_is_the_fresh_sum_and_a_callers_writes_do_not_stick():
    data = _data()
    for h in range(data.resolution + 1):
        want = coarsen(data.fine_counts, h)
        got = data.leaf_counts(h)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        got += 7  # a caller adding noise in place
        assert np.array_equal(data.leaf_counts(h), want), h
    assert data.negatives == int(data.fine_counts[0].sum())
    assert data.positives == int(data.fine_counts[1].sum())


def test_replaced_data_read_their_own_cells():
    data = _data(1)
    data.leaf_counts(3), data.positives  # kept on `data`
    other = replace(data, fine_counts=data.fine_counts[:, ::-1].copy() * 2)
    assert np.array_equal(other.leaf_counts(3), coarsen(other.fine_counts, 3))
    assert other.positives == 2 * data.positives
    assert np.array_equal(data.leaf_counts(3), coarsen(data.fine_counts, 3))


def test_float_counts_keep_their_own_sums():
    data = _data(2)
    floats = replace(data, fine_counts=data.fine_counts / 3.0)
    assert floats.positives == int(floats.fine_counts[1].sum())
    assert floats.negatives == int(floats.fine_counts[0].sum())
