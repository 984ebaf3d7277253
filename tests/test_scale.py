"""Many-file sources and threaded reading give exactly what one file read serially gives."""

import json
import mmap

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import fedeval
from fedeval.core.errors import InputError, UsageError
from fedeval.estimate.exact import pack
from fedeval.estimate.parallel_sort import RELEASE
from fedeval.tables.scored import read_scored


def _table(n: int = 6000, seed: int = 0, clients: int = 40) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.35
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1).astype(np.float32)
    c = np.array([f"c{i:03d}" for i in rng.integers(0, clients, n)])
    return pa.table({"score": s, "label": y.astype(np.int8), "client": c})


def _split(table: pa.Table, directory, parts: int = 20, fmt: str = "parquet") -> None:
    directory.mkdir()
    bounds = np.linspace(0, table.num_rows, parts + 1).astype(int)
    for i in range(parts):
        piece = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        if fmt == "parquet":
            pq.write_table(piece, directory / f"part-{i:02d}.parquet")
        else:
            pacsv.write_csv(piece, directory / f"part-{i:02d}.csv")


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.fine_counts, b.fine_counts)
    assert (a.rows, a.n_clients) == (b.rows, b.n_clients)
    np.testing.assert_array_equal(a.sorted_scores.negatives, b.sorted_scores.negatives)
    np.testing.assert_array_equal(a.sorted_scores.positives, b.sorted_scores.positives)


def _release(source, model="distdp", **options):
    ev = fedeval.evaluate_file(source, model=model, seed=7, ci_draws=0, **options)
    return ev.run.release


@pytest.mark.parametrize("model", ["federated", "distdp", "localdp"])
def test_a_directory_of_20_parquet_files_gives_the_release_of_one_file(tmp_path, model):
    table = _table()
    pq.write_table(table, tmp_path / "one.parquet")
    _split(table, tmp_path / "many")
    one, many = _release(tmp_path / "one.parquet", model), _release(tmp_path / "many", model)
    np.testing.assert_array_equal(one.counts, many.counts)
    assert one.n_clients == many.n_clients
    _same(read_scored(tmp_path / "one.parquet"), read_scored(tmp_path / "many"))


def test_a_glob_and_a_directory_of_csv_files_read_as_one_file(tmp_path):
    table = _table(seed=1)
    pq.write_table(table, tmp_path / "one.parquet")
    _split(table, tmp_path / "csv", parts=5, fmt="csv")
    _split(table, tmp_path / "pq", parts=7)
    pacsv.write_csv(table, tmp_path / "one.csv")  # CSV scores are read back as float64
    _same(read_scored(tmp_path / "one.csv"), read_scored(tmp_path / "csv"))
    _same(read_scored(tmp_path / "one.parquet"), read_scored(str(tmp_path / "pq" / "*.parquet")))


def test_a_hive_partitioned_dataset_takes_its_columns_from_the_directories(tmp_path):
    table = _table(seed=2, clients=6)
    pq.write_table(table, tmp_path / "one.parquet")
    clients = table.column("client").to_numpy()
    for c in np.unique(clients):
        d = tmp_path / "hive" / f"client={c}"
        d.mkdir(parents=True)
        pq.write_table(table.filter(pa.array(clients == c)).drop(["client"]), d / "0.parquet")
    one, hive = read_scored(tmp_path / "one.parquet"), read_scored(tmp_path / "hive")
    _same(one, hive)
    assert hive.n_clients == 6
    ev = fedeval.evaluate_file(
        tmp_path / "hive", model="federated", seed=1, ci_draws=0, path="per-client"
    )
    assert ev.run.clients == 6


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_threads_change_nothing(tmp_path, threads):
    table = _table(seed=3)
    _split(table, tmp_path / "many", parts=13)
    serial = read_scored(tmp_path / "many", threads=1, keep_examples=True)
    threaded = read_scored(tmp_path / "many", threads=threads, keep_examples=True)
    _same(serial, threaded)
    np.testing.assert_array_equal(serial.examples.unit_scores, threaded.examples.unit_scores)
    np.testing.assert_array_equal(serial.examples.client, threaded.examples.client)
    a = fedeval.evaluate_file(tmp_path / "many", model="distdp", seed=3, threads=1)
    b = fedeval.evaluate_file(tmp_path / "many", model="distdp", seed=3, threads=threads)
    np.testing.assert_array_equal(a.run.release.counts, b.run.release.counts)
    assert a.auc == b.auc and a.curves.roc_area_error == b.curves.roc_area_error


