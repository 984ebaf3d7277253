"""Output targets: a regular file is replaced atomically; a device, a FIFO or a link to either is
written through and left where it was; a symbolic link is followed (the file it names replaced,
the link kept); a dangling link, a directory or a block device is refused with exit 2.

Devices are reached through a link in the test's own directory (`x -> /dev/null`): a writer that
renamed over its target would replace the link, never the machine's `/dev/null`, even as root.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fedeval.cli import app
from fedeval.core.errors import UsageError
from fedeval.tables.outputs import Outputs, output_target
from fedeval.tables.write import atomic_output

runner = CliRunner()


class FifoReader:
    """Reads everything written to a new FIFO at `path`, in a thread (a writer blocks until a
    reader opens the pipe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.data = b""
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            self.data = f.read()

    def finish(self) -> bytes:
        self._thread.join(0.5)
        for _ in range(100):  # nobody wrote: release the reader with an empty writer
            if not self._thread.is_alive():
                break
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: the reader is not (or no longer) waiting on the pipe
                pass
            self._thread.join(0.1)
        return self.data


def is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def test_output_target_kinds(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "file").write_text("x")
    (tmp_path / "to-null").symlink_to(os.devnull)
    (tmp_path / "to-file").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")

    assert output_target(os.devnull).stream
    assert output_target(tmp_path / "pipe").stream
    assert output_target(tmp_path / "to-null").stream
    assert output_target(tmp_path / "new") == output_target(tmp_path / "new")
    assert not output_target(tmp_path / "new").stream
    assert not output_target(tmp_path / "file").stream
    followed = output_target(tmp_path / "to-file")
    assert not followed.stream
    assert followed.path == (tmp_path / "file").resolve()
    for refused in ("dangling", ""):
        with pytest.raises(UsageError):
            output_target(tmp_path / refused)  # "" is the directory itself


def test_stdout_through_dev_fd_is_written_through_not_replaced(tmp_path):
    """`-o /dev/stdout` when stdout is a regular file: the shell's file is appended to through
    the descriptor, never renamed over (it would leave the shell writing to a deleted file)."""
    out = tmp_path / "shell-redirect"
    with open(out, "wb") as f:
        f.write(b"before\n")
        f.flush()
        name = f"/dev/fd/{f.fileno()}"
        assert output_target(name).stream
        with atomic_output(name) as g:
            g.write("after\n")
    assert out.read_bytes() == b"before\nafter\n"


def test_atomic_output_through_a_fifo(tmp_path):
    reader = FifoReader(tmp_path / "pipe")
    with atomic_output(tmp_path / "pipe") as f:
        f.write("hello\n")
    assert reader.finish() == b"hello\n"
    assert is_fifo(tmp_path / "pipe")


def test_outputs_stage_a_device_outside_its_directory_and_copy_on_commit(tmp_path):
    (tmp_path / "to-null").symlink_to(os.devnull)
    reader = FifoReader(tmp_path / "pipe")
    with Outputs() as out:
        staged = out.staged_path(tmp_path / "pipe")
        assert staged.parent != tmp_path  # never a temporary file beside a device
        staged.write_bytes(b"release\n")
        out.stage_text(tmp_path / "to-null", "discarded\n")
        out.commit()
    assert reader.finish() == b"release\n"
    assert is_fifo(tmp_path / "pipe")
    assert os.readlink(tmp_path / "to-null") == os.devnull
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "to-null"]


