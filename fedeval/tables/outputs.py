"""A run's output files, prepared first and committed together.

A command that writes several files (a JSON report, a plot, a saved release, a calibration map)
and charges a privacy ledger must not leave half of them behind when one step fails: a plot
directory that cannot be written, matplotlib missing, a ledger refusing the release. `Outputs`
stages every file beside its target (a hidden temporary name in the same directory, so the final
rename is atomic and cannot cross file systems), and only `commit` renames them into place. The
ledger charge is the point of no return: a run stages everything, charges, then commits; a
failure before the charge leaves no file and no charge.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> with Outputs() as out:
...     out.stage_text(d / "a.json", "{}\\n")
...     out.commit()
>>> (d / "a.json").read_text()
'{}\\n'
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fedeval.core.errors import UsageError

STDOUT = "-"


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    return path is not None and str(path) == STDOUT


_MAGIC_ROOTS = ("/dev/", "/proc/")
"""Where a name can reach an open descriptor (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`):
written through even when the descriptor is a regular file, as the shell that opened it expects."""


@dataclass(frozen=True)
class Target:
    """Where an output goes and how: `path` to write, `stream` to write through an existing
    device or FIFO (`/dev/null`, `/dev/stdout`, a named pipe, `>(...)`) rather than rename a new
    file over it. A symbolic link is followed: the file it names is written, the link kept."""

    path: Path
    stream: bool


def output_target(path: str | os.PathLike[str]) -> Target:
    """How `path` may be written, or `UsageError` when it may not (a directory, a block device,
    a socket, a dangling symbolic link). Nothing at `path` is ever replaced but a regular file.

    >>> output_target("/dev/null").stream
    True
    >>> output_target("report.json")
    Target(path=PosixPath('report.json'), stream=False)
    """
    given = Path(path)
    if "\x00" in str(given):
        raise UsageError(f"cannot write {str(path)!r}: a file name holds no NUL byte.")
    try:
        st: os.stat_result | None = os.stat(given)  # follows links, /proc's magic ones too
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}.", file=str(path)) from e
    if st is None:
        if given.is_symlink():
            raise UsageError(
                f"cannot write '{path}': it is a symbolic link to a missing file; "
                "name the file itself.",
                file=str(path),
            )
        return Target(given, False)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise UsageError(f"cannot write '{path}': it is a directory.", file=str(path))
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return Target(given, True)
    if not stat.S_ISREG(mode):
        what = "a block device" if stat.S_ISBLK(mode) else "not a regular file"
        raise UsageError(
            f"cannot write '{path}': it is {what}; fedeval writes regular files, character "
            "devices and pipes only.",
            file=str(path),
        )
    real = os.path.realpath(given)
    if real.startswith(_MAGIC_ROOTS) or str(given.absolute()).startswith(_MAGIC_ROOTS):
        return Target(given, True)  # an open descriptor that is a file: append through it
    return Target(Path(real) if given.is_symlink() else given, False)


@contextlib.contextmanager
def open_stream(target: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open an existing device or pipe for writing: never created, never truncated (a
    descriptor reached through `/dev/stdout` keeps what the shell or this run wrote before)."""
    sys.stdout.flush()  # what this run printed before stays before what it streams
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY)
    except OSError as e:
        raise UsageError(f"cannot write '{target}': {e.strerror or e}.", file=str(target)) from e
    with os.fdopen(fd, mode) as f:
        yield f


def make_parents(target: Path) -> list[Path]:
    """Create `target`'s missing parent directories; returns those it made, outermost first, so
    a failed run can remove them again (`remove_made`) and leave the tree as it found it."""
    missing = []
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    made: list[Path] = []
    try:
        for d in reversed(missing):
            d.mkdir()
            made.append(d)
    except FileExistsError:
        pass  # made meanwhile by someone else: not ours to remove
    except OSError:
        remove_made(made)
        raise
    return made


def remove_made(made: list[Path]) -> None:
    """Remove the directories `make_parents` made, innermost first, where they are still empty."""
    for d in reversed(made):
        with contextlib.suppress(OSError):
            d.rmdir()


class Outputs:
    """Files staged beside their targets; `commit` renames them all, `discard` removes them.

    Used as a context manager, anything still staged when the block ends (an exception, or no
    commit) is discarded.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Target]] = []
        self._made: list[Path] = []

    def staged_path(self, path: str | os.PathLike[str]) -> Path:
        """A new temporary file beside `path`, with the same suffix (writers that pick the format
        from the name still see it), to be renamed to `path` on commit.

        Raises `UsageError` when `path` cannot be written (its directory is missing and cannot be
        made, it is a directory, no permission).
        """
        where = output_target(path)
        target = where.path
        try:
            if where.stream:  # staged in the temporary directory, copied through on commit
                fd, tmp = tempfile.mkstemp(prefix="fedeval.", suffix=f".tmp{target.suffix}")
            else:
                self._made += make_parents(target)
                fd, tmp = tempfile.mkstemp(
                    prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=target.parent
                )
            os.close(fd)
        except OSError as e:
            raise UsageError(f"cannot write '{path}': {e.strerror or e}.", file=str(path)) from e
        self._staged.append((Path(tmp), where))
        return Path(tmp)

    def stage_text(self, path: str | os.PathLike[str], text: str) -> None:
        self.stage_bytes(path, text.encode("utf-8"))

    def stage_bytes(self, path: str | os.PathLike[str], data: bytes) -> None:
        tmp = self.staged_path(path)
        try:
            tmp.write_bytes(data)
        except OSError as e:
            raise UsageError(f"cannot write '{path}': {e.strerror or e}.", file=str(path)) from e

    @property
    def paths(self) -> list[Path]:
        """The targets staged so far."""
        return [where.path for _, where in self._staged]

    def commit(self) -> None:
        """Rename every staged file into place (each rename is atomic); a device or pipe gets
        the staged bytes written through instead."""
        umask = os.umask(0)
        os.umask(umask)
        while self._staged:
            tmp, where = self._staged[0]
            target = where.path
            try:
                if where.stream:
                    with open(tmp, "rb") as src, open_stream(target) as sink:
                        shutil.copyfileobj(src, sink)
                    os.unlink(tmp)
                else:
                    with contextlib.suppress(OSError):
                        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600: an ordinary file
                    os.replace(tmp, target)
                self._staged.pop(0)
            except OSError as e:
                self.discard()
                raise UsageError(
                    f"cannot write '{target}': {e.strerror or e}.", file=str(target)
                ) from e
        self._made.clear()  # they hold the outputs now

    def discard(self) -> None:
        """Remove every staged file, and the directories staging made for them."""
        while self._staged:
            tmp, _ = self._staged.pop()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        remove_made(self._made)
        self._made.clear()

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def plot_target(path: str, default_name: str) -> Path:
    """Where `--plot PATH` draws: PATH itself (its extension picks the format), or
    PATH/`default_name` when PATH ends in '/' or is an existing directory."""
    if path.endswith(("/", os.sep)) or Path(path).is_dir():
        return Path(path) / default_name
    return Path(path)


COMPRESSION = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2"}
"""Output suffix → the codec a CSV output is compressed with."""


def compression_of(path: str | os.PathLike[str] | None) -> str | None:
    """The codec `path`'s extension asks for (CSV outputs), or None."""
    if path is None or is_stdout(path):
        return None
    return COMPRESSION.get(Path(path).suffix.lower())


@contextlib.contextmanager
def compressed(sink: IO[bytes], codec: str | None) -> Iterator[IO[bytes]]:
    """`sink`, or a stream compressing into it with `codec` (closed, so flushed, at the end)."""
    if codec is None:
        yield sink
        return
    import pyarrow as pa

    stream = pa.CompressedOutputStream(pa.PythonFile(sink, mode="w"), codec)
    try:
        yield stream
    finally:
        stream.close()
