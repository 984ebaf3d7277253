"""Scale (issue 13): `fedeval.evaluate_file` at 10M, 100M and (with --billion) 1B rows against
the floor measured in the same run with the same number of threads.

For each row count, thread count, privacy model (federated, distdp, localdp) and mode
(``default``: the exact values beside each estimate, as a simulation shows them, and 95%
intervals; ``--no-exact``: intervals only), it prints the wall time, rows/s, the peak resident
memory (RSS), the floor's time and the ratio, and the CPU seconds of all threads with their
ratio to the floor's (steadier than wall time on a loaded machine). The floors:

- ``floor+sort`` (for the default mode at 10M rows): read the two columns with pyarrow, one
  ``np.bincount`` of a cell index per row group, and one sort of all the scores (the exact
  values need them sorted);
- ``parallel floor`` (for the default mode at ≥ 100M rows, issue 28): the same read, each row
  group's scores sorted by the thread that read it and kept: the sort's work spread over the
  pool, with no serial sort of all the scores (what the exact values are judged against);
- ``floor`` (for ``--no-exact``): the same without keeping and sorting the scores (a streamed
  read and a bincount, memory independent of n).

Both read the row groups in a pool of the same number of threads as fedeval is given
(``threads=``), and pyarrow's own pools are limited to that number too.

Targets (issues 13 and 28), checked and printed at the end:

- default ≤ 2 × floor+sort at 10M rows (in wall and, beside it, in CPU seconds);
  ``--no-exact`` ≤ 1.2 × floor in CPU seconds; every model;
- default ≤ 1.5 × the parallel floor at ≥ 100M rows, every model;
- ``--no-exact`` peak RSS ≤ 600 MB at 100M rows and flat in n (10M vs 100M); with exact values
  at most the scores' own size (4 bytes a row of float32) + 300 MB;
- with all cores, ≤ 1.5 × the multi-threaded floor at 100M rows ("all cores": those this
  process may run on, as many as the floor is given; the issue's reading is 16);
- a directory of 20 Parquet files gives the same release as one file with the same rows;
- ``--per-client`` ≤ 3 × the fast path at 200k clients.

Data: ``benchmarks/_data/scale_<rows>.parquet`` (gitignored), made on first use: float32 scores
(a logistic of a normal shifted for positives, so nearly every score is distinct: the hard case
for exact values), int8 labels with 30% positives, row groups of 2^20 rows, zstd. 1B rows take
about 5 GB of disk.

Each measurement runs in a fresh process (so peaks do not mix): it runs the task `--repeats`
times and reports the best time and the peak of its first run (``VmHWM`` then: a later run
starts beside what the earlier one left to the allocators, so its high-water mark is not one
evaluation's). With ``--rounds K`` every floor and evaluation is measured K times, interleaved
(round after round, each in the same order), and each CPU ratio is the median of the K ratios of
an evaluation against the floor measured in the same round (``paired``): on a machine shared
with other work whose load drifts over minutes, a ratio of two best-ofs taken minutes apart
moves by tens of percent, a paired one much less. The CPU-second verdicts read the paired ratio.

    .venv/bin/python benchmarks/scale.py                       # 10M and 100M, all cores
    .venv/bin/python benchmarks/scale.py --rows 1e7 --models distdp --rounds 5  # a loaded machine
    .venv/bin/python benchmarks/scale.py --threads 1,16 --billion
    .venv/bin/python benchmarks/scale.py --rows 1e6 --repeats 1 --models distdp

The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "benchmarks" / "_data"
MODELS = ("federated", "distdp", "localdp")
MODES = ("default", "no-exact")
DEFAULT_ROWS = (10_000_000, 100_000_000)
BILLION = 1_000_000_000
ROW_GROUP_ROWS = 1 << 20
FLOOR_CELLS = 1024
PER_CLIENT_CLIENTS = 200_000
DIR_FILES = 20

RATIO_DEFAULT = 2.0
RATIO_PARALLEL = 1.5
RATIO_NO_EXACT = 1.2
RATIO_ALL_CORES = 1.5
PEAK_NO_EXACT_MB = 600.0
EXACT_BYTES_PER_ROW = 4
EXACT_EXTRA_MB = 300.0
PER_CLIENT_RATIO = 3.0
BILLION_DEFAULT_S = 6.0  # issue 28, on 16 cores
BILLION_NO_EXACT_S = 4.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> str:
    """The system's load averages (1, 5, 15 min), printed with the table: on a machine shared
    with other work, ratios measured under load move by tens of percent between runs."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return "load average unknown"
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def all_cores() -> int:
    with contextlib.suppress(AttributeError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------
# Data


def data_path(rows: int) -> Path:
    return DATA_DIR / f"scale_{rows}.parquet"


def _row_group(rng: np.random.Generator, n: int) -> pa.Table:
    y = rng.random(n) < 0.3
    z = rng.standard_normal(n) + 1.2 * y
    score = (1.0 / (1.0 + np.exp(-z))).astype(np.float32)
    return pa.table({"score": score, "label": y.astype(np.int8)})


def ensure_data(rows: int) -> Path:
    """The benchmark file of `rows` rows, written once (seeded) and reused."""
    path = data_path(rows)
    if path.exists():
        with contextlib.suppress(pa.ArrowException, OSError):
            if pq.ParquetFile(path).metadata.num_rows == rows:
                return path
    log(f"writing {path} ({rows:,} rows) ...")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    rng = np.random.default_rng([20261123, rows])
    schema = pa.schema([("score", pa.float32()), ("label", pa.int8())])
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for start in range(0, rows, ROW_GROUP_ROWS):
                n = min(ROW_GROUP_ROWS, rows - start)
                writer.write_table(_row_group(rng, n), row_group_size=ROW_GROUP_ROWS)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _write_part(rows: int, files: int, part: int, path: Path) -> None:
    """Part `part` of `files` of the `rows`-row data, seeded by its place (any process)."""
    groups = np.array_split(np.arange(-(-rows // ROW_GROUP_ROWS)), files)[part]
    rng = np.random.default_rng([20261123, rows, files, part])
    schema = pa.schema([("score", pa.float32()), ("label", pa.int8())])
    tmp = path.with_name(path.name + ".tmp")
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for g in groups:
            n = min(ROW_GROUP_ROWS, rows - int(g) * ROW_GROUP_ROWS)
            writer.write_table(_row_group(rng, n), row_group_size=ROW_GROUP_ROWS)
    os.replace(tmp, path)


def ensure_parts(rows: int, files: int) -> Path:
    """`rows` rows as a directory of `files` Parquet files (the same kind of rows as
    `ensure_data`, other draws), written by a process per file: 1B rows in a few seconds on
    16 cores, where one file is written by one thread."""
    from concurrent.futures import ProcessPoolExecutor

    directory = DATA_DIR / f"scale_{rows}_{files}parts"
    paths = [directory / f"part-{i:03d}.parquet" for i in range(files)]
    if all(p.exists() for p in paths):
        return directory
    log(f"writing {directory} ({rows:,} rows in {files} files) ...")
    directory.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(min(files, all_cores())) as pool:
        n = len(paths)
        list(pool.map(_write_part, [rows] * n, [files] * n, range(n), paths))
    return directory


def row_groups(path: Path) -> list[tuple[Path, int]]:
    """Every (file, row group) of a Parquet file or a directory of them, in order."""
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    return [(f, i) for f in files for i in range(pq.ParquetFile(f).metadata.num_row_groups)]


def ensure_directory(rows: int, files: int = DIR_FILES) -> Path:
    """The same rows as `ensure_data(rows)`, split over `files` Parquet files in a directory."""
    source = ensure_data(rows)
    directory = DATA_DIR / f"scale_{rows}_{files}files"
    if directory.exists() and len(list(directory.glob("*.parquet"))) == files:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    pf = pq.ParquetFile(source)
    groups = np.array_split(np.arange(pf.metadata.num_row_groups), files)
    for i, g in enumerate(groups):
        pq.write_table(
            pf.read_row_groups(list(g)), directory / f"part-{i:02d}.parquet", compression="zstd"
        )
    return directory


def ensure_clients(clients: int) -> Path:
    """One example per client, with a client column: the per-client path's setting."""
    path = DATA_DIR / f"scale_clients_{clients}.parquet"
    if not path.exists():
        t = _row_group(np.random.default_rng([7, clients]), clients)
        t = t.append_column("client", pa.array(np.arange(clients, dtype=np.int64)))
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, path)
    return path


# ---------------------------------------------------------------------------------------------
# The work being timed (each in a fresh child process)


def floor(path: Path, threads: int, sort: bool, sort_groups: bool = False) -> None:
    """Read both columns row group by row group in `threads` threads, one bincount each; with
    `sort`, keep the scores and sort them once; with `sort_groups`, sort each row group's
    scores in the thread that read it, and keep them."""
    groups = row_groups(path)

    def group(at: tuple[Path, int]) -> tuple[np.ndarray, np.ndarray | None]:
        t = pq.ParquetFile(at[0], pre_buffer=False).read_row_group(
            at[1], columns=["score", "label"], use_threads=False
        )
        score = t.column("score").to_numpy()
        label = t.column("label").to_numpy()
        cell = (score * FLOOR_CELLS).astype(np.int64)
        cell += label.astype(np.int64) * (FLOOR_CELLS + 1)
        if sort_groups:
            score = np.sort(score)
        kept = score if sort or sort_groups else None
        return np.bincount(cell, minlength=2 * (FLOOR_CELLS + 1)), kept

    counts = np.zeros(2 * (FLOOR_CELLS + 1), np.int64)
    kept = []
    with ThreadPoolExecutor(threads) as pool:
        for c, s in pool.map(group, groups):
            counts += c
            if s is not None:
                kept.append(s)
    if sort:
        scores = np.concatenate(kept)
        kept.clear()
        scores.sort()


def evaluate(path: Path, threads: int, model: str, mode: str) -> None:
    import fedeval

    fedeval.evaluate_file(path, model=model, exact=mode == "default", threads=threads)


def per_client(path: Path, threads: int, model: str, mode: str) -> None:
    import fedeval

    fedeval.evaluate_file(path, model=model, path=mode, exact=False, ci_draws=0, threads=threads)


def own_peak_rss_mb() -> float:
    """This process's peak RSS in MB (`VmHWM`: its own high-water mark, not the parent's)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def run_child(task: str, path: Path, threads: int, model: str, mode: str, repeats: int) -> None:
    pa.set_cpu_count(threads)
    pa.set_io_thread_count(max(threads, 1))
    work: Callable[[], None] = {
        "floor": lambda: floor(path, threads, sort=False),
        "floor+sort": lambda: floor(path, threads, sort=True),
        "parallel floor": lambda: floor(path, threads, sort=False, sort_groups=True),
        "evaluate": lambda: evaluate(path, threads, model, mode),
        "per-client": lambda: per_client(path, threads, model, mode),
    }[task]
    # pyarrow's first `ChunkedArray.to_numpy` imports pandas (1.1 CPU-s here), which the
    # floors call on every row group: taken before the clock, as the library's imports are
    # below (with `--repeats 1` a floor otherwise timed that import, and at 100M rows read
    # as 1 CPU-s slower than it is).
    pa.chunked_array([pa.array([0.0], pa.float32())]).to_numpy()
    if task in ("evaluate", "per-client"):
        # The library's modules loaded (some lazily, on first use) before the clock starts: a
        # run of `--repeats 1` times the evaluation, not Python's imports. Unseeded, as the
        # timed runs are: a private run's generator loads its own module on first use.
        import fedeval

        rng = np.random.default_rng(0)
        warm = model if model in MODELS else "distdp"
        fedeval.evaluate(rng.integers(0, 2, 1000), rng.random(1000), model=warm)
    best = best_cpu = peak = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        work()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
        peak = min(peak, own_peak_rss_mb())  # the first run's: VmHWM never falls
    print(json.dumps({"seconds": best, "cpu": best_cpu, "peak_mb": peak}))


def measure(
    task: str, path: Path, threads: int, repeats: int, model: str = "-", mode: str = "-"
) -> tuple[float, float, float]:
    """(best seconds, peak RSS MB, best CPU seconds of all its threads) of `task` in a fresh
    interpreter. CPU seconds move less than wall time on a machine others are loading."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", task, str(path)]
    cmd += ["--child-threads", str(threads), "--child-model", model, "--child-mode", mode]
    cmd += ["--repeats", str(repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["seconds"], out["peak_mb"], out["cpu"]


# ---------------------------------------------------------------------------------------------
# Report


@dataclass(frozen=True)
class Result:
    rows: int
    threads: int
    model: str
    mode: str
    seconds: float
    peak_mb: float
    floor_s: float
    cpu: float = float("nan")
    floor_cpu: float = float("nan")
    parallel_s: float = float("nan")  # the parallel floor (default mode)
    paired_cpu: tuple[float, ...] = ()  # each round's CPU over its floor's in that round
    parallel_cpu: float = float("nan")
    paired_parallel: tuple[float, ...] = ()  # the same over the parallel floor's CPU

    @property
    def parallel_ratio(self) -> float:
        return self.seconds / self.parallel_s

    @property
    def cpu_ratio(self) -> float:
        """Best CPU seconds over the floor's best (over every round)."""
        return self.cpu / self.floor_cpu

    @property
    def paired_ratio(self) -> float:
        """The median over the rounds of the CPU ratio to the floor measured beside it in
        the same round (the best-of ratio when there is one round): on a machine whose load
        drifts, each ratio compares runs made seconds apart."""
        return float(np.median(self.paired_cpu)) if self.paired_cpu else self.cpu_ratio

    @property
    def parallel_cpu_ratio(self) -> float:
        """`paired_ratio` against the parallel floor."""
        if self.paired_parallel:
            return float(np.median(self.paired_parallel))
        return self.cpu / self.parallel_cpu

    @property
    def ratio(self) -> float:
        return self.seconds / self.floor_s

    def line(self) -> str:
        return (
            f"{self.rows:>13,}  {self.threads:>3}  {self.model:<9}  {self.mode:<8}  "
            f"{self.seconds:8.2f} s  {self.rows / self.seconds / 1e6:7.1f} M rows/s  "
            f"peak {self.peak_mb:7.0f} MB  floor {self.floor_s:6.2f} s  ratio {self.ratio:5.2f}  "
            f"cpu {self.cpu:6.2f} s ratio {self.cpu_ratio:5.2f}"
            + (f" paired {self.paired_ratio:5.2f}" if len(self.paired_cpu) > 1 else "")
            + (
                f"  parallel floor {self.parallel_s:6.2f} s ratio {self.parallel_ratio:5.2f}"
                f" cpu {self.parallel_cpu_ratio:5.2f}"
                if self.mode == "default"
                else ""
            )
        )


def run_size(
    rows: int, threads: int, models: list[str], repeats: int, files: int = 1, rounds: int = 1
) -> list[Result]:
    """Every floor and every model × mode at `rows` rows on `threads` threads, `rounds` times
    interleaved (each round measures each once, in the same order): each line keeps its best
    over the rounds, and the CPU ratio of each round against the floor measured in that same
    round (`Result.paired_ratio`), so that a floor measured in a quiet minute is not set
    against an evaluation measured in a busy one."""
    path = ensure_data(rows) if files == 1 else ensure_parts(rows, files)
    log(f"{rows:,} rows, {threads} threads: warming the page cache ...")
    measure("floor", path, threads, 1)
    names = ("floor", "floor+sort", "parallel floor")
    tasks = [(name, "-", "-") for name in names]
    tasks += [("evaluate", model, mode) for mode in MODES for model in models]
    runs: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {t: [] for t in tasks}
    for k in range(rounds):
        if rounds > 1:
            log(f"round {k + 1} of {rounds} ({load_average()})")
        for task, model, mode in tasks:
            runs[task, model, mode].append(measure(task, path, threads, repeats, model, mode))

    def best(key: tuple[str, str, str]) -> tuple[float, float, float]:
        got = runs[key]  # (seconds, peak of the first run, CPU seconds) per round
        return min(g[0] for g in got), got[0][1], min(g[2] for g in got)

    floors = {}
    for name in names:
        s, peak, cpu = best((name, "-", "-"))
        floors[name] = s, cpu
        print(
            f"{rows:>13,}  {threads:>3}  {name:<18}  {s:8.2f} s  "
            f"{rows / s / 1e6:7.1f} M rows/s  peak {peak:7.0f} MB  cpu {cpu:6.2f} s",
            flush=True,
        )
    results = []
    for mode in MODES:
        floor_name = "floor+sort" if mode == "default" else "floor"
        floor_s, floor_cpu = floors[floor_name]
        for model in models:
            s, peak, cpu = best(("evaluate", model, mode))
            own = runs["evaluate", model, mode]
            paired, paired_parallel = (
                tuple(e[2] / f[2] for e, f in zip(own, runs[name, "-", "-"], strict=True))
                for name in (floor_name, "parallel floor")
            )
            r = Result(
                rows,
                threads,
                model,
                mode,
                s,
                peak,
                floor_s,
                cpu,
                floor_cpu,
                floors["parallel floor"][0],
                paired,
                floors["parallel floor"][1],
                paired_parallel,
            )
            print(r.line(), flush=True)
            results.append(r)
    return results


def same_release_from_a_directory(rows: int) -> bool:
    """Whether a directory of 20 files gives the release one file with the same rows gives."""
    import fedeval

    one, many = ensure_data(rows), ensure_directory(rows)
    same = True
    for model in MODELS:
        a = fedeval.evaluate_file(one, model=model, seed=5, exact=False, ci_draws=0)
        b = fedeval.evaluate_file(many, model=model, seed=5, exact=False, ci_draws=0)
        same &= bool(np.array_equal(a.run.release.counts, b.run.release.counts))
    return same


def per_client_ratios(
    threads: int, models: list[str], repeats: int
) -> list[tuple[str, float, float]]:
    path = ensure_clients(PER_CLIENT_CLIENTS)
    out = []
    for model in models:
        fast, _, fast_cpu = measure("per-client", path, threads, repeats, model, "fast")
        slow, _, slow_cpu = measure("per-client", path, threads, repeats, model, "per-client")
        # Both take hundredths of a second: three decimals, and the CPU seconds beside (the
        # ratio of wall times swings with other load on the machine).
        print(
            f"per-client  {PER_CLIENT_CLIENTS:,} clients  {model:<9}  fast {fast:6.3f} s  "
            f"per-client {slow:6.3f} s  ratio {slow / fast:5.2f}  "
            f"cpu {fast_cpu:6.3f} s / {slow_cpu:6.3f} s ratio {slow_cpu / fast_cpu:5.2f}",
            flush=True,
        )
        out.append((model, fast, slow))
    return out


def _paired(r: Result) -> str:
    """How a CPU ratio was read: over paired rounds, or best against best."""
    n = len(r.paired_cpu)
    return f", median of {n} paired rounds" if n > 1 else ""


def verdicts(
    results: list[Result],
    directory_same: bool | None,
    clients: list[tuple[str, float, float]],
) -> list[str]:
    lines = []

    def check(ok: bool, text: str) -> None:
        lines.append(f"{'PASS' if ok else 'FAIL'}: {text}")

    at = [r for r in results if r.rows == 10_000_000]
    rs = [r for r in at if r.mode == "default"]
    if rs:
        worst = max(rs, key=lambda r: r.ratio)
        check(
            worst.ratio <= RATIO_DEFAULT,
            f"default at 10M rows ≤ {RATIO_DEFAULT:g}× floor+sort (worst {worst.ratio:.2f}, "
            f"{worst.model}, {worst.threads} threads)",
        )
        worst = max(rs, key=lambda r: r.paired_ratio)
        check(
            worst.paired_ratio <= RATIO_DEFAULT,
            f"default at 10M rows ≤ {RATIO_DEFAULT:g}× floor+sort in CPU seconds (worst "
            f"{worst.paired_ratio:.2f}{_paired(worst)}, {worst.model}, {worst.threads} threads)",
        )
    rs = [r for r in at if r.mode == "no-exact"]
    if rs:
        worst = max(rs, key=lambda r: r.paired_ratio)
        check(
            worst.paired_ratio <= RATIO_NO_EXACT,
            f"no-exact at 10M rows ≤ {RATIO_NO_EXACT:g}× its floor in CPU seconds (worst "
            f"{worst.paired_ratio:.2f}{_paired(worst)}, {worst.model}, {worst.threads} threads)",
        )
    rs = [r for r in results if r.rows >= 100_000_000 and r.mode == "default"]
    if rs:
        worst = max(rs, key=lambda r: r.parallel_ratio)
        check(
            worst.parallel_ratio <= RATIO_PARALLEL,
            f"default at ≥ 100M rows ≤ {RATIO_PARALLEL:g}× the parallel floor (worst "
            f"{worst.parallel_ratio:.2f}, {worst.model}, {worst.rows:,} rows, "
            f"{worst.threads} threads)",
        )
        worst = max(rs, key=lambda r: r.parallel_cpu_ratio)
        check(
            worst.parallel_cpu_ratio <= RATIO_PARALLEL,
            f"default at ≥ 100M rows ≤ {RATIO_PARALLEL:g}× the parallel floor in CPU seconds "
            f"(worst {worst.parallel_cpu_ratio:.2f}{_paired(worst)}, {worst.model}, "
            f"{worst.rows:,} rows, {worst.threads} threads)",
        )
    no_exact = [r for r in results if r.mode == "no-exact"]
    big = [r for r in no_exact if r.rows >= 100_000_000]
    if big:
        top = max(big, key=lambda r: r.peak_mb)
        check(
            top.peak_mb <= PEAK_NO_EXACT_MB,
            f"--no-exact peak at ≥ 100M rows ≤ {PEAK_NO_EXACT_MB:.0f} MB "
            f"(max {top.peak_mb:.0f} MB, {top.model})",
        )
        small = [r for r in no_exact if r.rows == 10_000_000]
        if small:
            lo, hi = max(r.peak_mb for r in small), top.peak_mb
            check(hi <= 1.25 * lo + 50, f"--no-exact peak flat in n ({lo:.0f} → {hi:.0f} MB)")
    exact = [r for r in results if r.mode == "default"]
    if exact:
        worst = max(exact, key=lambda r: r.peak_mb - EXACT_BYTES_PER_ROW * r.rows / 2**20)
        budget = EXACT_BYTES_PER_ROW * worst.rows / 2**20 + EXACT_EXTRA_MB
        check(
            worst.peak_mb <= budget,
            f"with exact values, peak ≤ 4 B/row + 300 MB (worst {worst.peak_mb:.0f} MB against "
            f"{budget:.0f} MB, {worst.model} at {worst.rows:,} rows)",
        )
    cores = all_cores()
    many = [r for r in results if r.rows >= 100_000_000 and r.threads == cores]
    if many and cores > 1:
        worst = max(many, key=lambda r: r.ratio)
        check(
            worst.ratio <= RATIO_ALL_CORES,
            f"all {cores} cores at ≥ 100M rows ≤ {RATIO_ALL_CORES:g}× the multi-threaded floor "
            f"(worst {worst.ratio:.2f}, {worst.model}, {worst.mode})",
        )
    for mode, limit in (("default", BILLION_DEFAULT_S), ("no-exact", BILLION_NO_EXACT_S)):
        rs = [r for r in results if r.rows >= BILLION and r.mode == mode and r.threads >= 16]
        if rs:
            worst = max(rs, key=lambda r: r.seconds)
            check(
                worst.seconds <= limit,
                f"{mode} at 1B rows on {worst.threads} threads ≤ {limit:g} s (worst "
                f"{worst.seconds:.2f} s, {worst.model})",
            )
    if directory_same is not None:
        check(directory_same, f"a directory of {DIR_FILES} Parquet files gives the same release")
    if clients:
        name, fast, slow = max(clients, key=lambda c: c[2] / c[1])
        check(
            slow / fast <= PER_CLIENT_RATIO,
            f"--per-client ≤ {PER_CLIENT_RATIO:g}× the fast path at {PER_CLIENT_CLIENTS:,} "
            f"clients (worst {slow / fast:.2f}, {name})",
        )
    return lines


def parse_ints(text: str) -> list[int]:
    try:
        values = [int(float(part)) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from e
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


def write_bytecode() -> None:
    """The library's bytecode written before any child is timed: an installed package has it,
    while with ``PYTHONDONTWRITEBYTECODE`` set (as in some CI images) and stale ``__pycache__``
    every child compiled each module it imports lazily during the evaluation (`startup.py`
    found 0.09 s of it on a 1,000-row evaluation)."""
    import compileall

    import fedeval

    compileall.compile_dir(Path(fedeval.__file__).parent, quiet=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=parse_ints, default=None, help="default: 1e7,1e8")
    parser.add_argument("--billion", action="store_true", help="add 1B rows (about 5 GB)")
    parser.add_argument(
        "--threads", type=parse_ints, default=None, help="comma-separated (default: all cores)"
    )
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--repeats", type=int, default=2, help="runs per measurement, best kept")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every floor and evaluation this many times, interleaved; CPU ratios are "
        "the median of each round's against its own floor (paired: for a loaded machine)",
    )
    parser.add_argument(
        "--files",
        type=int,
        default=1,
        help="the data as a directory of this many files, written in parallel (default: one "
        "file, written by one thread)",
    )
    parser.add_argument("--skip-per-client", action="store_true")
    parser.add_argument("--skip-directory", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--child-threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--child-model", default="-", help=argparse.SUPPRESS)
    parser.add_argument("--child-mode", default="-", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        task, path = args.child
        run_child(
            task, Path(path), args.child_threads, args.child_model, args.child_mode, args.repeats
        )
        return 0
    write_bytecode()
    rows = args.rows or list(DEFAULT_ROWS)
    if args.billion:
        rows.append(BILLION)
    threads = args.threads or [all_cores()]
    models = [m for m in args.models.split(",") if m]
    print(
        f"# {all_cores()} cores available; threads {threads}; best of {args.repeats}"
        + (f" in each of {args.rounds} paired rounds" if args.rounds > 1 else "")
        + "; "
        f"{load_average()}" + (f"; data in {args.files} files" if args.files > 1 else "")
    )
    results: list[Result] = []
    for n in rows:
        for t in threads:
            results += run_size(n, t, models, args.repeats, args.files, args.rounds)
    directory_same = None
    if not args.skip_directory:
        directory_same = same_release_from_a_directory(min(rows))
        print(f"directory of {DIR_FILES} files, {min(rows):,} rows: same release: {directory_same}")
    clients = [] if args.skip_per_client else per_client_ratios(max(threads), models, args.repeats)
    print(f"# at the end: {load_average()}")
    for line in verdicts(results, directory_same, clients):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
