"""The score axis: declared thresholds land on cell edges, exactly, for any scores."""

import numpy as np
import pytest

from fedeval.core.axis import MIN_ALIGN_HEIGHT, ScoreAxis
from fedeval.core.hierarchy import cell_index


def _near(t: np.ndarray) -> np.ndarray:
    """Scores on, just below and just above each threshold (the cases rounding could flip)."""
    return np.concatenate([t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf)])


@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-3.0, 7.5)])
@pytest.mark.parametrize("k", [1, 3, 10, 40])
def test_every_score_is_on_the_right_side_of_every_threshold(lo, hi, k):
    rng = np.random.default_rng(k)
    t = np.sort(rng.uniform(lo, hi, k))
    axis = ScoreAxis.aligned(lo, hi, t)
    h = axis.align_height()
    assert (1 << h) > k and h <= max(MIN_ALIGN_HEIGHT, int(np.ceil(np.log2(k + 1))))
    x = np.concatenate([rng.uniform(lo, hi, 100_000), _near(t), [lo, hi]])
    unit = axis.to_unit(x)
    for res in (h, h + 3, 16):
        cells = cell_index(unit, res)
        for (score, edge), tt in zip(axis.knots, t, strict=True):
            assert score == tt
            assert np.array_equal(x >= tt, cells >= edge * (1 << res))


def test_thresholds_map_to_their_edges_and_back():
    axis = ScoreAxis.aligned(0.0, 1.0, np.arange(1, 11) / 11)
    units = np.array([u for _, u in axis.knots])
    assert np.array_equal(axis.to_unit(np.arange(1, 11) / 11), units)
    np.testing.assert_allclose(axis.from_unit(units), np.arange(1, 11) / 11, rtol=0, atol=1e-15)
    # Each lands on the edge nearest its linear position: within half a cell.
    assert np.max(np.abs(units - np.arange(1, 11) / 11)) <= 0.5 / (1 << axis.align_height())


def test_crowded_thresholds_stay_distinct_and_ordered():
    axis = ScoreAxis.aligned(0.0, 1.0, [0.5, 0.5001, 0.5002, 0.9])
    units = [u for _, u in axis.knots]
    assert units == sorted(set(units)) and len(units) == 4


def test_explicit_height_and_too_many_thresholds():
    axis = ScoreAxis.aligned(0.0, 1.0, [0.3, 0.6], height=8)
    assert axis.align_height() <= 8 and axis.knots[0][1] == round(0.3 * 256) / 256
    with pytest.raises(ValueError, match="height"):
        ScoreAxis.aligned(0.0, 1.0, np.linspace(0.1, 0.9, 9), height=3)


def test_ends_and_duplicates_add_no_knots():
    assert ScoreAxis.aligned(0.0, 1.0, [0.0, 1.0]).is_linear
    assert len(ScoreAxis.aligned(0.0, 1.0, [0.4, 0.4, 0.0]).knots) == 1


def test_linear_axis_is_the_old_map():
    axis = ScoreAxis.linear(-2.0, 2.0)
    x = np.linspace(-2, 2, 101)
    assert np.array_equal(axis.to_unit(x), (x + 2.0) / 4.0)
    assert axis.to_dict() == {"score_range": [-2.0, 2.0]}


def test_round_trip_and_bad_documents():
    axis = ScoreAxis.aligned(-1.0, 1.0, [-0.5, 0.0, 0.25])
    assert ScoreAxis.from_dict(axis.to_dict()) == axis
    for doc in (
        {"score_range": [1, 0]},
        {"score_range": [0, 1], "cell_edges": {"scores": [0.5], "units": [0.5, 0.6]}},
        {"score_range": [0, 1], "cell_edges": {"scores": [0.6, 0.5], "units": [0.5, 0.6]}},
        {"score_range": [0, 1], "cell_edges": {"scores": ["x"], "units": [0.5]}},
        {"score_range": [0, 1], "cell_edges": {"scores": [1.5], "units": [0.5]}},
    ):
        with pytest.raises(ValueError):
            ScoreAxis.from_dict(doc)


def test_auto_is_raised_for_a_few_thresholds_only():
    few = ScoreAxis.aligned(0.0, 1.0, np.arange(1, 11) / 11)
    assert few.auto_floor(16) == few.align_height() == 4
    assert few.auto_floor(3) == 0  # data read too coarsely: nothing to align to
    sweep = ScoreAxis.aligned(0.0, 1.0, np.linspace(0.01, 0.99, 99))
    assert sweep.align_height() == 7 and sweep.auto_floor(16) == 0