def test_discarded_outputs_never_touch_a_stream(tmp_path):
    reader = FifoReader(tmp_path / "pipe")
    with Outputs() as out:
        out.stage_text(tmp_path / "pipe", "never\n")
    assert reader.finish() == b""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A small scored table, a map, encoded reports and a multiclass table for every command."""
    d = tmp_path_factory.mktemp("outputs")
    rng = np.random.default_rng(3)
    n = 400
    y = (np.arange(n) % 2).astype(np.int64)
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1)
    pq.write_table(pa.table({"score": s, "label": y, "client": np.arange(n) % 40}), d / "s.parquet")
    k = 3
    p = rng.dirichlet(np.ones(k), n)
    cols = {f"prob_{j}": p[:, j] for j in range(k)}
    pq.write_table(pa.table({**cols, "label": rng.integers(0, k, n)}), d / "m.parquet")
    ok = runner.invoke(app, ["calibrate", str(d / "s.parquet"), "-o", str(d / "map.json")])
    assert ok.exit_code == 0, ok.stderr
    ok = runner.invoke(
        app,
        ["encode", str(d / "s.parquet"), "--model", "federated", "-o", str(d / "reports")],
    )
    assert ok.exit_code == 0, ok.stderr
    return d


COMMANDS = {
    "evaluate -o": ["evaluate", "{s}", "--model", "federated", "-o", "{t}"],
    "evaluate --save-release": ["evaluate", "{s}", "--no-exact", "--save-release", "{t}"],
    "evaluate --plot": ["evaluate", "{s}", "--model", "federated", "--plot", "{t}"],
    "curves -o": ["curves", "{s}", "--model", "federated", "-o", "{t}"],
    "curves --save-release": ["curves", "{s}", "--no-exact", "--save-release", "{t}"],
    "calibrate -o": ["calibrate", "{s}", "-o", "{t}"],
    "calibrate --multiclass -o": [
        "calibrate",
        "{m}",
        "--multiclass",
        "--method",
        "fedtemp",
        "-o",
        "{t}",
    ],
    "partition -o": [
        "partition",
        "{s}",
        "--scheme",
        "iid",
        "-k",
        "4",
        "--client-col",
        "part",
        "-o",
        "{t}",
    ],
    "apply -o": ["apply", "{map}", "{s}", "-o", "{t}"],
    "aggregate -o": ["aggregate", "{reports}", "-o", "{t}"],
}


def _run(work: Path, argv: list[str], target: Path):
    names = {"s": work / "s.parquet", "m": work / "m.parquet", "map": work / "map.json"}
    names |= {"reports": work / "reports", "t": target}
    return runner.invoke(app, [a.format(**names) for a in argv], catch_exceptions=False)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", ["device", "fifo", "link"])
def test_every_output_leaves_devices_fifos_and_links_in_place(work, tmp_path, command, kind):
    argv = COMMANDS[command]
    suffix = ".svg" if "--plot" in argv else ".out"
    target = tmp_path / f"target{suffix}"
    reader = None
    if kind == "device":
        target.symlink_to(os.devnull)
    elif kind == "fifo":
        reader = FifoReader(target)
    else:
        (tmp_path / f"file{suffix}").write_text("old")
        target.symlink_to(tmp_path / f"file{suffix}")
    result = _run(work, argv, target)
    got = reader.finish() if reader is not None else b""
    assert result.exit_code == 0, result.stderr
    if kind == "device":
        assert os.readlink(target) == os.devnull
    elif kind == "fifo":
        assert is_fifo(target)
        assert len(got) > 0
    else:
        assert os.readlink(target) == str(tmp_path / f"file{suffix}")
        assert (tmp_path / f"file{suffix}").read_bytes() not in (b"", b"old")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_a_dangling_link_is_refused_with_exit_2_and_left_alone(work, tmp_path):
    target = tmp_path / "dangling.json"
    target.symlink_to(tmp_path / "missing.json")
    result = _run(work, COMMANDS["evaluate -o"], target)
    assert result.exit_code == 2
    assert "symbolic link to a missing file" in result.stderr
    assert os.readlink(target) == str(tmp_path / "missing.json")
    assert not (tmp_path / "missing.json").exists()


def test_encode_refuses_a_link_as_its_reports_directory(work, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    result = runner.invoke(
        app,
        ["encode", str(work / "s.parquet"), "--model", "federated", "-o", str(tmp_path / "link")],
    )
    assert result.exit_code == 2
    assert "symbolic link" in result.stderr
    assert (tmp_path / "link").is_symlink()
    assert list((tmp_path / "empty").iterdir()) == []


def test_the_cli_reaches_click_only_through_typer_public_names():
    """typer < 0.22 has no `typer._click` (click is a dependency there): importing it by name
    crashed `fedeval --version` with typer 0.15.1. The click in use is read off typer's own
    public exception class instead."""
    import typer

    from fedeval.cli import clicklib

    assert issubclass(typer.BadParameter, clicklib.ClickException)
    sources = Path(__file__).parents[1].joinpath("fedeval").rglob("*.py")
    offenders = [p.name for p in sources if "typer._click" in p.read_text(encoding="utf-8")]
    assert offenders == []


@pytest.mark.parametrize("command", ["apply -o", "evaluate -o", "partition -o"])
def test_a_nul_byte_in_an_output_name_is_a_usage_error_not_an_internal_one(work, tmp_path, command):
    """Found by the fuzz run: click's Path conversion and os.stat raise ValueError on a NUL
    byte, which surfaced as exit 70."""
    result = _run(work, COMMANDS[command], tmp_path / "x\x00y")
    assert result.exit_code == 2
    assert "NUL byte" in result.stderr