@pytest.mark.parametrize("threads", [1, 4])
def test_the_first_bad_row_in_file_order_is_reported(tmp_path, threads):
    table = _table(seed=4)
    _split(table, tmp_path / "many", parts=6)
    for i, row in ((4, 10), (2, 5)):  # two bad files: the earlier one is named
        path = tmp_path / "many" / f"part-{i:02d}.parquet"
        t = pq.read_table(path)
        score = t.column("score").to_numpy().copy()
        score[row] = 1.5
        pq.write_table(t.set_column(0, "score", pa.array(score)), path)
    with pytest.raises(InputError, match=r"part-02\.parquet', column 'score', row 6: score 1\.5"):
        read_scored(tmp_path / "many", threads=threads)


def test_sources_that_name_no_file(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="is a directory with no data files"):
        read_scored(tmp_path / "empty")
    with pytest.raises(InputError, match="no file matches"):
        read_scored(str(tmp_path / "*.parquet"))
    with pytest.raises(UsageError, match="`threads` must be a positive integer"):
        read_scored(tmp_path / "empty", threads=0)


def test_cli_reads_a_directory_and_a_glob_with_any_threads(tmp_path):
    from typer.testing import CliRunner

    from fedeval.cli import app

    table = _table(seed=5)
    pq.write_table(table, tmp_path / "one.parquet")
    _split(table, tmp_path / "many", parts=4)
    docs = []
    for source, threads in (
        (tmp_path / "one.parquet", "1"),
        (tmp_path / "many", "3"),
        (str(tmp_path / "many" / "part-*.parquet"), "2"),
    ):
        args = ["evaluate", str(source), "--seed", "4", "--format", "json", "--threads", threads]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        docs.append(doc["metrics"])
    assert docs[0] == docs[1] == docs[2]
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "one.parquet"), "--threads", "0"])
    assert result.exit_code == 2


def test_read_progress_is_told_the_rows_and_the_end(tmp_path):
    _split(_table(seed=6), tmp_path / "many", parts=3)
    calls = []
    read_scored(tmp_path / "many", progress=calls.append, threads=2)
    assert calls[-1] is None and calls[-2] == 6000
    assert calls[:-1] == sorted(calls[:-1])


def _to_unit_reference(axis, x):
    """ScoreAxis.to_unit as first written: every value clamped into its own segment."""
    x = np.asarray(x, dtype=np.float64)
    unit = np.interp(x, axis._xs, axis._us)
    seg = np.searchsorted(axis._xs[1:-1], x, side="right")
    lower = axis._us[:-1].copy()
    lower[0] = -np.inf
    upper = np.nextafter(axis._us[1:], -np.inf)
    upper[-1] = np.inf
    return np.clip(unit, lower[seg], upper[seg])


@pytest.mark.parametrize("seed", range(5))
def test_to_unit_clamps_only_near_edges_and_gives_the_same_bits(seed):
    from fedeval.core.axis import ScoreAxis

    rng = np.random.default_rng(seed)
    lo, hi = (0.0, 1.0) if seed % 2 else (-3.0, 5.0)
    t = np.sort(lo + (hi - lo) * rng.random(int(rng.integers(1, 12))))
    axis = ScoreAxis.aligned(lo, hi, t)
    knots = np.array([k for k, _ in axis.knots])
    x = np.concatenate(
        [
            lo + (hi - lo) * rng.random(100_000),
            knots,
            np.nextafter(knots, -np.inf),
            np.nextafter(knots, np.inf),
            np.nextafter(np.float32(knots), -np.inf).astype(np.float64),
            [lo, hi],
        ]
    )
    for values in (x, x.astype(np.float32)):
        np.testing.assert_array_equal(axis.to_unit(values), _to_unit_reference(axis, values))


def test_kept_scores_grow_in_one_buffer_and_sort_like_joined_parts():
    """Batches appended to the growing buffer (across its growth steps, and a wider dtype in a
    later batch) sort to exactly what joining the parts and sorting gives."""
    from fedeval.tables.scored import _Growing

    rng = np.random.default_rng(3)
    parts = [rng.random(int(k)).astype(np.float32) for k in rng.integers(0, 40_000, 12)]
    parts.append(rng.random(5))  # float64: the buffer widens
    parts += [rng.random(70_000).astype(np.float32), np.zeros(0, np.float32)]
    g = _Growing()
    for p in parts:
        g.extend(p)
    out = g.sorted()
    expected = np.sort(np.concatenate(parts))
    assert out.dtype == expected.dtype == np.float64
    np.testing.assert_array_equal(out, expected)
    assert _Growing().sorted().size == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("score_range", [(0.0, 1.0), (-3.0, 5.0)])
