"""Every shell example in README.md runs, in order, on files shaped as the README names them
(made from `sample_data/`), and exits 0: the README cannot drift from the CLI unnoticed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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


def test_every_readme_shell_example_runs(tmp_path):
    lines = shell_examples(README.read_text())
    assert len(lines) >= 25  # the README's examples, not an empty parse
    make_inputs(tmp_path)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("FEDEVAL_DEBUG", None)
    for line in lines:
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


@pytest.mark.parametrize("fence", ["```sh\nfedeval a \\\n  --b\nmake demo\n# c\n```\n"])
def test_shell_examples_joins_continuations_and_skips_make(fence):
    assert shell_examples(fence) == ["fedeval a    --b"]
