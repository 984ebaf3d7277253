"""The ledger as a record that edits cannot pass unnoticed, and as a charge no release path
skips (issue 23): a hash chain over its lines with the budget in the first; signed lines;
`aggregate --ledger`; `--from` charging a release that was never charged, once; `check` and
`apply --verify-key` refusing a re-sealed document."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.core.errors import InputError, UsageError
from fedeval.documents.seals import generate_keypair, load_private_key, load_public_key, seal
from fedeval.privacy.ledger import charge, make_entry, read_ledger

runner = CliRunner()


def doc(epsilon=1.0, *, unit="example", relation="add-remove"):
    event = {"type": "discrete_laplace", "parameter": epsilon / 8, "sensitivity": 8}
    return {
        "fedeval_version": "0.0-test",
        "privacy": {
            "model": "distdp",
            "epsilon": epsilon,
            "delta": 0.0,
            "unit": unit,
            "relation": relation,
            "mechanism": {"name": "discrete Laplace", "sensitivity": 8},
            "dp_event": event,
            "reproducible_simulation": False,
        },
    }


def entry(epsilon=1.0, **kw):
    return make_entry(doc(epsilon, **kw), command="evaluate", covered="metrics")


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def write(path: Path, items: list[dict]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in items))


@pytest.fixture
def book(tmp_path) -> Path:
    path = tmp_path / "ledger.jsonl"
    charge(path, entry(0.5), budget=2.0)
    charge(path, entry(0.5), budget=2.0)
    charge(path, entry(0.5), budget=2.0)
    return path


def test_a_fresh_ledger_reads_back(book):
    header, entries = read_ledger(book)
    assert header["budget"]["epsilon"] == 2.0 and len(entries) == 3


def test_raising_the_budget_in_the_header_is_evident(book):
    items = lines(book)
    items[0]["budget"]["epsilon"] = 1000.0
    write(book, items)
    with pytest.raises(InputError, match="line 1"):
        read_ledger(book)
    # Re-sealed: the header's own digest holds, the next line no longer follows it.
    items[0] = seal(items[0])
    write(book, items)
    with pytest.raises(InputError, match=r"line 2.*chain"):
        read_ledger(book)
    with pytest.raises(InputError):
        charge(book, entry(0.5), budget=1000.0)


def test_deleting_or_reordering_an_entry_is_evident(book):
    items = lines(book)
    write(book, [items[0], items[1], items[3]])
    with pytest.raises(InputError, match=r"line 3.*chain"):
        read_ledger(book)
    write(book, [items[0], items[2], items[1], items[3]])
    with pytest.raises(InputError, match=r"line 2.*chain"):
        read_ledger(book)


def test_an_unsealed_line_is_refused(book):
    items = lines(book)
    bare = {k: v for k, v in items[2].items() if k not in ("prev", "integrity")}
    write(book, [*items[:2], bare, items[3]])
    with pytest.raises(InputError, match=r"line 3.*sealed"):
        read_ledger(book)


def test_a_signed_ledger_cannot_be_rewritten_without_its_key(tmp_path):
    key = generate_keypair(tmp_path / "k.key", tmp_path / "k.pub")
    other = generate_keypair(tmp_path / "o.key", tmp_path / "o.pub")
    del key, other
    sk, pk = load_private_key(tmp_path / "k.key"), load_public_key(tmp_path / "k.pub")
    osk = load_private_key(tmp_path / "o.key")
    path = tmp_path / "signed.jsonl"
    charge(path, entry(0.5), budget=2.0, sign_key=sk)
    charge(path, entry(0.5), budget=2.0, sign_key=sk)
    assert read_ledger(path, verify_key=pk)[0]["budget"]["epsilon"] == 2.0
    # A later line not signed by the ledger's key is refused, even when its chain holds.
    with pytest.raises(UsageError, match="signed"):
        charge(path, entry(0.5), budget=2.0)
    # Rewriting the whole chain under another key: consistent, but not the trusted key's.
    from fedeval.privacy.ledger_file import GENESIS, head, link

    prev, forged = GENESIS, []
    for item in lines(path):
        if "budget" in item:
            item["budget"]["epsilon"] = 1000.0
        forged.append(link(item, prev, sign_key=osk))
        prev = head(forged[-1])
    write(path, forged)
    with pytest.raises(InputError, match="signed by another key"):
        read_ledger(path, verify_key=pk)


def test_mixing_units_does_not_suggest_a_way_around_the_budget(tmp_path):
    path = tmp_path / "l.jsonl"
    charge(path, entry(0.5), budget=2.0)
    with pytest.raises(UsageError) as e:
        charge(path, entry(0.5, unit="client"), budget=2.0)
    text = str(e.value)
    assert "another dataset or ledger" not in text
    assert "same people" in text


# --- the command line ---------------------------------------------------------------------------


def _table(path: Path, n=600, clients=30, seed=3) -> Path:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0, 1)
    pq.write_table(pa.table({"score": s, "label": y, "client": np.arange(n) % clients}), path)
    return path


def _invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _release(tmp: Path, name: str, *extra) -> Path:
    src = _table(tmp / f"{name}.parquet")
    reports = tmp / f"{name}-reports"
    r = _invoke("encode", src, "-o", reports, "-m", "distdp", "--height", 3)
    assert r.exit_code == 0, r.output
    out = tmp / f"{name}.fedeval"
    r = _invoke("aggregate", reports, "-o", out, *extra)
    assert r.exit_code == 0, r.output
    return out


def test_aggregate_charges_the_ledger_and_from_does_not_charge_it_again(tmp_path):
    ledger = tmp_path / "l.jsonl"
    rel = _release(tmp_path, "a", "--ledger", ledger, "--budget", 3)
    (e,) = read_ledger(ledger)[1]
    assert e["command"] == "aggregate" and e["epsilon"] == 1.0
    released = json.loads(rel.read_text())["integrity"]["sha256"]
    assert e["release"] == released
    r = _invoke("evaluate", "--from", rel, "--ci-draws", 0, "--ledger", ledger)
    assert r.exit_code == 0, r.output
    assert len(read_ledger(ledger)[1]) == 1
    assert "already charged" in r.stderr


def test_a_release_never_charged_is_charged_once_when_read_with_a_ledger(tmp_path):
    ledger = tmp_path / "l.jsonl"
    rel = _release(tmp_path, "b")
    for cmd in ("evaluate", "curves", "calibrate"):
        r = _invoke(cmd, "--from", rel, "--ci-draws", 0, "--ledger", ledger, "--budget", 3)
        assert r.exit_code == 0, r.output
    entries = read_ledger(ledger)[1]
    assert (
        len(entries) == 1
        and entries[0]["release"] == json.loads(rel.read_text())["integrity"]["sha256"]
    )


def test_a_saved_one_shot_release_is_not_charged_twice(tmp_path):
    ledger, rel = tmp_path / "l.jsonl", tmp_path / "one.fedeval"
    src = _table(tmp_path / "t.parquet")
    r = _invoke("evaluate", src, "-m", "distdp", "--no-exact", "--ci-draws", 0,
                "--save-release", rel, "--ledger", ledger, "--budget", 3)  # fmt: skip
    assert r.exit_code == 0, r.output
    r = _invoke("evaluate", "--from", rel, "--ci-draws", 0, "--ledger", ledger)
    assert r.exit_code == 0, r.output
    assert len(read_ledger(ledger)[1]) == 1


def _keys(tmp: Path):
    generate_keypair(tmp / "ci.key", tmp / "ci.pub")
    return tmp / "ci.key", tmp / "ci.pub"


def test_check_with_a_key_refuses_a_resealed_report(tmp_path):
    private, public = _keys(tmp_path)
    src = _table(tmp_path / "t.parquet")
    report = tmp_path / "r.json"
    r = _invoke("evaluate", src, "-m", "distdp", "--no-exact", "--ci-draws", 20,
                "-o", report, "--sign-key", private)  # fmt: skip
    assert r.exit_code == 0, r.output
    gate = ("--fail-under", "auc=0.99")
    assert _invoke("check", report, *gate, "--verify-key", public).exit_code == 1
    doc = json.loads(report.read_text())
    auc = doc["metrics"]["auc"]
    auc["estimate"], auc["ci95"] = 0.999, [0.999, 0.999]
    report.write_text(json.dumps(seal(doc)))  # re-sealed by whoever edited it
    assert _invoke("check", report, *gate).exit_code == 0  # what a digest alone allows
    r = _invoke("check", report, *gate, "--verify-key", public)
    assert r.exit_code == 2 and "signature" in r.stderr


def test_apply_with_a_key_refuses_a_resealed_map(tmp_path):
    private, public = _keys(tmp_path)
    src = _table(tmp_path / "t.parquet")
    cal = tmp_path / "map.json"
    r = _invoke("calibrate", src, "-m", "distdp", "--no-exact", "--ci-draws", 0,
                "-o", cal, "--sign-key", private)  # fmt: skip
    assert r.exit_code == 0, r.output
    public_scores = _table(tmp_path / "pub.parquet")
    assert _invoke("apply", cal, public_scores, "--verify-key", public).exit_code == 0
    doc = json.loads(cal.read_text())
    cal.write_text(json.dumps(seal(doc)))
    r = _invoke("apply", cal, public_scores, "--verify-key", public)
    assert r.exit_code == 2 and "signature" in r.stderr
