"""Speed and memory of `fedeval.evaluate_file` against the floor, at 1M and 10M rows.

For each row count and privacy model (federated, distdp, localdp), this prints the wall time of
``evaluate_file(path, model=m, seed=1, exact=…, ci_draws=…)`` in three kinds of run:
``protocol`` (the release and its estimates only), ``+intervals`` (plus the 95% intervals, the
default when no truth is known) and ``+exact`` (plus the exact values a simulation reports);
the time of the floor (reading the two columns with pyarrow, converting them to numpy, and one
``np.bincount`` on a cell index); their ratio; and the peak resident memory (RSS) of the run.

Targets (the issue): ratio ≤ 2 for every model for the protocol's own cost, and peak RSS under
1 GB at 10M rows (the file is streamed in record batches). Intervals add a fixed cost (noise
redrawn 200 times, curves rebuilt 20 times) that does not grow with n; exact values keep and
sort the raw scores. Those rows are reported for information.

Data: ``benchmarks/_data/scores_<rows>.parquet`` (gitignored), made on first use by resampling
the rows of ``sample_data/scores.parquet`` with a seeded bootstrap, written in row groups of
2^20 rows with zstd, like the sample (float32 scores, int8 labels).

Times are the best of 3 runs at 1M rows and of 2 at 10M (``--repeats`` overrides). Each peak is
measured in a fresh subprocess that runs the work once, so peaks do not mix; it is the child's
``VmHWM`` (``ru_maxrss`` inherits the parent's high-water mark across exec on Linux).

    .venv/bin/python benchmarks/speed.py                     # 1M and 10M rows (about 30 s)
    .venv/bin/python benchmarks/speed.py --rows 1000000 --repeats 1
    .venv/bin/python benchmarks/speed.py --check             # exit 1 if a target is missed

The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "scores.parquet"
DATA_DIR = ROOT / "benchmarks" / "_data"
MODELS = ("federated", "distdp", "localdp")
DEFAULT_ROWS = (1_000_000, 10_000_000)
ROW_GROUP_ROWS = 1 << 20
DATA_SEED = 20231
FLOOR_CELLS = 1024

RATIO_TARGET = 2.0
PEAK_TARGET_MB = 1024.0
PEAK_TARGET_ROWS = 10_000_000
"""The memory target applies to runs of at least this many rows."""

FLOOR = "floor"
"""The `--child` task name of the floor (any other name is a privacy model)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Data


def data_path(rows: int) -> Path:
    return DATA_DIR / f"scores_{rows}.parquet"


def ensure_data(rows: int) -> Path:
    """The benchmark file of `rows` rows, made from the sample by a seeded bootstrap if absent."""
    path = data_path(rows)
    if path.exists():
        with contextlib.suppress(pa.ArrowException, OSError):
            if pq.ParquetFile(path).metadata.num_rows == rows:
                return path
        log(f"{path} is unreadable or has the wrong row count: remaking it")
    if not SAMPLE.exists():
        sys.exit(f"{SAMPLE} is missing: make it first with `make sample`.")
    log(f"writing {path} ({rows:,} rows resampled from {SAMPLE.name}) ...")
    sample = pq.read_table(SAMPLE, columns=["score", "label"])
    score = sample.column("score").to_numpy()
    label = sample.column("label").to_numpy()
    schema = pa.schema([("score", pa.from_numpy_dtype(score.dtype)), ("label", pa.int8())])
    rng = np.random.default_rng([DATA_SEED, rows])

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for start in range(0, rows, ROW_GROUP_ROWS):
                take = rng.integers(0, len(score), size=min(ROW_GROUP_ROWS, rows - start))
                chunk = pa.table(
                    {"score": score[take], "label": label[take].astype(np.int8)}, schema=schema
                )
                writer.write_table(chunk, row_group_size=ROW_GROUP_ROWS)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


# ---------------------------------------------------------------------------------------------
# The work being timed


def floor(path: Path) -> np.ndarray:
    """The least any evaluation must do: read both columns, one histogram pass over them."""
    table = pq.read_table(path, columns=["score", "label"])
    score = table.column("score").to_numpy()
    label = table.column("label").to_numpy()
    cell = (score * FLOOR_CELLS).astype(np.int64)
    cell += label.astype(np.int64) * (FLOOR_CELLS + 1)
    return np.bincount(cell, minlength=2 * (FLOOR_CELLS + 1))


MODES = {
    # mode: (exact metrics, 95% interval draws)
    "protocol": (False, 0),  # the release and its estimates: the target
    "+intervals": (False, 200),  # the default run without a truth to compare to
    "+exact": (True, 200),  # a simulation's full report: intervals and exact values
}
"""What an `evaluate` run includes."""


def evaluate(path: Path, model: str, mode: str) -> object:
    import fedeval  # imported here so the floor's subprocess holds only numpy and pyarrow

    exact, ci_draws = MODES[mode]
    return fedeval.evaluate_file(path, model=model, seed=1, exact=exact, ci_draws=ci_draws)