def _leaf_reference(axis: ScoreAxis, x: np.ndarray, height: int) -> np.ndarray:
    """The leaf as the accumulator first computed it: ⌊to_unit(x)·2^h⌋, the top score last."""
    return cell_index(axis.to_unit(x), height)


AXES = [
    ScoreAxis.aligned(0.0, 1.0, np.arange(1, 11) / 11),  # evaluate's default thresholds
    ScoreAxis.aligned(-3.0, 7.5, [-2.9, 0.1, 3.3]),
    ScoreAxis.aligned(-5.0, 5.0, np.random.default_rng(4).uniform(-5, 5, 31)),
    ScoreAxis.aligned(0.0, 1.0, [0.5, 0.5 + 1e-9, 0.5 + 2e-9]),  # steep: many leaves per ulp
    ScoreAxis.aligned(-1.0, 1.0, [-1e-300, 0.0, 1e-300]),  # edges where ulps are tiny
    ScoreAxis.aligned(0.0, 1.0, [1e-30, 0.3]),
    ScoreAxis.linear(-2.0, 2.0),
    ScoreAxis.linear(),
]


@pytest.mark.parametrize("axis", AXES, ids=range(len(AXES)))
@pytest.mark.parametrize("height", [4, 10, 14, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leaf_lookup_gives_the_leaf_of_to_unit_bit_for_bit(axis, height, dtype):
    """Random scores, every knot and every leaf edge with their ulp neighbours, the ends."""
    from fedeval.core.axis import LeafLookup

    lookup = LeafLookup(axis, height, dtype)
    rng = np.random.default_rng(height)
    d = np.dtype(dtype).type
    knots = np.array([s for s, _ in axis.knots]).astype(dtype)
    edges = lookup.edges[np.isfinite(lookup.edges)]
    x = np.concatenate(
        [
            (axis.lo + (axis.hi - axis.lo) * rng.random(200_000)).astype(dtype),
            knots,
            np.nextafter(knots, d(-np.inf)),
            np.nextafter(knots, d(np.inf)),
            edges,
            np.nextafter(edges, d(-np.inf)),
            np.nextafter(edges, d(np.inf)),
            np.array([axis.lo, axis.hi, 0.0, -0.0], dtype),
        ]
    )
    x = x[(x >= axis.lo) & (x <= axis.hi)]
    assert np.array_equal(lookup(x), _leaf_reference(axis, x, height))


def test_leaf_lookup_gives_the_same_leaves_in_any_chunk():
    # Many reading threads take larger chunks (fewer numpy calls, each handing the GIL over);
    # the leaves are elementwise, so any chunk gives the same ones.
    from fedeval.core.axis import LeafLookup, lookup_chunk

    lookup = LeafLookup(AXES[3], 16, np.float64)  # cells that several edges cut
    x = np.random.default_rng(8).random(300_001) * (AXES[3].hi - AXES[3].lo) + AXES[3].lo
    whole = lookup(x, len(x))
    for chunk in (1000, lookup_chunk(2), lookup_chunk(16)):
        assert np.array_equal(lookup(x, chunk), whole)
    assert lookup_chunk(1) == lookup_chunk(2) < lookup_chunk(16) <= 1 << 20
    assert np.array_equal(whole, _leaf_reference(AXES[3], x, 16))


def test_leaf_lookup_edges_are_the_least_score_of_each_leaf():
    from fedeval.core.axis import LeafLookup

    axis = AXES[0]
    for dtype in (np.float32, np.float64):
        lookup = LeafLookup(axis, 14, dtype)
        e = lookup.edges
        assert e.dtype == dtype and np.all(np.diff(e) >= 0)
        below = np.nextafter(e, dtype(-np.inf))
        i = np.arange(1, 1 << 14)
        assert np.all(_leaf_reference(axis, e, 14) >= i)
        assert np.all(_leaf_reference(axis, below, 14) < i)
    # A steep stretch of the warp puts several edges in one fine cell: those take the search.
    assert LeafLookup(AXES[3], 16, np.float64).cut_more.any()


def test_leaf_lookup_is_refused_where_the_range_is_not_exact_in_the_dtype():
    from fedeval.core.axis import leaf_lookup

    assert leaf_lookup(ScoreAxis.linear(0.0, 0.1), 10, "<f4") is None
    assert leaf_lookup(ScoreAxis.linear(0.0, 0.1), 10, "<f8") is not None
