"""The leak scan's three edge neighbours (issue 23): a client's first row moved (order is
data), a client count across --min-cohort (a refusal is a document), and one invalid row (the
outcome of a run must not turn on one example beyond what the claim declares).

Each scan runs the real commands unseeded, several times per side, and reads every document
each party receives (shared AUDIT.md, section 1); each is shown to fail on a deliberately
broken mechanism (section 4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval import audit
from fedeval.cli import app

runner = CliRunner()


def _write(table: dict[str, Any], path: Path) -> Path:
    pq.write_table(pa.table({k: pa.array(v) for k, v in table.items()}), path)
    return path


def _invoke(*args: Any):
    return runner.invoke(app, [str(a) for a in args])


def _scan(run, d, dp, tmp: Path, runs: int, ignore=lambda p: False) -> list[str]:
    views: dict[str, list] = {"D": [], "D′": []}
    for side, table in (("D", d), ("D′", dp)):
        for i in range(runs):
            where = tmp / f"{side}{i}"
            where.mkdir()
            views[side].append(run(table, where))
    return audit.deterministic_leaks(views["D"], views["D′"], ignore)


# --- 1. order is data: a client's first row moved -----------------------------------------------


def _moved_first_row() -> tuple[dict, dict]:
    """D: ten clients with string ids, client 'k' first in the file with one example; D′: the
    same rows with that first row moved to the end (the same dataset, another order)."""
    ids = ["k", "c", "a", "h", "b", "j", "e", "i", "d", "f", "g"]
    client, score, label = [], [], []
    for j, c in enumerate(ids):
        for r in range(1 if c == "k" else 2):
            client.append(c)
            score.append(((3 * j + r) * 0.29) % 1.0)
            label.append((j + r) % 2)
    d = {"score": np.array(score), "label": np.array(label), "client": np.array(client)}
    order = np.r_[np.arange(1, len(client)), 0]
    return d, {k: v[order] for k, v in d.items()}


MODELS = [
    ("distdp", "add-remove", "client", 2),
    ("localdp", "replace", "client", 2),
    ("federated", None, "example", None),
]


@pytest.mark.parametrize("model, relation, unit, cap", MODELS, ids=lambda v: str(v))
def test_moving_a_clients_first_row_changes_nothing_the_server_receives(
    model, relation, unit, cap, tmp_path
):
    d, dp = _moved_first_row()
    args: list[Any] = ["-m", model, "--height", 2, "--shape", "hierarchy", "--unit", unit,
                       "--min-cohort", 2]  # fmt: skip
    if relation:
        args += ["--relation", relation]
    if cap:
        args += ["--max-examples", cap]

    def run(table, where):
        src = _write(table, where / "data.parquet")
        r = _invoke("encode", src, "-o", where / "reports", *args)
        assert r.exit_code == 0, r.output
        view = audit.directory_fields(where / "reports")
        # Masked reports and OUE bits are fresh randomness in every run: their columns move
        # by design. Order shows in the roster, the client columns and the manifest.
        return {
            k: v
            for k, v in view.items()
            if not k.endswith((".report", ".bits", "#bytes", "integrity.sha256"))
            and not k.startswith("manifest.json.parts")
        }

    # localdp's `level` column is the reports' levels grouped in order, so it holds only how many
    # of the 22 reports drew each of the two levels: Binomial(22, 1/2), equal in two runs with
    # chance C(44, 22)/2^44 ≈ 0.12. With two runs per side that fresh draw looks deterministic
    # in ≈ 1.3% of scans (0.12² · 0.88; seen once in a full audit); with four, ≈ 0.12⁶ ≈ 3e-6.
    leaks = _scan(run, d, dp, tmp_path, 4)
    assert leaks == [], f"the order of the rows shows in what the server receives: {leaks}"


def test_roster_scan_catches_a_roster_in_file_order(tmp_path, monkeypatch):
    """Broken on purpose: clients numbered in order of first appearance, as before."""
    import pandas as pd

    from fedeval.tables import scored as data

    monkeypatch.setattr(data, "_factorize", lambda ids: pd.factorize(ids.to_pandas()))
    d, dp = _moved_first_row()

    def run(table, where):
        src = _write(table, where / "data.parquet")
        r = _invoke("encode", src, "-o", where / "r", "-m", "federated", "--min-cohort", 2)
        assert r.exit_code == 0, r.output
        return audit.directory_fields(where / "r")

    leaks = _scan(run, d, dp, tmp_path, 2)
    assert any(k.startswith("roster.parquet.client") for k in leaks), leaks


# --- 2. a refusal across --min-cohort, and empty input ------------------------------------------


def _clients(n: int) -> dict:
    rng = np.random.default_rng(5)
    per = 2
    return {
        "score": rng.random(n * per),
        "label": (np.arange(n * per) % 2).astype(np.int64),
        "client": np.repeat(np.arange(n), per),
    }


def test_min_cohort_boundary_is_declared_in_every_claim(tmp_path):
    """Add-remove of one client across --min-cohort 10: ten clients are encoded, nine are
    refused (exit 2, nothing written). The claim must say that a release exists only when
    every cohort reached its minimum size: that one fact about the number of clients is all
    that separates the neighbours, and the server sees who took part anyway."""
    d, dp = _clients(10), _clients(9)
    common = ["-m", "distdp", "--height", 2, "--unit", "client", "--max-examples", 2,
              "--relation", "add-remove"]  # fmt: skip

    def run(table, where):
        src = _write(table, where / "data.parquet")
        r = _invoke("encode", src, "-o", where / "r", *common, "--min-cohort", 10)
        view: dict[str, Any] = {"encode.exit": r.exit_code, "reports": (where / "r").exists()}
        if r.exit_code == 0:
            rel = where / "run.fedeval"
            a = _invoke("aggregate", where / "r", "-o", rel, "--min-cohort", 10)
            assert a.exit_code == 0, a.output
            doc = json.loads(rel.read_text())
            view["release"] = True
            view["guarantee"] = doc["privacy"]["guarantee"]
            view["analyst_learns"] = doc["privacy"]["analyst_learns"]
        return view

    leaks = _scan(run, d, dp, tmp_path, 2)
    # The refusal separates the sides, as declared; nothing else does (no partial output).
    assert {leak.split(":")[0] for leak in leaks} <= {
        "encode.exit", "reports", "release", "guarantee", "analyst_learns",
    }  # fmt: skip
    src = _write(d, tmp_path / "d.parquet")
    r = _invoke("encode", src, "-o", tmp_path / "ok", *common, "--min-cohort", 10)
    assert r.exit_code == 0, r.output
    privacy = json.loads((tmp_path / "ok" / "manifest.json").read_text())["privacy"]
    assert _declares_refusals(privacy), privacy


def _declares_refusals(privacy: dict) -> bool:
    """Whether a privacy section declares what decides that a release exists."""
    return all(
        "minimum" in text and "cohort" in text and "valid" in text and "non-empty" in text
        for text in (privacy["guarantee"], privacy["analyst_learns"])
    )


def test_declaration_check_catches_a_claim_silent_on_refusals(monkeypatch):
    """Broken on purpose: the claim as it was, silent about what decides a release."""
    from fedeval.privacy.mechanism import Mechanism

    monkeypatch.setattr(Mechanism, "_what_decides", staticmethod(lambda: ""))
    monkeypatch.setattr(Mechanism, "analyst_learns", lambda self: "the noisy counts")
    scenario = audit.Scenario("distdp", "add-remove", "client", 2)
    assert not _declares_refusals(Mechanism(scenario.config()).section())


def test_empty_input_refusal_is_declared(tmp_path):
    """Add-remove of the one example of a one-row table: the empty table is refused (exit 2).
    The claim declares that a release is only made from a non-empty table."""
    one = {"score": np.array([0.3]), "label": np.array([1])}
    empty = {"score": np.array([], float), "label": np.array([], np.int64)}
    a = _invoke("evaluate", _write(one, tmp_path / "one.parquet"), "-m", "distdp",
                "--height", 2, "--no-exact", "--ci-draws", 0, "-f", "json")  # fmt: skip
    b = _invoke("evaluate", _write(empty, tmp_path / "empty.parquet"), "-m", "distdp",
                "--height", 2, "--no-exact", "--ci-draws", 0, "-f", "json")  # fmt: skip
    assert (a.exit_code, b.exit_code) == (0, 2)
    assert "non-empty" in json.loads(a.stdout)["privacy"]["guarantee"]


# --- 3. one invalid row ---------------------------------------------------------------------


def _left_behind(where: Path) -> list[str]:
    """What a refused run left for the server or the analyst: a release, a report directory,
    a ledger line."""
    found = [p.name for p in where.glob("*.fedeval")]
    if (where / "r").exists():
        found.append("r/")
    ledger = where / "ledger.jsonl"
    if ledger.exists() and ledger.read_text().strip():
        found.append("ledger.jsonl")
    return found


def _invalid_table(tmp: Path) -> Path:
    rng = np.random.default_rng(2)
    score = np.r_[rng.random(40), 1.5]
    return _write({"score": score, "label": (np.arange(41) % 2).astype(np.int64)}, tmp)


def test_left_behind_catches_an_encoder_that_writes_before_it_validates(tmp_path, monkeypatch):
    """Broken on purpose: an encoder that creates its report directory before it has read
    (and validated) the table, and leaves it when the table is refused."""
    from fedeval.protocol import encode

    read = encode.read_scored

    def early(source, *args, **kw):
        (tmp_path / "r").mkdir(exist_ok=True)
        return read(source, *args, **kw)

    monkeypatch.setattr(encode, "read_scored", early)
    src = _invalid_table(tmp_path / "data.parquet")
    r = _invoke("encode", src, "-o", tmp_path / "r", "-m", "distdp", "--height", 2,
                "--min-cohort", 2)  # fmt: skip
    assert r.exit_code == 2
    assert _left_behind(tmp_path) == ["r/"]


def test_left_behind_catches_a_charge_before_validation(tmp_path, monkeypatch):
    """Broken on purpose: a one-shot run that charges its ledger before reading the table."""
    from fedeval.cli import run as cli_run
    from fedeval.privacy.ledger import charge, make_entry

    check = cli_run.ReleaseOptions.check

    def charging(self):
        check(self)
        doc = {"privacy": {"model": "distdp", "epsilon": 1.0, "delta": 0.0, "unit": "example",
                           "relation": "add-remove", "reproducible_simulation": False,
                           "dp_event": {"type": "discrete_laplace", "parameter": 0.5,
                                        "sensitivity": 2}}}  # fmt: skip
        charge(self.ledger, make_entry(doc, command="evaluate", covered="-"), self.budget)

    monkeypatch.setattr(cli_run.ReleaseOptions, "check", charging)
    src = _invalid_table(tmp_path / "data.parquet")
    r = _invoke("evaluate", src, "-m", "distdp", "--height", 2, "--no-exact", "--ci-draws", 0,
                "--ledger", tmp_path / "ledger.jsonl", "--budget", 5)  # fmt: skip
    assert r.exit_code == 2
    assert _left_behind(tmp_path) == ["ledger.jsonl"]


@pytest.mark.parametrize("column, value", [("score", 1.5), ("score", float("nan")), ("label", 3)])
def test_one_invalid_row_releases_nothing_and_the_claim_limits_its_domain(column, value, tmp_path):
    """Add one row outside the declared domain: the run is refused with the row and column
    named, and nothing leaves the data holder (no report directory, no release, no ledger
    entry). The claim covers valid tables only and says the data holder validates first."""
    rng = np.random.default_rng(2)
    d = {"score": rng.random(40), "label": (np.arange(40) % 2).astype(np.int64)}
    dp = {k: np.r_[v, v[:1]] for k, v in d.items()}
    dp[column] = dp[column].astype(float if column == "score" else np.int64)
    dp[column][-1] = value

    def run(table, where):
        src = _write(table, where / "data.parquet")
        ledger = where / "ledger.jsonl"
        view: dict[str, Any] = {}
        r = _invoke("evaluate", src, "-m", "distdp", "--height", 2, "--no-exact",
                    "--ci-draws", 0, "--save-release", where / "rel.fedeval",
                    "--ledger", ledger, "--budget", 5, "-f", "json")  # fmt: skip
        view["evaluate.exit"] = r.exit_code
        e = _invoke("encode", src, "-o", where / "r", "-m", "distdp", "--height", 2,
                    "--min-cohort", 2)  # fmt: skip
        view["encode.exit"] = e.exit_code
        view["written"] = sorted(p.name for p in where.iterdir() if p.name != "data.parquet")
        if r.exit_code == 2:
            assert "row 41" in r.stderr and column in r.stderr, r.stderr
        else:
            view["guarantee"] = json.loads(r.stdout)["privacy"]["guarantee"]
        return view

    leaks = _scan(run, d, dp, tmp_path, 2)
    assert {leak.split(":")[0] for leak in leaks} <= {
        "evaluate.exit", "encode.exit", "written", "guarantee",
    }  # fmt: skip
    # D′ left nothing behind: no release, no reports, no ledger line.
    for i in range(2):
        assert _left_behind(tmp_path / f"D′{i}") == []
    ok = _write(d, tmp_path / "ok.parquet")
    r = _invoke("evaluate", ok, "-m", "distdp", "--height", 2, "--no-exact", "--ci-draws", 0,
                "-f", "json")  # fmt: skip
    guarantee = json.loads(r.stdout)["privacy"]["guarantee"]
    assert "valid" in guarantee and "validates" in guarantee, guarantee
