"""Malformed tables through every command that reads one: evaluate, curves, calibrate (binary
and multiclass), apply, plan --like, partition and encode; from a file or on stdin."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from . import harness
from . import strategies as fs
from .conftest import examples

FAST = ["--ci-draws", "0", "--seed", "1"]
TABLE_COMMANDS = {
    "evaluate": lambda f: ["evaluate", f, *FAST, "-o", "out.json"],
    "curves": lambda f: ["curves", f, *FAST, "-o", "out.json"],
    "calibrate": lambda f: ["calibrate", f, *FAST, "-o", "out.json"],
    "evaluate-ledger": lambda f: [
        "evaluate",
        f,
        "--ci-draws",
        "0",
        "--ledger",
        "ledger.jsonl",
        "--budget",
        "10",
        "-o",
        "out.json",
    ],
    "apply": lambda f: ["apply", "map.json", f, "-o", "out.csv"],
    "plan": lambda f: ["plan", "--like", f, "-f", "json"],
    "partition": lambda f: [
        "partition",
        f,
        "--scheme",
        "iid",
        "-k",
        "3",
        "--client-col",
        "cid",
        "-o",
        "out.csv",
    ],
    "partition-column": lambda f: ["partition", f, "--scheme", "column", "-o", "out.csv"],
    "encode": lambda f: [
        "encode",
        f,
        "-m",
        "federated",
        "--height",
        "4",
        "--min-cohort",
        "2",
        "-o",
        "reports",
    ],
}


@examples(10)
@given(table=fs.binary_table, command=st.sampled_from(sorted(TABLE_COMMANDS)))
def test_binary_tables(seeds, base, table, command):
    name, data = table
    with harness.workdir(base, seeds, ["map.json", "ledger.jsonl"]) as wd:
        (wd / name).write_bytes(data)
        harness.run(TABLE_COMMANDS[command](name))


@examples(2)
@given(table=fs.csv_table(), command=st.sampled_from(["evaluate", "curves", "calibrate"]))
def test_binary_tables_on_stdin(seeds, base, table, command):
    _, data = table
    with harness.workdir(base, seeds):
        harness.run([command, "-", *FAST, "-o", "out.json"], input=data)


@examples(4)
@given(table=fs.multiclass_csv(), method=st.sampled_from(["fedbbq", "fedbin", "fedtemp"]))
def test_multiclass_tables(seeds, base, table, method):
    name, data = table
    with harness.workdir(base, seeds, ["mmap.json"]) as wd:
        (wd / name).write_bytes(data)
        harness.run(
            [
                "calibrate",
                name,
                "--multiclass",
                "--method",
                method,
                "--seed",
                "1",
                "--clients",
                "4",
                "--rounds",
                "2",
                "-o",
                "out.json",
            ]
        )
        harness.run(["apply", "mmap.json", name, "-o", "out.csv"])
