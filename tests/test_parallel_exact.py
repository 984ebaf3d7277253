"""The exact values with threads: the sorted runs merged in a pool (`merge_sorted_runs`) give
the one sort of all the keys, the blocked diagnostics give the same floats bit for bit on any
number of threads, and a file read with threads gives the same exact values as one thread and
as scikit-learn (ties, duplicates, one class, all scores equal)."""

from __future__ import annotations

import itertools
import mmap
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from fedeval.estimate import parallel_sort
from fedeval.estimate.diagnostics import exact_diagnostics
from fedeval.estimate.exact import SortedScores, exact_auc, exact_threshold_counts
from fedeval.estimate.parallel_sort import anonymous_map, merge_sorted_runs
from fedeval.estimate.roc_pr import leaf_curves
from fedeval.tables import scored
from fedeval.tables.scored import MERGE_THREADS, read_scored


def _keys(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "distinct":
        return rng.integers(0, 2**32, n, dtype=np.uint32)
    if kind == "ties":
        return rng.integers(0, 37, n).astype(np.uint32)
    if kind == "equal":
        return np.full(n, 12345, np.uint32)
    return (rng.pareto(0.7, n) * 1000).astype(np.uint64)  # heavy-tailed, float64-width keys


def _mapped_runs(keys: np.ndarray, cuts: np.ndarray):
    """`keys` copied into an anonymous map, as sorted runs between `cuts`."""
    source = anonymous_map(keys.nbytes)
    buf = np.frombuffer(source, keys.dtype)[: len(keys)]
    buf[:] = keys
    runs = [buf[a:b] for a, b in itertools.pairwise(cuts)]
    for r in runs:
        r.sort()
    return source, buf, runs


@pytest.mark.parametrize("kind", ["distinct", "ties", "equal", "skewed"])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_merged_runs_are_the_sort_of_all_keys(kind, threads, monkeypatch):
    monkeypatch.setattr(parallel_sort, "RANGE_KEYS", 4096)  # many ranges at this size
    rng = np.random.default_rng(len(kind) * 10 + threads)
    n = 60_000
    keys = _keys(kind, n, rng)
    cuts = np.unique(np.r_[0, rng.integers(0, n, 9), n, n // 2, n // 2 + 1])  # runs of 1 too
    source, buf, runs = _mapped_runs(keys, cuts)
    got = merge_sorted_runs(runs, threads, source, list(cuts[:-1]))
    np.testing.assert_array_equal(got, np.sort(keys))
    if sys.platform.startswith("linux"):
        # the runs' whole pages were given back as they were gathered: they read as zeros
        page = mmap.PAGESIZE // keys.dtype.itemsize
        assert np.count_nonzero(buf) <= (len(cuts) + 1) * 2 * page


@pytest.mark.parametrize("piece_keys", [0, 1 << 40])  # every range by np.take; by pieces
@pytest.mark.parametrize("lag", [1, None])  # given back after every range; the default lag
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("libc", [True, False])  # the C library's madvise; mmap.madvise
def test_merge_gives_back_only_gathered_pages(piece_keys, lag, threads, libc, monkeypatch):
    """The merge's result is the sort of the keys whichever way each range is gathered, and
    its give-backs free only pages whose keys were gathered (the keys are never 0, so a page
    freed too early reads as zeros and shows in the result), every run's whole pages in the
    end, with one `madvise` per run at most each time it gives back."""
    if not sys.platform.startswith("linux") or parallel_sort.RELEASE is None:
        pytest.skip("pages are given back on Linux")
    if not libc:
        monkeypatch.setattr(parallel_sort, "USE_LIBC", False)
    elif parallel_sort._libc_madvise() is None:
        pytest.skip("no C library madvise here")
    monkeypatch.setattr(parallel_sort, "RANGE_KEYS", 2048)
    monkeypatch.setattr(parallel_sort, "PIECE_KEYS", piece_keys)
    monkeypatch.setattr(parallel_sort, "GATHER_KEYS", 1000)  # takes cut inside a range
    if lag is not None:
        monkeypatch.setattr(parallel_sort, "RELEASE_MIN_BYTES", lag)
        monkeypatch.setattr(parallel_sort, "RELEASE_MAX_BYTES", lag)
    rng = np.random.default_rng(7 + threads)
    n = 200_000
    keys = rng.integers(1, 2**32, n, dtype=np.uint32)
    cuts = np.unique(np.r_[0, rng.integers(0, n, 40), n, 5000, 5001])
    given: list[tuple[int, int]] = []  # each page range given back (offset, length in bytes)
    real = parallel_sort.give_back_pages

    def record(source, address, start, length):
        given.append((start, length))
        real(source, address, start, length)

    monkeypatch.setattr(parallel_sort, "give_back_pages", record)
    source = anonymous_map(keys.nbytes)
    buf = np.frombuffer(source, keys.dtype)
    buf[:] = keys
    runs = [buf[a:b] for a, b in itertools.pairwise(cuts)]
    for r in runs:
        r.sort()
    got = merge_sorted_runs(runs, threads, source, list(cuts[:-1]))
    np.testing.assert_array_equal(got, np.sort(keys))
    page = mmap.PAGESIZE
    freed = np.zeros(n, bool)
    for start, length in given:
        assert start % page == 0 and length % page == 0 and length > 0
        assert not freed[start // 4 : (start + length) // 4].any()  # each page once
        freed[start // 4 : (start + length) // 4] = True
    # every whole page inside a run, and no other, given back
    whole = np.zeros(n, bool)
    for a, b in itertools.pairwise(cuts):
        lo, hi = -(-int(a) * 4 // page) * page // 4, int(b) * 4 // page * page // 4
        whole[lo : max(lo, hi)] = True
    np.testing.assert_array_equal(freed, whole)
    assert np.count_nonzero(buf[whole]) == 0
    ranges = max(4 * threads, -(-n // 2048))
    times = (
        ranges
        if lag == 1
        else -(-keys.nbytes // parallel_sort.release_keys(keys.nbytes, 4) // 4) + 1
    )
    assert len(given) <= (len(cuts) - 1) * times


@pytest.mark.parametrize("kind", ["distinct", "ties", "skewed"])
def test_splitters_cut_ranges_of_about_equal_size(kind):
    """Runs drawn from one distribution, or each from its own part of the values (a file
    sorted by score): no range holds much more than its share. (Sampled at the same points of
    each run, the last range held the top quarter of all the keys or more.) Bound: 64 sampled
    keys a range, so a range's count is off by about 1/8 of its share, 2× being 8 of those."""
    rng = np.random.default_rng(3)
    keys = _keys(kind, 954 * 2000, rng)
    if kind == "skewed":
        keys.sort()  # each run its own slice of the values
    runs = [np.sort(keys[i : i + 2000]) for i in range(0, len(keys), 2000)]
    ranges = 477
    split = parallel_sort._splitters(runs, ranges)
    sizes = sum(np.diff(np.r_[0, np.searchsorted(r, split), len(r)]) for r in runs)
    share = len(keys) / ranges
    if kind == "ties":  # 37 values: a range can hold no less than a value's keys
        assert sizes.max() <= np.bincount(keys).max() + 2 * share
    else:
        assert sizes.max() <= 2 * share


@pytest.mark.parametrize("threads", [1, 3])
def test_merge_of_empty_and_single_runs(threads):
    empty = np.zeros(0, np.uint32)
    assert len(merge_sorted_runs([], threads)) == 0
    assert len(merge_sorted_runs([empty, empty], threads)) == 0
    one = np.sort(np.random.default_rng(0).integers(0, 100, 1000).astype(np.uint32))
    np.testing.assert_array_equal(merge_sorted_runs([empty, one, empty], threads), one)
    np.testing.assert_array_equal(merge_sorted_runs([one[:1]], threads), one[:1])


def _scores(kind: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = 1 / (1 + np.exp(-(rng.normal(size=n) + 1.2 * y)))
    if kind == "ties":
        s = np.round(s, 2)
    elif kind == "duplicates":
        s = rng.choice(np.round(s[:50], 4), n)  # few distinct values, each many times
    elif kind == "one-class":
        y[:] = True
    elif kind == "all-equal":
        s[:] = 0.625
    elif kind == "clipped":
        s = np.clip(np.round(s * 3 - 1, 3), 0, 1)  # exactly 0 and 1 for many
    return s.astype(np.float32), y


KINDS = ["distinct", "ties", "duplicates", "one-class", "all-equal", "clipped"]


@pytest.mark.parametrize("kind", KINDS)
def test_diagnostics_the_same_bit_for_bit_on_any_threads(kind):
    s, y = _scores(kind, 7000, 1)
    ss = SortedScores.from_arrays(s, y)
    leaves = np.stack([np.histogram(s[~y], 32, (0, 1))[0], np.histogram(s[y], 32, (0, 1))[0]])
    est = leaf_curves(leaves.astype(float) + 0.5, 16)[0]
    one = exact_diagnostics(ss, est, block=64, cells=40, threads=1)
    for threads in (2, 4):
        many = exact_diagnostics(ss, est, block=64, cells=40, threads=threads)
        assert (many[1], many[2]) == (one[1], one[2]) or np.isnan(one[1])
        assert many[0].roc_auc == one[0].roc_auc or np.isnan(one[0].roc_auc)
        assert many[0].average_precision == one[0].average_precision or np.isnan(
            one[0].average_precision
        )
        for name in ("thresholds", "tpr", "fpr", "precision"):
            np.testing.assert_array_equal(getattr(many[0], name), getattr(one[0], name))


@pytest.mark.parametrize("kind", KINDS)
def test_file_read_with_threads_gives_the_same_exact_values(kind, tmp_path, monkeypatch):
    merges = []

    def merge(runs, *args):
        merges.append(len(runs))
        return merge_sorted_runs(runs, *args)

    monkeypatch.setattr(scored, "merge_sorted_runs", merge)
    s, y = _scores(kind, 30_000, 2)
    path = tmp_path / "scores.parquet"
    # small row groups: one sorted run each, merged at the end
    pq.write_table(pa.table({"score": s, "label": y.astype(np.int8)}), path, row_group_size=2500)
    thr = np.array([0.0, 0.25, 0.5, 0.625, 0.99, 1.0])
    results = []
    for threads in (1, 2, MERGE_THREADS, MERGE_THREADS + 3):
        ss = read_scored(path, threads=threads).sorted_scores
        assert ss is not None
        curves = exact_diagnostics(ss, block=512)[0]
        results.append(
            (
                ss.keys.copy(),
                exact_auc(ss),
                curves.average_precision,
                exact_threshold_counts(ss, thr),
            )
        )
    assert merges == [12, 12]  # one run a row group, merged with MERGE_THREADS and more
    for keys, auc, ap, (tp, fp) in results[1:]:
        np.testing.assert_array_equal(keys, results[0][0])
        assert auc == results[0][1] or np.isnan(auc)
        assert ap == results[0][2] or np.isnan(ap)
        np.testing.assert_array_equal(tp, results[0][3][0])
        np.testing.assert_array_equal(fp, results[0][3][1])
    _, auc, ap, (tp, fp) = results[-1]
    np.testing.assert_array_equal(tp, [(s[y] >= t).sum() for t in thr])
    np.testing.assert_array_equal(fp, [(s[~y] >= t).sum() for t in thr])
    if kind == "one-class":
        assert np.isnan(auc)
        return
    assert auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert ap == pytest.approx(average_precision_score(y, s), abs=1e-12)


def test_directory_of_float32_then_float64_files_with_threads(tmp_path):
    """A later file of wider scores turns the kept runs into float64 keys: the result is still
    the sort of all the scores, the same on one thread and on several."""
    s, y = _scores("ties", 12_000, 3)
    for i, dtype in enumerate([np.float32, np.float64, np.float32]):
        part = slice(4000 * i, 4000 * (i + 1))
        table = pa.table({"score": s[part].astype(dtype), "label": y[part].astype(np.int8)})
        pq.write_table(table, tmp_path / f"part-{i}.parquet", row_group_size=1000)
    one = read_scored(tmp_path, threads=1).sorted_scores
    many = read_scored(tmp_path, threads=MERGE_THREADS + 1).sorted_scores
    assert one is not None and many is not None and many.dtype == np.float64
    np.testing.assert_array_equal(many.keys, one.keys)
    assert exact_auc(many) == exact_auc(one) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("kind", ["distinct", "ties"])
def test_block_chosen_from_threads_and_memory_gives_the_same_values(kind, monkeypatch):
    """On many threads `exact_diagnostics` takes larger blocks (`exact_block`), within
    EXACT_MEMORY for threads + 1 blocks at the stated bytes a key and a distinct score; the
    values are scikit-learn's (AP to 1e-12: its float sum is added a block at a time) and the
    thinned curves those of the one-thread default."""
    from fedeval.estimate import diagnostics

    monkeypatch.setattr(diagnostics, "EXACT_BLOCK", 1 << 10)  # the rule at a test's size
    monkeypatch.setattr(diagnostics, "FEW_THREADS_BLOCK", 1 << 10)
    monkeypatch.setattr(diagnostics, "EXACT_BLOCK_MAX", 1 << 14)
    monkeypatch.setattr(diagnostics, "EXACT_MEMORY", 1 << 23)
    s, y = _scores(kind, 200_000, 5)
    ss = SortedScores.from_arrays(s, y)
    assert diagnostics.exact_block(ss, 2) == 1 << 10
    f = diagnostics.distinct_fraction(ss)
    true_f = len(np.unique(s)) / len(s)
    assert abs(f - true_f) < 0.1
    per_key = diagnostics.KEY_BYTES + diagnostics.DISTINCT_BYTES * f
    for threads in (3, 8, 16):
        block = diagnostics.exact_block(ss, threads)
        assert 1 << 10 <= block <= 1 << 14
        assert block == 1 << 10 or (threads + 1) * block * per_key <= 1 << 23
    wide = diagnostics.exact_block(ss, 16)
    assert wide > 1 << 10  # the rule does take larger blocks here
    one = exact_diagnostics(ss, threads=1)[0]
    many = exact_diagnostics(ss, threads=16)[0]
    assert many.roc_auc == one.roc_auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert many.average_precision == pytest.approx(one.average_precision, rel=1e-12, abs=0)
    assert many.average_precision == pytest.approx(average_precision_score(y, s), abs=1e-12)
    for name in ("thresholds", "tpr", "fpr", "precision"):
        np.testing.assert_array_equal(getattr(many, name), getattr(one, name))


@pytest.mark.parametrize("kind", ["distinct", "ties", "clipped"])
def test_positive_counts_and_ece_the_same_in_a_pool(kind, monkeypatch):
    """The positives before each block and the ECE's bin sums are made in a pool of
    `threads`, many parts each here: the counts are those of the keys, and the ECE is the same
    float on one thread and on four (each bin's parts added in order), and the direct sum's
    to 1e-12."""
    from fedeval.estimate import exact
    from fedeval.estimate.exact import exact_ece_of

    monkeypatch.setattr(exact, "DISTINCT_BLOCK", 256)
    monkeypatch.setattr(exact, "COUNT_KEYS", 1024)
    monkeypatch.setattr(exact, "ECE_BLOCK", 1000)
    s, y = _scores(kind, 50_000, 6)
    eces, counts = [], []
    at = np.r_[0, np.random.default_rng(0).integers(0, len(s), 50), len(s)]
    for threads in (1, 4):
        ss = SortedScores.from_arrays(s, y)
        ss.threads = threads
        eces.append(exact_ece_of(ss, 15))
        counts.append([ss.positives_below(int(i)) for i in at])
        keys = ss.keys
    assert eces[0] == eces[1]
    assert counts[0] == counts[1] == [int(np.count_nonzero(keys[:i] & 1)) for i in at]
    bins = np.minimum((s.astype(np.float64) * 15).astype(int), 14)
    direct = np.abs(np.bincount(bins, y, 15) - np.bincount(bins, s.astype(np.float64), 15))
    assert eces[0] == pytest.approx(direct.sum() / len(s), rel=1e-12)


@pytest.mark.parametrize("kind", ["ties", "duplicates"])
def test_exact_pass_beside_the_release_gives_the_same_evaluation(kind, tmp_path, monkeypatch):
    """With several threads `evaluate_file` starts the exact pass in a thread of its own before
    the release's intervals (`start_curves`), on one thread it runs it inline after them: the
    whole evaluation (estimates, intervals, exact values, area errors, the thinned exact
    curves) is the same bit for bit, and the pass ran where said."""
    import threading

    import fedeval
    from fedeval.api import curves as api_curves
    from fedeval.estimate import diagnostics

    ran_on: list[str] = []

    def recorded(*args, **kwargs):
        ran_on.append(threading.current_thread().name)
        return exact_diagnostics(*args, **kwargs)

    monkeypatch.setattr(diagnostics, "exact_diagnostics", recorded)
    monkeypatch.setattr(api_curves, "exact_diagnostics", recorded)
    s, y = _scores(kind, 8000, 3)
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.table({"score": s, "label": y.astype(np.int8)}), path, row_group_size=2000)
    seen = []
    for threads in (1, 2, 3):
        ev = fedeval.evaluate_file(path, model="distdp", seed=11, threads=threads)
        c = ev.curves
        assert c.exact is not None
        seen.append(
            (
                repr((ev.auc, ev.thresholds, ev.ece, c.roc_auc, c.average_precision)),
                repr((c.roc_area_error, c.pr_area_error)),
                [a.tobytes() for a in (c.exact.thresholds, c.exact.tpr, c.exact.precision)],
            )
        )
    assert ran_on[0] == "MainThread"
    assert all(name.startswith("fedeval-exact-pass") for name in ran_on[1:]), ran_on
    assert seen[1] == seen[0]
    assert seen[2] == seen[0]