def best_time(work: Callable[[], object], repeats: int) -> float:
    """Best wall time of `repeats` runs, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t0)
    return best


# ---------------------------------------------------------------------------------------------
# Peak memory, one fresh process per measurement


def own_peak_rss_mb() -> float:
    """This process's peak RSS in MB.

    On Linux, `VmHWM` of /proc/self/status: the high-water mark of this process's own address
    space. `ru_maxrss` is not used there because exec keeps the maximum with the parent's memory
    (the spawning benchmark's), which would hide the child's own peak.
    """
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, else KiB


def run_child(task: str, path: Path, mode: str) -> None:
    """Do `task` once (the floor or one model's evaluation) and print the peak RSS in MB."""
    if task == FLOOR:
        floor(path)
    else:
        evaluate(path, task, mode)
    print(f"{own_peak_rss_mb():.1f}")


def peak_rss_mb(task: str, path: Path, mode: str = "protocol") -> float:
    """Peak RSS (MB) of `task` run once in a fresh interpreter."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", task, str(path)]
    cmd += ["--mode", mode]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return float(done.stdout.split()[-1])


# ---------------------------------------------------------------------------------------------
# Report


@dataclass(frozen=True)
class Result:
    rows: int
    model: str
    mode: str
    evaluate_s: float
    floor_s: float
    peak_mb: float
    floor_peak_mb: float

    @property
    def ratio(self) -> float:
        return self.evaluate_s / self.floor_s


HEADER = (
    "rows",
    "model",
    "runs",
    "evaluate s",
    "floor s",
    "ratio",
    "peak RSS MB",
    "floor peak MB",
)


def format_table(results: list[Result]) -> str:
    cells = [HEADER] + [
        (
            f"{r.rows:,}",
            r.model,
            r.mode,
            f"{r.evaluate_s:.3f}",
            f"{r.floor_s:.3f}",
            f"{r.ratio:.2f}",
            f"{r.peak_mb:.0f}",
            f"{r.floor_peak_mb:.0f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    lines = [
        "  ".join(
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def verdict(results: list[Result]) -> tuple[bool, str]:
    """Whether every target is met, and one line that says so."""
    fast = [r for r in results if r.mode == "protocol"]
    worst = max(fast, key=lambda r: r.ratio)
    ratio_ok = worst.ratio <= RATIO_TARGET
    ratio_text = (
        f"every protocol-only ratio ≤ {RATIO_TARGET:g}: {'yes' if ratio_ok else 'NO'} "
        f"(worst {worst.ratio:.2f}, {worst.model} at {worst.rows:,} rows)"
    )
    big = [r for r in results if r.rows >= PEAK_TARGET_ROWS]
    if big:
        top = max(big, key=lambda r: r.peak_mb)
        peak_ok = top.peak_mb < PEAK_TARGET_MB
        peak_text = (
            f"every peak at ≥ {PEAK_TARGET_ROWS:,} rows < {PEAK_TARGET_MB:.0f} MB: "
            f"{'yes' if peak_ok else 'NO'} (max {top.peak_mb:.0f} MB, {top.model}, "
            f"{top.mode})"
        )
    else:
        peak_ok = True
        peak_text = f"memory target not checked (no run at ≥ {PEAK_TARGET_ROWS:,} rows)"
    ok = ratio_ok and peak_ok
    return ok, f"{'PASS' if ok else 'FAIL'}: {ratio_text}; {peak_text}."


def benchmark(rows: int, repeats: int) -> list[Result]:
    path = ensure_data(rows)
    log(f"{rows:,} rows: warming up (page cache, imports) ...")
    floor(path)
    evaluate(path, MODELS[0], "protocol")
    log(f"{rows:,} rows: floor (best of {repeats}) ...")
    floor_s = best_time(lambda: floor(path), repeats)
    floor_peak = peak_rss_mb(FLOOR, path)
    log(f"  floor {floor_s:.3f} s, peak {floor_peak:.0f} MB")
    results = []
    for mode in MODES:
        for model in MODELS:
            log(f"{rows:,} rows: {model}, {mode} (best of {repeats}) ...")
            seconds = best_time(lambda m=model, e=mode: evaluate(path, m, e), repeats)
            peak = peak_rss_mb(model, path, mode)
            log(f"  {seconds:.3f} s ({seconds / floor_s:.2f}× floor), peak {peak:.0f} MB")
            results.append(Result(rows, model, mode, seconds, floor_s, peak, floor_peak))
    return results


def parse_rows(text: str) -> list[int]:
    try:
        rows = [int(float(part)) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated row counts, got {text!r}"
        ) from e
    if not rows or min(rows) < 1:
        raise argparse.ArgumentTypeError(f"row counts must be positive, got {text!r}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows",
        type=parse_rows,
        default=list(DEFAULT_ROWS),
        help="comma-separated row counts (default: 1000000,10000000)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed runs per measurement, best kept (default: 3 below 10M rows, else 2)",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit with status 1 if a target is missed"
    )
    # Internal: run one task in a fresh process and print its peak RSS (see peak_rss_mb).
    parser.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="protocol", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        task, path = args.child
        run_child(task, Path(path), args.mode)
        return 0
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")

    results: list[Result] = []
    for rows in args.rows:
        repeats = args.repeats or (3 if rows < PEAK_TARGET_ROWS else 2)
        results += benchmark(rows, repeats)
    ok, line = verdict(results)
    print(format_table(results))
    print(line)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