def test_leaf_counts_are_the_cells_of_to_unit(tmp_path, dtype, score_range):
    """The streamed leaf counts (one table look-up per score on a warped axis) equal the cells
    of `to_unit` counted directly, scores on and beside every threshold included."""
    from fedeval.core.axis import threshold_axis
    from fedeval.core.hierarchy import cell_index

    lo, hi = score_range
    rng = np.random.default_rng(11)
    thresholds = lo + (hi - lo) * np.sort(rng.random(7))
    near = np.concatenate(
        [thresholds, np.nextafter(thresholds, -np.inf), np.nextafter(thresholds, np.inf)]
    )
    s = np.concatenate([lo + (hi - lo) * rng.random(50_000), near, [lo, hi]]).astype(dtype)
    s = np.clip(s, lo, hi)
    y = rng.random(len(s)) < 0.4
    pq.write_table(pa.table({"score": s, "label": y}), tmp_path / "t.parquet")
    axis = threshold_axis(score_range, thresholds)
    data = read_scored(tmp_path / "t.parquet", score_range=score_range, axis=axis, resolution=14)
    cells = cell_index(axis.to_unit(s), 14)
    expected = np.stack(
        [np.bincount(cells[~y], minlength=1 << 14), np.bincount(cells[y], minlength=1 << 14)]
    )
    np.testing.assert_array_equal(data.fine_counts, expected)


def test_parquet_rows_come_from_the_footers_and_only_for_parquet(tmp_path):
    from fedeval.tables.sources import parquet_rows

    table = _table(seed=8)
    pq.write_table(table, tmp_path / "one.parquet")
    _split(table, tmp_path / "many", parts=4)
    _split(table, tmp_path / "csv", parts=2, fmt="csv")
    assert parquet_rows(tmp_path / "one.parquet") == parquet_rows(tmp_path / "many") == 6000
    assert parquet_rows(str(tmp_path / "many" / "*.parquet")) == 6000
    assert parquet_rows(tmp_path / "csv") is None and parquet_rows("-") is None
    assert parquet_rows(tmp_path / "missing.parquet") is None


@pytest.mark.parametrize("mapped", [False, True])
def test_a_buffer_sized_ahead_sorts_like_one_that_grows(mapped):
    """A buffer sized ahead (in numpy's memory, or a private anonymous map: how the keys are
    kept when the rows are known), exactly or too small (it then leaves the map and grows),
    sorts to what joining the parts and sorting gives."""
    from fedeval.tables.scored import _Growing

    rng = np.random.default_rng(9)
    parts = [rng.random(int(k)).astype(np.float32) for k in rng.integers(0, 50_000, 9)]
    total = sum(len(p) for p in parts)
    results = []
    for capacity in (0, total, total // 3):  # none, exact, too small (then it grows)
        g = _Growing(capacity)
        g.mapped = mapped and capacity > 0
        for p in parts:
            g.extend(p)
        assert (g.source is not None) == (mapped and capacity == total)
        results.append(g.sorted())
    for r in results:
        np.testing.assert_array_equal(r, np.sort(np.concatenate(parts)))


@pytest.mark.skipif(RELEASE is None, reason="no private anonymous maps here")
@pytest.mark.parametrize("threads", [1, 2])
def test_keys_of_a_file_of_known_rows_are_kept_in_an_anonymous_map(tmp_path, threads):
    """With the rows known from the Parquet footers, the packed keys are copied into a private
    anonymous map (not a numpy allocation, for which numpy asks the system for huge pages,
    and the system may compact memory on their first touch), and sort like every key."""
    table = _table(seed=5)
    pq.write_table(table, tmp_path / "t.parquet")
    keys = read_scored(tmp_path / "t.parquet", threads=threads).sorted_scores.keys
    root = keys
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    assert isinstance(root.obj if isinstance(root, memoryview) else root, mmap.mmap)
    s, y = table.column("score").to_numpy(), table.column("label").to_numpy() == 1
    np.testing.assert_array_equal(keys, np.sort(pack(s, y)))
