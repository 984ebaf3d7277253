"""Start-up (issue 28): the fixed cost a user feels, against the import floor, in one paired run.

Each case runs as a fresh process; the cases are interleaved (floor, --version, --help,
completion, evaluate, floor, ...) `--rounds` times and each reports its best wall time, so slow
spells of a loaded machine hit every case alike and the best of many runs is the one least
disturbed. The cases:

- ``floor``: ``python -c 'import numpy, pandas, pyarrow.parquet, scipy.optimize'``, the import
  of the libraries fedeval computes with;
- ``python``: ``python -c pass``, the interpreter alone (for reference);
- ``--version``, ``--help``: ``fedeval --version`` / ``--help`` (the console script next to
  the interpreter);
- ``completion``: bash completion of ``fedeval ev`` (``_FEDEVAL_COMPLETE=complete_bash``, the
  variable Typer's completion script sets);
- ``evaluate 1k``: ``fedeval evaluate FILE --model distdp --format json`` on a
  1,000-row Parquet file it writes to ``benchmarks/_data/startup_1000.parquet`` (deterministic:
  seed 0, 30 % positives).

Before the timed rounds, one untimed run of every case with Python writing bytecode (the
environment's ``PYTHONDONTWRITEBYTECODE`` left out for that run alone): an installed package has
its modules compiled (pip compiles on install), but a checkout run where that variable is set
keeps stale ``__pycache__`` files stale, so every timed process compiled each changed module
afresh (17 of fedeval's modules after a day's merges: ``evaluate 1k`` 0.09 s slower, 1.20 ×
the floor where the same code with current bytecode gave 1.15 ×). The timed runs keep the
environment as it is.

Targets (issue 28), checked and printed at the end: ``--version``, ``--help`` and completion
≤ 0.3 × floor; ``evaluate 1k`` ≤ 1.2 × floor.

    .venv/bin/python benchmarks/startup.py                  # 15 rounds
    .venv/bin/python benchmarks/startup.py --rounds 40

The table goes to stdout, progress to stderr. Exit 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "_data" / "startup_1000.parquet"
FLOOR_IMPORTS = "import numpy, pandas, pyarrow.parquet, scipy.optimize"


def make_data(path: Path, rows: int = 1000) -> None:
    """A deterministic binary file: scores a logistic of a normal shifted for positives."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    label = (rng.random(rows) < 0.3).astype(np.int8)
    score = 1 / (1 + np.exp(-(rng.normal(size=rows) + 1.5 * label)))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"score": score, "label": label}), path)


def cases(python: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each case's command line and extra environment."""
    fed = [str(Path(python).parent / "fedeval")]  # the console script, as a user runs it
    complete = {"_FEDEVAL_COMPLETE": "complete_bash", "COMP_WORDS": "fedeval ev", "COMP_CWORD": "1"}
    return {
        "python": ([python, "-c", "pass"], {}),
        "floor": ([python, "-c", FLOOR_IMPORTS], {}),
        "--version": ([*fed, "--version"], {}),
        "--help": ([*fed, "--help"], {}),
        "completion": (fed, complete),
        "evaluate 1k": ([*fed, "evaluate", str(DATA), "--model", "distdp", "--format", "json"], {}),
    }


def run_once(cmd: list[str], extra: dict[str, str], *, write_bytecode: bool = False) -> float:
    env = {**os.environ, **extra, "COLUMNS": "100"}
    if write_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved runs of every case")
    ap.add_argument("--python", default=sys.executable, help="the interpreter to time")
    args = ap.parse_args()
    if not DATA.exists():
        make_data(DATA)
    todo = cases(args.python)
    # Completion must actually complete: a wrong variable name would time a no-op.
    cmd, extra = todo["completion"]
    out = subprocess.run(cmd, env={**os.environ, **extra}, capture_output=True, text=True)
    if "evaluate" not in out.stdout.split():
        raise SystemExit(f"completion printed {out.stdout!r}, not 'evaluate'")
    for cmd, extra in todo.values():  # untimed: the bytecode of what each case imports, current
        run_once(cmd, extra, write_bytecode=True)
    times: dict[str, list[float]] = {name: [] for name in todo}
    for r in range(args.rounds):
        for name, (cmd, extra) in todo.items():
            times[name].append(run_once(cmd, extra))
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
    best = {name: min(ts) for name, ts in times.items()}
    floor = best["floor"]
    targets = {"--version": 0.3, "--help": 0.3, "completion": 0.3, "evaluate 1k": 1.2}
    print(f"best of {args.rounds} interleaved runs each; floor = python -c '{FLOOR_IMPORTS}'")
    print(f"{'case':<13} {'best s':>8} {'median s':>9} {'/ floor':>8} {'target':>7}")
    ok = True
    for name, ts in times.items():
        med = sorted(ts)[len(ts) // 2]
        ratio = best[name] / floor
        target = targets.get(name)
        mark = ""
        if target is not None:
            met = ratio <= target
            ok &= met
            mark = f"≤ {target:.1f} {'met' if met else 'MISSED'}"
        print(f"{name:<13} {best[name]:8.3f} {med:9.3f} {ratio:8.2f} {mark:>7}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
