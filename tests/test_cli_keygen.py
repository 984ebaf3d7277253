"""`fedeval keygen`: a key pair to sign releases with, and the fingerprint to check them by."""

from __future__ import annotations

import os
import re
import stat

import numpy as np
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.documents.release_file import save_release
from fedeval.documents.seals import fingerprint, load_private_key, load_public_key
from fedeval.protocol.simulate import simulate
from fedeval.tables.scored import scored_from_arrays

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def flat(text: str) -> str:
    return " ".join(ANSI.sub("", text).split())


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def test_keygen_writes_the_pair_and_prints_the_fingerprint(tmp_path):
    result = invoke("keygen", "-o", str(tmp_path / "ci"))
    assert result.exit_code == 0, result.stderr
    private, public = tmp_path / "ci.key", tmp_path / "ci.pub"
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    key = load_public_key(public)
    assert fingerprint(load_private_key(private).public_key()) == fingerprint(key)
    assert fingerprint(key) in result.stderr
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ci.key", "ci.pub"]


def test_keygen_accepts_a_name_with_a_key_suffix(tmp_path):
    result = invoke("keygen", "--output", str(tmp_path / "ci.key"))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ci.key", "ci.pub"]


def test_keygen_never_overwrites(tmp_path):
    (tmp_path / "ci.pub").write_text("someone's key")
    result = invoke("keygen", "-o", str(tmp_path / "ci"))
    assert result.exit_code == 2
    message = flat(result.stderr)
    assert f"'{tmp_path / 'ci.pub'}' already exists" in message
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ci.pub"]
    assert (tmp_path / "ci.pub").read_text() == "someone's key"

    assert invoke("keygen", "-o", str(tmp_path / "other")).exit_code == 0
    again = invoke("keygen", "-o", str(tmp_path / "other"))
    assert again.exit_code == 2 and "other.key' already exists" in flat(again.stderr)


def test_keygen_needs_a_name():
    assert invoke("keygen").exit_code == 2


def test_keygen_help_teaches_signing_and_verifying():
    text = flat(invoke("keygen", "--help").stdout)
    for words in ("--sign-key NAME.key", "--verify-key NAME.pub", "--save-release", "--from"):
        assert words in text, words
    assert "keygen" in flat(invoke("--help").stdout)


def test_a_signed_release_is_checked_against_the_key(tmp_path):
    """The pair keygen makes signs a release; --from with --verify-key accepts only that key."""
    assert invoke("keygen", "-o", str(tmp_path / "ci")).exit_code == 0
    assert invoke("keygen", "-o", str(tmp_path / "intruder")).exit_code == 0
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 4000)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    run = simulate(scored_from_arrays(y, s), model="distdp", epsilon=1.0, seed=3)
    path = tmp_path / "run.fedeval"
    save_release(path, run.release, run.score_range, sign_key=load_private_key(tmp_path / "ci.key"))

    ok = invoke("evaluate", "--from", str(path), "--verify-key", str(tmp_path / "ci.pub"))
    assert ok.exit_code == 0, ok.stderr
    bad = invoke("evaluate", "--from", str(path), "--verify-key", str(tmp_path / "intruder.pub"))
    assert bad.exit_code == 2
    assert f"'{path}': signature check failed: it is signed by another key" in flat(bad.stderr)
