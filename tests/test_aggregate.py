"""`fedeval aggregate` refuses every damaged, stray, duplicated or mismatched report, with exit
code 2, one clear message and no output; and the staged commands work end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.documents.seals import seal

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    n = 600
    y = rng.integers(0, 2, n)
    df = pd.DataFrame(
        {
            "score": np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1),
            "label": y,
            "client": rng.integers(0, 120, n),
        }
    )
    df.to_parquet("clients.parquet")
    df.iloc[:300].to_parquet("half_a.parquet")
    df.iloc[300:].assign(client=df["client"].iloc[300:] + 1000).to_parquet("half_b.parquet")
    return tmp_path


def encode(src: str, out: str, *extra: str, model: str = "federated") -> None:
    r = run("encode", src, "-m", model, "--height", "4", "-o", out, "--seed", "1", *extra)
    assert r.exit_code == 0, r.output


def rewrite_manifest(directory: str, manifest: dict) -> None:
    """A manifest edited by someone who also recomputes its digest (the seal proves nothing
    against them; the server's own checks must catch the edit)."""
    manifest.pop("integrity", None)
    Path(directory, "manifest.json").write_text(json.dumps(seal(manifest)))


def refused(args, *fragments: str) -> str:
    r = run("aggregate", *args, "-o", "agg.fedeval")
    assert r.exit_code == 2, r.output
    assert not Path("agg.fedeval").exists()
    msg = flat(r.stderr)
    for f in fragments:
        assert f in msg, msg
    assert r.stdout == ""
    return msg


def first_part(d: str) -> Path:
    return Path(d) / json.loads((Path(d) / "manifest.json").read_text())["parts"][0]["file"]


def test_staged_commands_end_to_end(work):
    encode("clients.parquet", "reports", model="distdp")
    r = run("aggregate", "reports", "-o", "agg.fedeval")
    assert r.exit_code == 0, r.output
    assert "clients reported" in flat(r.stderr)
    r = run("evaluate", "--from", "agg.fedeval", "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["metrics"]["auc"]["exact"] is None
    assert doc["metrics"]["auc"]["ci95"] is not None
    assert doc["privacy"]["model"] == "distdp" and doc["privacy"]["unit"] == "example"
    for cmd in ("curves", "calibrate"):
        assert run(cmd, "--from", "agg.fedeval").exit_code == 0


def test_tampered_part_is_refused(work):
    encode("clients.parquet", "reports")
    part = first_part("reports")
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 1
    part.write_bytes(bytes(data))
    refused(["reports"], str(part), "SHA-256")


def test_truncated_part_is_refused(work):
    encode("clients.parquet", "reports")
    part = first_part("reports")
    part.write_bytes(part.read_bytes()[:-100])
    refused(["reports"], "SHA-256", "truncated")


def test_missing_part_is_refused(work):
    encode("clients.parquet", "reports")
    first_part("reports").unlink()
    refused(["reports"], "missing")


def test_duplicated_file_is_refused(work):
    encode("clients.parquet", "reports")
    part = first_part("reports")
    shutil.copy(part, part.with_name("part-copy.parquet"))
    refused(["reports"], "part-copy.parquet", "does not list")


def test_part_listed_twice_is_refused(work):
    encode("clients.parquet", "reports")
    manifest = json.loads(Path("reports/manifest.json").read_text())
    manifest["parts"].append(manifest["parts"][0])
    rewrite_manifest("reports", manifest)
    refused(["reports"], "reports twice")


def test_edited_manifest_is_refused(work):
    encode("clients.parquet", "reports", model="distdp")
    manifest = json.loads(Path("reports/manifest.json").read_text())
    manifest["privacy"]["epsilon"] = 10.0  # a bigger ε than the clients noised for
    Path("reports/manifest.json").write_text(json.dumps(manifest))
    refused(["reports"], "integrity check failed", "manifest.json")
    # Recomputing the digest does not help: the stated claim no longer matches the noise.
    rewrite_manifest("reports", manifest)
    refused(["reports"], "privacy section does not match")


def test_small_cohorts_are_refused(work):
    pd.read_parquet("clients.parquet").query("client < 5").to_parquet("tiny.parquet")
    r = run("encode", "tiny.parquet", "-m", "federated", "-o", "tiny")
    assert r.exit_code == 2 and "at least 10" in flat(r.stderr)
    assert not Path("tiny").exists()
    encode("tiny.parquet", "tiny", "--min-cohort", "3")
    refused(["tiny"], "below the minimum of 10")
    r = run("aggregate", "tiny", "--min-cohort", "3", "-o", "agg.fedeval")
    assert r.exit_code == 0, r.output


def test_same_clients_in_two_cohorts_are_refused(work):
    encode("half_a.parquet", "a", "--population", "240")
    encode("half_a.parquet", "b", "--population", "240")
    refused(["a", "b"], "is in both")


def test_mixed_parameters_are_refused(work):
    encode("half_a.parquet", "a", "--population", "400", model="distdp")
    r = run("encode", "half_b.parquet", "-m", "distdp", "-e", "2", "--height", "4", "-o", "b",
            "--population", "400")  # fmt: skip
    assert r.exit_code == 0
    refused(["a", "b"], "different privacy parameters")


def test_wrong_population_is_refused(work):
    encode("clients.parquet", "reports")
    refused(["reports", "--population", "999"], "encoded for a population of", "not 999")


def test_distdp_cohort_alone_is_private_and_aggregates(work):
    # Shares are sized to the cohort, so one cohort of a larger run carries the full noise
    # and may be unmasked and released on its own.
    encode("half_a.parquet", "a", "--population", "1000", model="distdp")
    r = run("aggregate", "a", "-o", "agg.fedeval")
    assert r.exit_code == 0, r.output
    doc = json.loads(Path("agg.fedeval").read_text())
    assert doc["cohorts"] == 1 and "n_clients" not in doc and "reporters" not in doc


def test_two_cohorts_sum_to_the_whole(work):
    # Two cohorts of one distdp run (disjoint clients, population = both) are summed, and the
    # result is the same kind of release as one cohort of everyone.
    a = pd.read_parquet("half_a.parquet")
    b = pd.read_parquet("half_b.parquet")
    total = a["client"].nunique() + b["client"].nunique()
    encode("half_a.parquet", "a", "--population", str(total), model="distdp")
    r = run("encode", "half_b.parquet", "-m", "distdp", "--height", "4", "-o", "b",
            "--population", str(total), "--seed", "2")  # fmt: skip
    assert r.exit_code == 0
    r = run("aggregate", "a", "b", "-o", "agg.fedeval")
    assert r.exit_code == 0, r.output
    doc = json.loads(Path("agg.fedeval").read_text())
    # Under add-remove no exact count is released; each cohort brought its own noise.
    assert doc["cohorts"] == 2
    assert not {"n_clients", "reporters", "population", "source"} & set(doc)
    assert doc["privacy"]["relation"] == "add-remove"
    r = run("evaluate", "--from", "agg.fedeval", "--format", "json")
    assert r.exit_code == 0, r.output
    assert "rows" not in json.loads(r.stdout)["data"]


def test_dropout_recovery_end_to_end(work):
    encode("clients.parquet", "reports", "--dropout", "0.2")
    r = run("aggregate", "reports", "-o", "agg.fedeval")
    assert r.exit_code == 0, r.output
    assert "dropped, masks removed" in flat(r.stderr)
    # Without the revealed seeds the masks cannot be removed: refused.
    Path("reports/recovery.parquet").unlink()
    manifest = json.loads(Path("reports/manifest.json").read_text())
    manifest["recovery"] = None
    rewrite_manifest("reports", manifest)
    Path("agg.fedeval").unlink()
    refused(["reports"], "no recovery seeds")


def test_not_a_report_directory(work):
    Path("empty").mkdir()
    refused(["empty"], "manifest")
    refused(["nowhere"], "no such directory")


def test_encode_refuses_a_used_directory(work):
    encode("clients.parquet", "reports")
    r = run("encode", "clients.parquet", "-m", "federated", "-o", "reports")
    assert r.exit_code == 2
    assert "already exists" in flat(r.stderr)


def test_encode_bad_input_writes_nothing(work):
    pd.DataFrame({"score": [0.1, 2.0], "label": [0, 1]}).to_parquet("bad.parquet")
    r = run("encode", "bad.parquet", "-m", "federated", "-o", "reports")
    assert r.exit_code == 2
    assert "bad.parquet" in flat(r.stderr) and "row 2" in flat(r.stderr)
    assert not Path("reports").exists()
    assert not any(p.name.startswith(".reports") for p in Path(".").iterdir())


def test_declared_thresholds_reach_the_release(work):
    # Declared at encode, the thresholds are cell edges of every client's report, the manifest
    # states them, and the aggregate carries them to evaluate --from: with exact sums
    # (federated), precision/recall there are the exact values of the pooled table.
    encode("clients.parquet", "reports", "--thresholds", "0.37,0.61")
    manifest = json.loads(Path("reports/manifest.json").read_text())
    assert manifest["cell_edges"]["scores"] == [0.37, 0.61]
    assert run("aggregate", "reports", "-o", "agg.fedeval").exit_code == 0
    r = run("evaluate", "--from", "agg.fedeval", "--thresholds", "0.37,0.61", "-f", "json")
    assert r.exit_code == 0, r.output
    df = pd.read_parquet("clients.parquet")
    for row in json.loads(r.stdout)["metrics"]["thresholds"]:
        t = row["threshold"]
        predicted = df["score"] >= t
        tp = int((predicted & (df["label"] == 1)).sum())
        assert row["recall"]["estimate"] == pytest.approx(tp / int(df["label"].sum()), abs=1e-12)
        assert row["precision"]["estimate"] == pytest.approx(tp / int(predicted.sum()), abs=1e-12)
    # Cohorts encoded with other thresholds are not one protocol run.
    Path("agg.fedeval").unlink()
    encode("half_a.parquet", "a", "--population", "240", "--thresholds", "0.37,0.61")
    encode("half_b.parquet", "b", "--population", "240", "--thresholds", "0.5")
    refused(["a", "b"], "score axis")
    r = run("encode", "clients.parquet", "-o", "bad", "--thresholds", "2")
    assert r.exit_code == 2 and not Path("bad").exists()
