"""Malformed JSON documents: calibration maps (binary and multiclass), saved releases, reports,
ledgers, and the manifests and parts of a directory of client reports."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from . import harness
from . import strategies as fs
from .conftest import examples


def _doc(seeds, name: str):
    return json.loads((seeds / name).read_text())


@pytest.mark.slow
@examples(6)
@given(data=st.data(), which=st.sampled_from(["map.json", "mmap.json"]))
def test_maps(seeds, base, data, which):
    doc = data.draw(fs.mutated_json(_doc(seeds, which)))
    table = "good.csv" if which == "map.json" else "mc.csv"
    with harness.workdir(base, seeds, [table]) as wd:
        (wd / "m.json").write_bytes(doc)
        harness.run(["apply", "m.json", table, "-o", "out.csv"])
        harness.run(["check", "m.json", "--fail-over", "ece=0.5", "--gate-on", "estimate"])


FROM = {
    "evaluate": ["evaluate", "--from", "r.json", "--ci-draws", "0", "-o", "out.json"],
    "curves": ["curves", "--from", "r.json", "--ci-draws", "0", "-o", "out.json"],
    "calibrate": ["calibrate", "--from", "r.json", "--ci-draws", "0", "-o", "out.json"],
    "verify": ["evaluate", "--from", "r.json", "--ci-draws", "0", "--verify-key", "k.pub"],
    "ledger": [
        "evaluate",
        "--from",
        "r.json",
        "--ci-draws",
        "0",
        "--ledger",
        "ledger.jsonl",
        "--budget",
        "10",
        "-o",
        "out.json",
    ],
}


@examples(6)
@given(data=st.data(), command=st.sampled_from(sorted(FROM)))
def test_releases(seeds, base, data, command):
    doc = data.draw(fs.mutated_json(_doc(seeds, "release.json")))
    with harness.workdir(base, seeds, ["k.pub", "ledger.jsonl"]) as wd:
        (wd / "r.json").write_bytes(doc)
        harness.run(FROM[command])


@examples(4)
@given(data=st.data(), which=st.sampled_from(["report.json", "ci.json"]))
def test_reports(seeds, base, data, which):
    doc = data.draw(fs.mutated_json(_doc(seeds, which)))
    gates = data.draw(st.lists(fs.gate_spec, min_size=1, max_size=3))
    with harness.workdir(base, seeds) as wd:
        (wd / "r.json").write_bytes(doc)
        args = ["check", "r.json"]
        for g in gates:
            args += [data.draw(st.sampled_from(["--fail-under", "--fail-over"])), g]
        args += ["--gate-on", data.draw(st.sampled_from(["bound", "estimate", "x"]))]
        harness.run(args)


@examples(6)
@given(data=st.data())
def test_ledgers(seeds, base, data):
    content = data.draw(fs.mutated_lines((seeds / "ledger.jsonl").read_text()))
    budget = data.draw(st.sampled_from(["10", "10", "1", "0", "-1", "nan", "1e308"]))
    with harness.workdir(base, seeds, ["good.csv"]) as wd:
        (wd / "ledger.jsonl").write_bytes(content)
        harness.run(["ledger", "ledger.jsonl", "-f", data.draw(st.sampled_from(["json", "table"]))])
        harness.run(["ledger", "ledger.jsonl", "--budget", budget])
        command = data.draw(st.sampled_from(["evaluate", "curves", "calibrate"]))
        harness.run(
            [
                command,
                "good.csv",
                "--ci-draws",
                "0",
                "--ledger",
                "ledger.jsonl",
                "--budget",
                budget,
                "-o",
                "out.json",
            ]
        )


@examples(6)
@given(data=st.data())
def test_report_directories(seeds, base, data):
    """A copied directory of client reports with its manifest edited, or a part, the roster
    or the signature damaged, removed or joined by a stray file."""
    with harness.workdir(base, seeds, ["reports", "k.pub"]) as wd:
        reports = wd / "reports"
        files = sorted(p.name for p in reports.iterdir())
        target = data.draw(st.sampled_from(files))
        op = data.draw(st.sampled_from(["mutate", "mutate", "remove", "stray"]))
        path = reports / target
        if op == "remove":
            path.unlink()
        elif op == "stray":
            (
                reports / data.draw(st.sampled_from(["x.parquet", "part-99999.parquet", "a"]))
            ).write_bytes(data.draw(st.binary(max_size=64)))
        elif target.endswith(".json"):
            path.write_bytes(data.draw(fs.mutated_json(json.loads(path.read_text()))))
        else:
            path.write_bytes(data.draw(fs.corrupt(path.read_bytes())))
        args = ["aggregate", "reports", "-o", "agg.json", "--min-cohort", "10"]
        if data.draw(st.booleans()):
            args += ["--verify-key", "k.pub"]
        if data.draw(st.booleans()):
            args += ["--population", data.draw(st.sampled_from(["20", "19", "1000", "0"]))]
        harness.run(args)
