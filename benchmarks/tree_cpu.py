"""CPU of a command's whole process tree (issue 24): what a test costs the machine, children and
the processes they leave behind included.

`/usr/bin/time` counts only the children that were waited for. A test that starts servers in
their own process groups and stops them with a signal (Flower's SuperLink and SuperNodes, and
the processes those start), or a library that starts daemons (Ray's raylet, GCS, agents and
workers), spends CPU that never reaches the parent's rusage: for the Flower deployment test
that count showed about a third of what its processes used.

This runs the command and, every `--interval` seconds, walks the machine's process table: a
process is counted once its parent is (so processes re-parented to init when their parent
exits still count, as long as they were seen before). Each process contributes the largest
user + system CPU seen for it; a process that starts and ends between two looks is missed, so
the figure is a lower bound (compare it with the rusage of waited children, printed beside).

    .venv/bin/python benchmarks/tree_cpu.py -- .venv/bin/python -m pytest -q -n 0 \\
        "tests/test_ledger.py::test_concurrent_runs_lose_nothing_and_respect_the_budget"

One summary line and the CPU per process name go to stderr; the command's exit code is
returned.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import psutil


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between looks")
    parser.add_argument("--per-process", action="store_true", help="one line per process")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")

    start = time.monotonic()
    root = subprocess.Popen(command)
    ours = {root.pid}
    cpu: dict[int, float] = {}
    names: dict[int, str] = {}
    while root.poll() is None:
        for proc in psutil.process_iter(["pid", "ppid", "name"]):
            pid, ppid = proc.info["pid"], proc.info["ppid"]
            if pid not in ours and ppid not in ours:
                continue
            ours.add(pid)
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            cpu[pid] = max(cpu.get(pid, 0.0), times.user + times.system)
            names[pid] = proc.info["name"] or "?"
        time.sleep(args.interval)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    waited = usage.ru_utime + usage.ru_stime

    by_name: dict[str, float] = {}
    for pid, seconds in cpu.items():
        by_name[names[pid]] = by_name.get(names[pid], 0.0) + seconds
    print(
        f"wall {wall:.1f} s · process tree {sum(cpu.values()):.1f} CPU-s over {len(cpu)} "
        f"processes · waited children {waited:.1f} CPU-s",
        file=sys.stderr,
    )
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1])
    print("  " + ", ".join(f"{n} {s:.1f}" for n, s in ranked), file=sys.stderr)
    if args.per_process:
        for pid in sorted(cpu, key=lambda p: -cpu[p]):
            print(f"  {pid:>8} {names[pid]:<24} {cpu[pid]:6.1f}", file=sys.stderr)
    return root.returncode


if __name__ == "__main__":
    sys.exit(main())
