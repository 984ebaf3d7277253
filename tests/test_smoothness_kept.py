"""`departures` is a function of the values it is given, whatever it keeps between calls (the
residual weights of the last leaf edges, issue 28): asked again for the very same arrays it
gives the same answer, and a release changed in place, other draws or other edges are read
afresh (the answer equals that of fresh copies)."""

from __future__ import annotations

import numpy as np

from fedeval.estimate.smoothness import departures


def _release(seed: int, n_leaves: int = 64):
    rng = np.random.default_rng([28, seed])
    x = np.linspace(0, 1, n_leaves)
    leaves = np.stack(
        [rng.poisson(200 * np.exp(-(((x - 0.4) / 0.2) ** 2))), rng.poisson(80 * np.exp(-x))]
    ).astype(float)
    leaves[0, 10] += 500  # a point mass: some parents depart
    draws = rng.normal(0, 3, (50, 2, n_leaves))
    return leaves, draws, np.linspace(0, 1, n_leaves + 1)


def _fresh(leaves, draws, edges, reading=None):
    """departures of copies (never the arrays read before)."""
    copy = None if draws is None else draws.copy()
    again = None if reading is None else reading.copy()
    return departures(leaves.copy(), copy, edges.copy(), 8, again)


def test_same_arrays_same_answer():
    leaves, draws, edges = _release(0)
    first = departures(leaves, draws, edges, 8)
    assert np.array_equal(departures(leaves, draws, edges, 8), first)
    assert np.array_equal(first, _fresh(leaves, draws, edges))
    reading = leaves + draws
    assert np.array_equal(
        departures(leaves, draws, edges, 8, reading), _fresh(leaves, draws, edges, reading)
    )


def test_a_release_changed_in_place_is_read_again():
    leaves, draws, edges = _release(1)
    before = departures(leaves, draws, edges, 8)
    leaves[1, 40] += 400  # a new point mass among the positives
    after = departures(leaves, draws, edges, 8)
    assert not np.array_equal(after, before)
    assert np.array_equal(after, _fresh(leaves, draws, edges))


def test_other_draws_or_edges_are_read_afresh():
    leaves, draws, edges = _release(2)
    departures(leaves, draws, edges, 8)
    assert np.array_equal(departures(leaves, None, edges, 8), _fresh(leaves, None, edges))
    other = draws * 40  # noise wide enough to hide the point mass
    assert np.array_equal(departures(leaves, other, edges, 8), _fresh(leaves, other, edges))
    warped = edges**2
    assert np.array_equal(departures(leaves, draws, warped, 8), _fresh(leaves, draws, warped))


def test_draws_changed_in_place_are_read_again():
    """The noise's share of the spread is kept with a copy of the draws it came from: draws
    written over in place (the same array object, other values) are read afresh."""
    leaves, draws, edges = _release(3)
    before = departures(leaves, draws, edges, 8)
    draws *= 40  # the same array, noise wide enough to hide the point mass
    after = departures(leaves, draws, edges, 8)
    assert not np.array_equal(after, before)
    assert np.array_equal(after, _fresh(leaves, draws, edges))
    draws /= 40
    assert np.array_equal(departures(leaves, draws, edges, 8), before)
