"""Where the wall time of one `fedeval.evaluate_file` goes, thread by thread (issue 28).

A sampler thread reads every other thread's Python stack every 10 ms (`sys._current_frames`,
CPython's) and keeps the innermost frame inside fedeval: the main thread's timeline (runs of one
function of at least 50 ms) and, per thread group (`fedeval-read`, `fedeval-merge`,
`fedeval-exact`, ...), the seconds spent at each line. A thread waiting in a pool has no fedeval
frame ("-"). A thread holding the GIL in a long numpy call is seen where it is, but the sampler
itself needs the GIL, so work that never lets go of it is under-counted. Beside it, the CPU
seconds of each thread group, exact (each thread's `time.thread_time()` when it ends; the main
thread's over the evaluation): a group's samples count its wall time, waits included, and its
CPU seconds what it costs on a loaded machine.

    .venv/bin/python benchmarks/thread_profile.py DATA [--model M] [--no-exact] [--threads N]

The library is loaded on 1,000 rows first, so the timeline starts at the read.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import threading
import time
from types import FrameType

import numpy as np

INTERVAL = 0.01


def innermost(frame: FrameType | None) -> str:
    """`file:function:line` of the innermost frame in fedeval, or "-"."""
    while frame is not None:
        code = frame.f_code
        if f"{os.sep}fedeval{os.sep}" in code.co_filename:
            return f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}"
        frame = frame.f_back
    return "-"


def thread_cpu() -> collections.Counter[str]:
    """CPU seconds of every thread started from now on, by group (its name less the number),
    added as each one ends: `threading.Thread.run` is wrapped to read `time.thread_time()`."""
    spent: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    run = threading.Thread.run

    def timed(self: threading.Thread) -> None:
        try:
            run(self)
        finally:
            with lock:
                spent[re.sub(r"_\d+$", "", self.name)] += time.thread_time()

    threading.Thread.run = timed  # type: ignore[method-assign]
    return spent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--model", default="distdp", choices=("federated", "distdp", "localdp"))
    ap.add_argument("--no-exact", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    import fedeval

    rng = np.random.default_rng(0)
    fedeval.evaluate(rng.integers(0, 2, 1000), rng.random(1000), seed=1, model=args.model)
    cpu = thread_cpu()
    by: collections.Counter[tuple[str, str]] = collections.Counter()
    timeline: list[tuple[float, str]] = []
    stop = threading.Event()

    def sample() -> None:
        own, t0 = threading.get_ident(), time.perf_counter()
        while not stop.is_set():
            names = {t.ident: re.sub(r"_\d+$", "", t.name) for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == own:
                    continue
                name, where = names.get(ident, "?"), innermost(frame)
                by[name, where] += 1
                if name == "MainThread":
                    timeline.append((time.perf_counter() - t0, where.rsplit(":", 1)[0]))
            time.sleep(INTERVAL)

    sampler = threading.Thread(target=sample, daemon=True)
    t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
    sampler.start()
    fedeval.evaluate_file(
        args.path, model=args.model, exact=not args.no_exact, threads=args.threads
    )
    wall, used = time.perf_counter() - t0, time.process_time() - c0
    cpu["MainThread"] += time.thread_time() - m0
    stop.set()
    sampler.join()
    mode = "no-exact" if args.no_exact else "default"
    print(f"{args.model} {mode} wall {wall:.2f} s cpu {used:.2f} s")
    print("CPU seconds by thread group (threads still running are left out):")
    for name, seconds in cpu.most_common():
        print(f"  {seconds:7.2f} s  {name}")
    runs: list[tuple[float, str, float]] = []  # (start, function, end)
    for t, fn in timeline:
        if runs and runs[-1][1] == fn:
            runs[-1] = (runs[-1][0], fn, t)
        else:
            runs.append((t, fn, t))
    print("main thread timeline (runs >= 0.05 s):")
    for a, fn, b in runs:
        if b - a >= 0.05:
            print(f"  {a:7.2f}-{b:7.2f}  {fn}")
    print(f"seconds by thread group and innermost fedeval line (x {INTERVAL * 1000:g} ms, top 40):")
    for (name, where), count in by.most_common(40):
        print(f"  {count * INTERVAL:7.2f} s  {name:<16} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
