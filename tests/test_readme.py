"""Every shell example in README.md runs, in order, on files shaped as the README names them
(made from `sample_data/`), and exits 0: the README cannot drift from the CLI unnoticed. The
lines run as chains that share no file (`chains`), each chain a test case, so that they spread
over the test workers rather than run one after another in one of them.

The first example and every line with shell syntax beyond `[cat F |] fedeval ARGS [| fedeval
ARGS …] [> OUT] [| jq …]` run in bash through the installed console script; the plain ones run
in-process through Typer's runner (the same commands, stdin from F, each one's stdout the next
one's stdin and the last one's to OUT, as the shell would), which spares a Python start-up and
the library's import per command (about half of the test's time)."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

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
    # Expansions, globs, subshells: in the words, so a comment's `cal_prob_*` is not one.
    if any(c in w for w in words for c in "$`(){}*?"):
        return None
    return words[1:], stdin, stdout


def pipeline(line: str) -> list[tuple[list[str], str | None, str | None]] | None:
    """`in_process` of each command of a line that pipes plain fedeval commands into each
    other (`fedeval calibrate s -o - | fedeval apply - n.csv > c.csv`): the first may read a
    file on stdin, the last may write one; else None (the line runs in bash)."""
    parts = line.split("| jq")[0].split(" | ")
    if parts[0].startswith("cat "):
        parts = [f"{parts[0]} | {parts[1]}", *parts[2:]] if len(parts) > 1 else parts
    stages = [in_process(part) for part in parts]
    if any(s is None for s in stages):
        return None
    plain = cast(list[tuple[list[str], str | None, str | None]], stages)
    if any(stdin is not None for _, stdin, _ in plain[1:]):
        return None
    if any(stdout is not None for _, _, stdout in plain[:-1]):
        return None
    return plain


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


WRITES = {"-o", "--output", ">", "--save-release", "--plot", "--ledger"}
"""Options whose next word is a file the line writes (`--ledger` also reads it)."""


def written(line: str) -> set[str]:
    """The files a README line writes: the word after -o, >, --save-release, --plot, --ledger
    (`-` is stdout)."""
    words = line.split("#")[0].split()
    return {b for a, b in itertools.pairwise(words) if a in WRITES and b != "-"}


def chains(lines: list[str]) -> list[list[int]]:
    """The lines split into chains that share no file: a line joins the chain of the last
    earlier line that wrote a file it names (a file it reads, or a ledger it adds to), else it
    starts its own. Lines in different chains touch different files (besides the inputs, which
    no line writes), so each chain can run on its own, in README order, in a fresh directory,
    and the whole runs as the README reads it."""
    writer: dict[str, int] = {}  # file → the last line that wrote it
    chain_of: list[int] = []
    out: list[list[int]] = []
    for i, line in enumerate(lines):
        words = set(re.split(r"[\s|<>]+", line.split("#")[0]))
        mine = written(line)
        reads = {w for w in words if w in writer and (w not in mine or "--ledger" in line)}
        joined = {chain_of[writer[w]] for w in reads}
        if len(joined) > 1:  # two chains meet: merge them (the later into the earlier)
            keep, *rest = sorted(joined)
            for r in rest:
                out[keep] = sorted(out[keep] + out[r])
                out[r] = []
                chain_of = [keep if c == r else c for c in chain_of]
            joined = {keep}
        c = joined.pop() if joined else len(out)
        if c == len(out):
            out.append([])
        out[c].append(i)
        chain_of.append(c)
        for w in mine:
            writer[w] = i
    return [c for c in out if c]


LINES = shell_examples(README.read_text())
CHAINS = chains(LINES)


@pytest.fixture(scope="session")
def inputs(tmp_path_factory) -> Path:
    """The input files, made once per process (each chain runs on a copy)."""
    d = tmp_path_factory.mktemp("readme-inputs")
    make_inputs(d)
    return d


def test_readme_examples_are_parsed_and_every_line_is_in_one_chain():
    assert len(LINES) >= 25  # the README's examples, not an empty parse
    assert sorted(i for c in CHAINS for i in c) == list(range(len(LINES)))
    # What the examples promise to write, some chain writes (and checks that it did).
    promised = {f for line in LINES for f in written(line)}
    for name in (
        "report.json",
        "map.json",
        "calibrated.csv",
        "calibrated.parquet",
        "clients.parquet",
        "aggregate.fedeval",
        "budget.jsonl",
        "curves.png",
        "reports/",
    ):
        assert name in promised, name


def chain_id(chain: list[int]) -> str:
    """`10-calibrate`: the chain's first line and its command."""
    command = re.findall(r"fedeval (\S+)", LINES[chain[0]])[0]
    return f"{chain[0]}-{command}"


