"""Every shell example in README.md runs, in order, on files shaped as the README names them
(made from `sample_data/`), and exits 0: the README cannot drift from the CLI unnoticed.

The first example and every line with shell syntax beyond `[cat F |] fedeval ARGS [> OUT]
[| jq …]` run in bash through the installed console script; the plain ones run in-process through
Typer's runner (the same command, stdin from F and stdout to OUT as the shell would), which
spares a Python start-up and the library's import per line (about half of the test's time)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def shell_examples(text: str) -> list[str]:
    """The command lines of the README's ```sh blocks (continuations joined), but `make`."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith(("make ", "#")):
                lines.append(line)
    return lines


def in_process(line: str) -> tuple[list[str], str | None, str | None] | None:
    """(fedeval arguments, stdin file, stdout file) of a line of the plain form
    `[cat F |] fedeval ARGS [> OUT] [| jq …]` (trailing comment dropped), else None."""
    line = line.split("| jq")[0]
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    stdin = None
    if words[:1] == ["cat"] and len(words) > 3 and words[2] == "|":
        stdin, words = words[1], words[3:]
    stdout = None
    if len(words) >= 2 and words[-2] == ">":
        stdout, words = words[-1], words[:-2]
    if words[:1] != ["fedeval"] or any(w in {"|", ">", "<", ";", "&&", "||", "&"} for w in words):
        return None
    if any(c in line for c in "$`(){}*?"):
        return None
    return words[1:], stdin, stdout


def make_inputs(d: Path) -> None:
    """The files the examples name, from the sample data."""
    scores = pq.read_table(ROOT / "sample_data" / "scores.parquet")
    pq.write_table(scores, d / "scores.parquet")
    scores.to_pandas().to_csv(d / "scores.csv", index=False)
    s = np.clip(scores.column("score").to_numpy(), 1e-6, 1 - 1e-6)
    y = scores.column("label").to_numpy()
    logit = np.clip(np.log(s) - np.log1p(-s), -8, 8)
    spam = np.where(y == 1, "spam", "ham")
    pq.write_table(pa.table({"logit": logit, "y": spam}), d / "logits.parquet")
    pq.write_table(scores.slice(0, 20_000), d / "pilot.parquet")
    new = scores.select(["score"]).slice(0, 1_000)
    pq.write_table(new, d / "new_scores.parquet")
    new.to_pandas().to_csv(d / "new_scores.csv", index=False)
    (d / "sample_data").mkdir()
    shutil.copy(ROOT / "sample_data" / "multiclass.parquet", d / "sample_data")
    mc = pq.read_table(ROOT / "sample_data" / "multiclass.parquet")
    names = [n for n in mc.schema.names if n.startswith("logit_")]
    z = np.column_stack([mc.column(n).to_numpy() for n in names])
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    probs = {f"prob_{i}": p[:, i] for i in range(len(names))}
    pq.write_table(pa.table({"label": mc.column("label"), **probs}), d / "probs.parquet")
    pq.write_table(mc.select(names).slice(0, 1_000), d / "new_logits.parquet")


@pytest.mark.slow
def test_every_readme_shell_example_runs(tmp_path, monkeypatch):
    lines = shell_examples(README.read_text())
    assert len(lines) >= 25  # the README's examples, not an empty parse
    make_inputs(tmp_path)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("FEDEVAL_DEBUG", None)
    monkeypatch.delenv("FEDEVAL_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for i, line in enumerate(lines):
        plain = in_process(line) if i > 0 else None
        if plain is not None:
            args, stdin, stdout = plain
            data = None if stdin is None else (tmp_path / stdin).read_bytes()
            result = runner.invoke(app, args, input=data)
            assert result.exit_code == 0, (
                f"README example failed: {line}\n{result.stderr[-2000:]}\n{result.exception!r}"
            )
            if stdout is not None:
                (tmp_path / stdout).write_bytes(result.stdout_bytes)
            continue
        command = line
        if "| jq" in command and shutil.which("jq") is None:
            command = command.split("| jq")[0]  # the JSON is still checked to be made
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"README example failed: {line}\n{done.stderr[-2000:]}"
    # What the examples promise to write, they wrote.
    for name in (
        "report.json",
        "map.json",
        "calibrated.csv",
        "calibrated.parquet",
        "clients.parquet",
        "aggregate.fedeval",
        "budget.jsonl",
        "curves.png",
    ):
        assert (tmp_path / name).exists(), name
    assert (tmp_path / "reports" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        (
            "fedeval evaluate s.parquet -m distdp",
            (["evaluate", "s.parquet", "-m", "distdp"], None, None),
        ),
        (
            "cat n.csv | fedeval apply m.json - > c.csv",
            (["apply", "m.json", "-"], "n.csv", "c.csv"),
        ),
        (
            "fedeval evaluate - -f json | jq .metrics.auc",
            (["evaluate", "-", "-f", "json"], None, None),
        ),
        ("fedeval plan --rows 9   # a comment", (["plan", "--rows", "9"], None, None)),
        ("fedeval evaluate $(ls *.parquet)", None),
        ("fedeval encode a -o r/ && fedeval aggregate r/", None),
        ("python -c 'print(1)'", None),
    ],
)
def test_plain_lines_run_in_process_and_the_rest_in_bash(line, parsed):
    assert in_process(line) == parsed


@pytest.mark.parametrize("fence", ["```sh\nfedeval a \\\n  --b\nmake demo\n# c\n```\n"])
def test_shell_examples_joins_continuations_and_skips_make(fence):
    assert shell_examples(fence) == ["fedeval a    --b"]
