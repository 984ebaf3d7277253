"""Packed keys (`fedeval.estimate.exact.pack`) and the one pass over them: every exact value is
the same as from the two classes sorted apart, for ties, point masses, one class, all scores
equal; and the area pass equals the whole-curve oracle for estimates of any shape."""

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedeval.estimate import area_pass, curve_areas
from fedeval.estimate import diagnostics as D
from fedeval.estimate.exact import (
    SortedScores,
    exact_auc,
    exact_ece_of,
    exact_threshold_counts,
    pack,
    packable,
    unpack,
    widen,
)
from fedeval.estimate.roc_pr import Curves, leaf_curves
from fedeval.tables.scored import read_scored, scored_from_arrays


def _scores(seed: int, n: int, kind: str, dtype=np.float32):
    """(scores, positives) of a named shape: smooth, rounded (ties), point masses, one
    class, or every score equal."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = 1 / (1 + np.exp(-(rng.normal(size=n) + 1.2 * y)))
    if kind == "rounded":
        s = np.round(s, 2)
    elif kind == "masses":  # most scores on three values, 0 and 1 among them
        s = np.where(rng.random(n) < 0.8, rng.choice([0.0, 0.5, 1.0], n), s)
    elif kind == "positives only":
        y[:] = True
    elif kind == "negatives only":
        y[:] = False
    elif kind == "all equal":
        s[:] = 0.25
    return s.astype(dtype), y


KINDS = ["smooth", "rounded", "masses", "positives only", "negatives only", "all equal"]


def _split(s, y) -> SortedScores:
    return SortedScores(np.sort(s[~y]), np.sort(s[y]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_keys_sort_as_score_then_label(dtype):
    s, y = _scores(0, 5000, "rounded", dtype)
    keys = pack(s, y)
    order = np.argsort(keys, kind="stable")
    expected = np.lexsort((y, s))
    np.testing.assert_array_equal(s[order], s[expected])
    np.testing.assert_array_equal(y[order], y[expected])
    np.testing.assert_array_equal(unpack(keys, s.dtype), s)
    np.testing.assert_array_equal(keys & 1, y)


def test_negative_zero_packs_as_zero_and_packable_needs_non_negative_floats():
    s = np.array([-0.0, 0.0, 0.5], np.float32)
    keys = pack(s, np.array([True, False, False]))
    assert keys[0] >> 1 == keys[1] >> 1 == 0
    assert packable(s) and packable(s.astype(np.float64))
    assert not packable(np.array([-0.1, 0.2]))
    assert not packable(np.array([np.nan, 0.2]))
    assert not packable(np.array([1, 2]))


def test_widened_keys_are_the_float64_keys():
    s, y = _scores(1, 2000, "smooth")
    np.testing.assert_array_equal(widen(pack(s, y)), pack(s.astype(np.float64), y))


@pytest.mark.parametrize("block", [1, 3, 64, 1 << 16])
@pytest.mark.parametrize("descending", [False, True])
def test_key_ranges_cover_every_key_and_never_cut_a_run(block, descending):
    s, y = _scores(2, 3000, "masses")
    packed = SortedScores.from_arrays(s, y)
    assert packed.keys is not None
    ranges = list(packed.key_ranges(block, descending=descending))
    if descending:
        ranges = ranges[::-1]
    assert ranges[0][0] == 0 and ranges[-1][1] == len(s)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    score = packed.keys >> 1
    assert all(score[lo - 1] != score[lo] for lo, _ in ranges[1:])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packed_and_split_give_the_same_exact_values(kind, dtype):
    s, y = _scores(3, 4000, kind, dtype)
    packed, split = SortedScores.from_arrays(s, y), _split(s, y)
    assert packed.keys is not None and split.keys is None
    assert (packed.n_positives, packed.n_negatives) == (split.n_positives, split.n_negatives)
    for name in ("values", "negatives", "positives"):
        np.testing.assert_array_equal(getattr(packed.distinct, name), getattr(split.distinct, name))
    np.testing.assert_array_equal(packed.positives, split.positives)
    np.testing.assert_array_equal(packed.negatives, split.negatives)
    assert exact_auc(packed) == exact_auc(split) or np.isnan(exact_auc(split))
    # thresholds on scores, on their float64 neighbours, at the ends and beyond
    on = np.unique(s)[:: max(1, len(np.unique(s)) // 7)].astype(np.float64)
    thr = np.concatenate(
        [on, np.nextafter(on, -1), np.nextafter(on, 2), [0.0, 1e-300, 0.25, 1.0, 1.5]]
    )
    counts = exact_threshold_counts(packed, thr), exact_threshold_counts(split, thr)
    for a, b in zip(*counts, strict=True):
        np.testing.assert_array_equal(a, b)
    assert exact_ece_of(packed) == pytest.approx(exact_ece_of(split), rel=1e-12, abs=1e-15)
    f = np.sqrt
    assert exact_ece_of(packed, transform=f) == pytest.approx(exact_ece_of(split, transform=f))
    est = leaf_curves(np.array([[3.0, 2.0, 1.0, 1.0], [1.0, 1.0, 2.0, 3.0]]), 4)[0]
    a, b = D.exact_diagnostics(packed, est, block=97), D.exact_diagnostics(split, est, block=97)
    for name in ("thresholds", "tpr", "fpr", "precision"):
        np.testing.assert_array_equal(getattr(a[0], name), getattr(b[0], name))
    for u, v in [(a[0].roc_auc, b[0].roc_auc), (a[1], b[1]), (a[2], b[2])]:
        assert u == pytest.approx(v, rel=1e-12, abs=1e-15) or (np.isnan(u) and np.isnan(v))


def _polyline(rng, k: int, lo: float, hi: float, jumps: bool):
    """A random curve of k points with x from lo to hi (vertical jumps where x repeats)."""
    x = np.sort(rng.uniform(lo, hi, k))
    x[0], x[-1] = lo, hi
    if jumps:
        x[1::4] = x[::4][: len(x[1::4])]
    return x, rng.random(k)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("block", [1, 7, 1 << 16])
@pytest.mark.parametrize("special_batch", [1, 3, area_pass.SPECIAL_BATCH])
def test_area_pass_equals_the_whole_curve_oracle_for_any_estimate(
    seed, block, special_batch, monkeypatch
):
    """Estimates that start before or after the exact curve, end before or after it, jump, and have
    knots on its points: each block's fast sum plus its re-integrated segments (integrated a
    batch at a time, whatever the batch), and the grid beyond the exact curve's ends, equal
    `_area_between` on the whole curves."""
    monkeypatch.setattr(area_pass, "SPECIAL_BATCH", special_batch)
    rng = np.random.default_rng(seed)
    s, y = _scores(seed, 600, "rounded" if seed % 2 else "smooth")
    ss = SortedScores.from_arrays(s, y)
    full = curve_areas.exact_curves(ss)
    lo, hi = rng.choice([0.0, 0.002, 0.3, -0.1]), rng.choice([1.0, 0.9, 1.2])
    fx, fy = _polyline(rng, 40, lo, hi, jumps=seed % 3 == 0)
    fx[5:8] = full.fpr[[len(full.fpr) // k for k in (5, 4, 2)]]  # knots on exact points
    fx.sort()
    rx, ry = _polyline(rng, 30, lo, hi, jumps=seed % 3 == 1)
    est = Curves(np.zeros(len(rx)), rx, np.linspace(0, 1, len(rx)), ry)  # PR: recall rx
    roc_est = Curves(np.zeros(len(fx)), fy, fx, fy)
    _, roc, _ = D.exact_diagnostics(ss, roc_est, block=block)
    assert roc == pytest.approx(curve_areas.roc_area_error(roc_est, full), rel=1e-11, abs=1e-15)
    _, _, pr = D.exact_diagnostics(ss, est, block=block)
    assert pr == pytest.approx(curve_areas.pr_area_error(est, full), rel=1e-11, abs=1e-15)


def test_read_scores_are_packed_and_widen_when_a_later_file_is_float64(tmp_path):
    s, y = _scores(5, 3000, "rounded")
    for i, part in enumerate((slice(0, 1000), slice(1000, 3000))):
        dtype = pa.float32() if i == 0 else pa.float64()
        t = pa.table({"score": pa.array(s[part], dtype), "label": y[part].astype(np.int8)})
        pq.write_table(t, tmp_path / f"part-{i}.parquet")
    data = read_scored(tmp_path)
    got = data.sorted_scores
    assert got is not None and got.keys is not None and got.dtype == np.float64
    want = SortedScores.from_arrays(s.astype(np.float64), y)
    np.testing.assert_array_equal(got.keys, want.keys)
    assert got.n_positives == int(y.sum())


def test_scores_on_a_signed_range_keep_the_classes_apart():
    s, y = _scores(6, 2000, "smooth", np.float64)
    data = scored_from_arrays(y, s * 2 - 1, score_range=(-1.0, 1.0))
    got = data.sorted_scores
    assert got is not None and got.keys is None
    np.testing.assert_array_equal(got.positives, np.sort(s[y] * 2 - 1))
    assert exact_auc(got) == exact_auc(SortedScores.from_arrays(s, y))


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_keys_sorted_in_another_thread_are_the_same(tmp_path, threads):
    s, y = _scores(7, 50_000, "rounded")
    pq.write_table(
        pa.table({"score": s, "label": y.astype(np.int8)}),
        tmp_path / "a.parquet",
        row_group_size=4096,
    )
    got = read_scored(tmp_path / "a.parquet", threads=threads).sorted_scores
    assert got is not None
    np.testing.assert_array_equal(got.keys, SortedScores.from_arrays(s, y).keys)
