"""The deterministic leak scan (`fedeval.audit`, deterministic leaks) over what `fedeval compare`
gives the analyst: its JSON on stdout and in -o files, its table, stderr (the gates' sentences),
exit codes, the figure (`make audit`), the ledger as printed, and `compare --from` of two saved
releases. Under add-remove without exact values nothing may separate D from D′ (one example
removed): no exact count of examples, positives or clients, and no decision read off the exact
data.

The control runs the same scan on the simulation report with exact values (`--exact`), which
states the exact sizes on purpose: the scan must find them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import fedeval.cli.compare  # noqa: F401  (registers the command)
from fedeval import audit

from .test_leak_scan_more import FULL, _invoke, _read_outputs, _scan, _show, _write


def _paired(table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The scenario's table with a second model's scores on the same rows."""
    return table | {"score_new": (table["score"] * 0.8 + 0.15) % 1.0}


def _compare_run(table: dict, where: Path, exact: bool) -> tuple[dict, dict]:
    src = _write(_paired(table), where / "data.parquet")
    out = where / "out"
    out.mkdir()
    common: list[Any] = [
        "--baseline-col", "score", "--candidate-col", "score_new", "-m", "distdp", "-e", 2,
        "--height", 3, "--shape", "hierarchy", "--relation", "add-remove", "--ci-draws", 20,
        "--exact" if exact else "--no-exact",
    ]  # fmt: skip
    a: dict[str, Any] = {}
    ledger = where / "ledger.jsonl"
    gates = ("--fail-if-worse", "auc=0.2,recall@0.5=0.2")
    _invoke(a, "compare", where, "compare", src, *common, "--thresholds", "0.5",
            "--ledger", ledger, "--budget", 100, *gates)  # fmt: skip
    _invoke(a, "compare-json", where, "compare", src, *common, "-f", "json",
            "--interval", "generalisation", "--gate-on", "estimate",
            "--fail-if-worse", "ap=0.3")  # fmt: skip
    plot = ("--plot", out / "c.svg") if FULL else ()  # figures: `make audit`
    _invoke(a, "compare-o", where, "compare", src, *common, "-o", out / "c.json", *plot)
    if not exact:
        for col, name in (("score", "base"), ("score_new", "cand")):
            r = _invoke({}, f"save-{name}", where, "evaluate", src, "--score-col", col,
                        "-m", "distdp", "-e", 1, "--height", 3, "--shape", "hierarchy",
                        "--no-exact", "--ci-draws", 0, "--save-release",
                        where / f"{name}.fedeval")  # fmt: skip
            assert r.exit_code == 0, r.output
        _invoke(a, "compare-from", where, "compare", "--from", where / "base.fedeval",
                "--from", where / "cand.fedeval", "--ci-draws", 20, "-f", "json")  # fmt: skip
    _invoke(a, "ledger", where, "ledger", ledger)
    _read_outputs(a, out, where)
    return {}, a


def test_compare_outputs_do_not_separate_neighbours(tmp_path, scan_runs):
    d, dp = audit.Scenario("distdp", "add-remove").datasets()
    _, analyst, views = _scan(lambda t, w: _compare_run(t, w, False), d, dp, tmp_path, scan_runs)
    assert analyst == [], f"compare's outputs separate D from D′: {_show(analyst)}"
    seen = {k for _, a in views["D"] for k in a}
    for prefix in ("compare.stdout:", "compare.stderr:", "compare-json.json.metrics",
                   "compare.exit", "out/c.json.metrics", "compare-from.json.metrics",
                   "ledger.stdout:", *(("out/c.svg",) if FULL else ())):  # fmt: skip
        assert any(k.startswith(prefix) for k in seen), f"nothing read from {prefix}"


def test_compare_leak_scan_catches_exact_values(tmp_path):
    """Control: the simulation report with exact values (not private, and saying so) states
    the exact sizes; the same scan must flag them."""
    d, dp = audit.Scenario("distdp", "add-remove").datasets()
    _, analyst, _ = _scan(lambda t, w: _compare_run(t, w, True), d, dp, tmp_path, 2, confirm=False)
    assert any("rows" in leak or "exact" in leak for leak in analyst), analyst