@pytest.mark.slow
@pytest.mark.parametrize("chain", CHAINS, ids=chain_id)
def test_every_readme_shell_example_runs(chain, inputs, tmp_path, monkeypatch):
    """One chain of README lines (`chains`), in order; every chain is a case, so the examples
    spread over the workers. The README's first line runs in bash through the console script."""
    shutil.copytree(inputs, tmp_path, dirs_exist_ok=True)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("FEDEVAL_DEBUG", None)
    monkeypatch.delenv("FEDEVAL_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for i in chain:
        line = LINES[i]
        stages = pipeline(line) if i > 0 else None
        if stages is not None:
            data = None if stages[0][1] is None else (tmp_path / stages[0][1]).read_bytes()
            for args, _, _ in stages:  # each command's stdout is the next one's stdin
                result = runner.invoke(app, args, input=data)
                assert result.exit_code == 0, (
                    f"README example failed: {line}\n{result.stderr[-2000:]}\n{result.exception!r}"
                )
                data = result.stdout_bytes
            stdout = stages[-1][2]
            if stdout is not None:
                (tmp_path / stdout).write_bytes(data)
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
    # What the chain's lines promise to write, they wrote.
    for i in chain:
        for name in written(LINES[i]):
            assert (tmp_path / name).exists(), (LINES[i], name)
    if any(w == "reports/" for i in chain for w in written(LINES[i])):
        assert (tmp_path / "reports" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        # a reader joins its writer's chain; a file written again starts over
        (["a -o m.json", "b m.json", "c -o m.json", "d", "e m.json"], [[0, 1], [2, 4], [3]]),
        # a ledger is read and written; stdout `-` is no file
        (["a --ledger l.jsonl", "b -o -", "c --ledger l.jsonl"], [[0, 2], [1]]),
        # a line reading two chains' files merges them
        (["a -o x", "b -o y", "c x y > z"], [[0, 1, 2]]),
        # `> f` and `cat f |`
        (["a > r.csv", "cat r.csv | b"], [[0, 1]]),
    ],
)
def test_chains_follow_the_files_lines_share(lines, expected):
    assert chains(lines) == expected


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
        (
            "fedeval apply m.json n.parquet   # adds p_* columns",
            (["apply", "m.json", "n.parquet"], None, None),
        ),
        ("fedeval evaluate '*.parquet'", None),
        ("fedeval evaluate $(ls *.parquet)", None),
        ("fedeval encode a -o r/ && fedeval aggregate r/", None),
        ("python -c 'print(1)'", None),
    ],
)
def test_plain_lines_run_in_process_and_the_rest_in_bash(line, parsed):
    assert in_process(line) == parsed


@pytest.mark.parametrize(
    ("line", "stages"),
    [
        (
            "fedeval calibrate s.parquet -o - | fedeval apply - n.csv > c.csv",
            [
                (["calibrate", "s.parquet", "-o", "-"], None, None),
                (["apply", "-", "n.csv"], None, "c.csv"),
            ],
        ),
        (
            "cat n.csv | fedeval apply m.json - | fedeval evaluate - -f json | jq .x",
            [
                (["apply", "m.json", "-"], "n.csv", None),
                (["evaluate", "-", "-f", "json"], None, None),
            ],
        ),
        ("fedeval evaluate s.parquet", [(["evaluate", "s.parquet"], None, None)]),
        # a file written mid-pipe, a file read mid-pipe, another program: bash
        ("fedeval calibrate s -o - > m.json | fedeval apply - n.csv", None),
        ("fedeval calibrate s -o - | cat m.json | fedeval apply - n.csv", None),
        ("fedeval calibrate s -o - | gzip > m.gz", None),
        ("fedeval encode a -o r/ && fedeval aggregate r/", None),
    ],
)
def test_pipes_of_plain_commands_run_in_process(line, stages):
    assert pipeline(line) == stages


@pytest.mark.parametrize("fence", ["```sh\nfedeval a \\\n  --b\nmake demo\n# c\n```\n"])
def test_shell_examples_joins_continuations_and_skips_make(fence):
    assert shell_examples(fence) == ["fedeval a    --b"]
