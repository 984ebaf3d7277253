"""Program-wide flags work after the command as well as before it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.cli.support import _globals_first

runner = CliRunner()


def test_globals_move_before_the_command_but_not_past_the_end_of_options():
    assert _globals_first(["evaluate", "f", "-Q", "--debug"]) == ["-Q", "--debug", "evaluate", "f"]
    assert _globals_first(["evaluate", "--", "-Q"]) == ["evaluate", "--", "-Q"]


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_after_the_command(tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    client = np.arange(400) % 40
    pq.write_table(pa.table({"score": s, "label": y, "client": client}), "d.parquet")

    def encode(out: str) -> list[str]:
        return ["encode", "d.parquet", "-o", out, "--client-col", "client", "--seed", "1"]

    loud = runner.invoke(app, encode("r"))
    assert loud.exit_code == 0 and "examples of" in loud.stderr
    args = ["-Q", *encode("r2")] if where == "before" else [*encode("r2"), "-Q"]
    quiet = runner.invoke(app, args)
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""


def test_library_messages_name_parameters_and_the_cli_names_its_options(tmp_path, monkeypatch):
    import fedeval
    from fedeval.cli.support import in_cli_words

    with pytest.raises(fedeval.InputError) as e:
        fedeval.evaluate([0, 1], [0.5, 1.5])
    assert "`score_range`" in str(e.value) and "--" not in str(e.value)
    with pytest.raises(fedeval.UsageError) as e:
        fedeval.evaluate([0, 1, 1, 0], [0.1, 0.2, 0.7, 0.9], model="federated", epsilon=1.0)
    assert "--" not in str(e.value)

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.csv").write_text("score,label\n0.5,1\n1.5,0\n")
    result = runner.invoke(app, ["evaluate", "bad.csv"])
    assert result.exit_code == 2
    assert "pass --score-range lo,hi" in result.stderr and "`" not in result.stderr

    flags = {"--score-range", "--curve-method"}
    assert in_cli_words("pass `score_range`; `method` or `nope`", flags) == (
        "pass --score-range; --curve-method or `nope`"
    )
