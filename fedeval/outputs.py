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
import tempfile
from pathlib import Path
from typing import IO

from fedeval.errors import UsageError

STDOUT = "-"


def is_stdout(path: str | os.PathLike | None) -> bool:
    return path is not None and str(path) == STDOUT


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
        self._staged: list[tuple[Path, Path]] = []
        self._made: list[Path] = []

    def staged_path(self, path: str | os.PathLike) -> Path:
        """A new temporary file beside `path`, with the same suffix (writers that pick the format
        from the name still see it), to be renamed to `path` on commit.

        Raises `UsageError` when `path` cannot be written (its directory is missing and cannot be
        made, it is a directory, no permission).
        """
        target = Path(path)
        try:
            if target.is_dir():
                raise IsADirectoryError(21, "it is a directory")
            self._made += make_parents(target)
            fd, tmp = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=target.parent
            )
            os.close(fd)
        except OSError as e:
            raise UsageError(f"cannot write '{path}': {e.strerror or e}.", file=str(path)) from e
        self._staged.append((Path(tmp), target))
        return Path(tmp)

    def stage_text(self, path: str | os.PathLike, text: str) -> None:
        self.stage_bytes(path, text.encode("utf-8"))

    def stage_bytes(self, path: str | os.PathLike, data: bytes) -> None:
        tmp = self.staged_path(path)
        try:
            tmp.write_bytes(data)
        except OSError as e:
            raise UsageError(f"cannot write '{path}': {e.strerror or e}.", file=str(path)) from e

    @property
    def paths(self) -> list[Path]:
        """The targets staged so far."""
        return [target for _, target in self._staged]

    def commit(self) -> None:
        """Rename every staged file into place (each rename is atomic)."""
        umask = os.umask(0)
        os.umask(umask)
        while self._staged:
            tmp, target = self._staged.pop(0)
            with contextlib.suppress(OSError):
                os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; an output is an ordinary file
            try:
                os.replace(tmp, target)
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

    def __exit__(self, *exc) -> None:
        self.discard()


def plot_target(path: str, default_name: str) -> Path:
    """Where `--plot PATH` draws: PATH itself (its extension picks the format), or
    PATH/`default_name` when PATH ends in '/' or is an existing directory."""
    if path.endswith(("/", os.sep)) or Path(path).is_dir():
        return Path(path) / default_name
    return Path(path)


COMPRESSION = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2"}
"""Output suffix → the codec a CSV output is compressed with."""


def compression_of(path: str | os.PathLike | None) -> str | None:
    """The codec `path`'s extension asks for (CSV outputs), or None."""
    if path is None or is_stdout(path):
        return None
    return COMPRESSION.get(Path(path).suffix.lower())


@contextlib.contextmanager
def compressed(sink: IO[bytes], codec: str | None):
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
