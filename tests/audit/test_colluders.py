"""Collusion (issue 23): a server that colludes with t of a cohort's m clients subtracts their
reports, noise shares included, from the cohort's sum. With shares Pólya(1/m, α) what is left
carries only (m − t)/m of the discrete Laplace; `--colluders t` sizes each share Pólya(1/(m − t),
α) so that any m − t honest clients' shares still sum to the whole of it.

The audit measures, over many unseeded encodings, the variance of a cohort's sum less the
colluders' reports (their one-hot counts and shares, as they would hand them over) less the
exact counts of the honest clients, and compares it with the stated per-count variance
(shared AUDIT.md, section 3); the control encodes without the knob and must be caught.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval import audit
from fedeval.cli import app
from fedeval.privacy.mechanism import Mechanism

runner = CliRunner()

COLLUDERS = 3


def _scenario(colluders: int) -> audit.Scenario:
    return audit.Scenario("distdp", "add-remove", colluders=colluders)


@pytest.mark.parametrize("t", [1, COLLUDERS])
def test_honest_clients_noise_is_whole_despite_colluders(t, trials):
    scenario = _scenario(t)
    stated = Mechanism(scenario.config()).noise_variance
    rng = np.random.default_rng(40 + t)
    for i, noise in enumerate(audit.honest_noise(scenario, trials // 4, rng, colluders=t)):
        lo, hi = audit.variance_interval(noise)
        assert lo <= stated <= hi, (
            f"cohort {i}, {t} colluders removed: variance in [{lo:.3f}, {hi:.3f}], "
            f"stated {stated:.3f}"
        )


def test_colluder_audit_catches_shares_sized_for_the_whole_cohort(trials):
    """Broken on purpose: shares Pólya(1/m, α) (no knob) while t clients collude: what the
    honest clients' shares leave has (m − t)/m of the stated variance."""
    scenario = _scenario(0)
    stated = Mechanism(scenario.config()).noise_variance
    rng = np.random.default_rng(47)
    caught = False
    for noise in audit.honest_noise(scenario, trials // 4, rng, colluders=COLLUDERS):
        lo, hi = audit.variance_interval(noise)
        caught |= not (lo <= stated <= hi)
    assert caught


def test_the_claim_states_collusion(tmp_path):
    """Every document states what collusion does: without the knob, the guarantee holds if no
    client of a cohort colludes with the server; with it, up to t of each cohort."""
    rng = np.random.default_rng(1)
    n = 40
    table = pa.table(
        {"score": rng.random(n), "label": np.arange(n) % 2, "client": np.arange(n) % 20}
    )
    pq.write_table(table, tmp_path / "t.parquet")
    for t, words in ((0, "colludes"), (COLLUDERS, f"up to {COLLUDERS}")):
        out = tmp_path / f"r{t}"
        r = runner.invoke(app, ["encode", str(tmp_path / "t.parquet"), "-o", str(out), "-m",
                                "distdp", "--height", "2", "--colluders", str(t)])  # fmt: skip
        assert r.exit_code == 0, r.output
        privacy = json.loads((out / "manifest.json").read_text())["privacy"]
        assert words in privacy["guarantee"], privacy["guarantee"]
        assert privacy["mechanism"]["colluders"] == t
        assert privacy["dp_event"].get("colluders", 0) == t
        rel = tmp_path / f"r{t}.fedeval"
        a = runner.invoke(app, ["aggregate", str(out), "-o", str(rel)])
        assert a.exit_code == 0, a.output
        back = json.loads(rel.read_text())["privacy"]
        assert back["mechanism"]["colluders"] == t


def test_colluders_must_leave_an_honest_client(tmp_path):
    rng = np.random.default_rng(1)
    table = pa.table({"score": rng.random(20), "label": np.arange(20) % 2})
    pq.write_table(table, tmp_path / "t.parquet")
    r = runner.invoke(app, ["encode", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "r"),
                            "-m", "distdp", "--colluders", "10", "--min-cohort", "10"])  # fmt: skip
    assert r.exit_code == 2 and "colluders" in r.stderr
    r = runner.invoke(app, ["encode", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "r"),
                            "-m", "federated", "--colluders", "1"])  # fmt: skip
    assert r.exit_code == 2 and "colluders" in r.stderr
