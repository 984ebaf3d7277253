"""The installed package's version, read once from its metadata (pyproject.toml is the source)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("fedeval")
except PackageNotFoundError:  # a source tree run without installing: say so, don't guess
    __version__ = "0+unknown"
