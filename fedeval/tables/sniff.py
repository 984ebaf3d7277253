"""What a byte stream that should be text is instead, from its first bytes (its magic number).

Read as text, a gzip or Parquet stream fails with "not UTF-8 text", which names neither the
cause nor the fix. A reader that expected CSV or JSON calls `binary_kind` on the first bytes it
read, and `not_text` makes the one message that says what the bytes are and what to do.
"""

from __future__ import annotations

from fedeval.core.errors import InputError

MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
    (b"PAR1", "Parquet"),
    (b"ARROW1", "Arrow IPC"),
)
"""Leading bytes of the binary formats people pipe by mistake, and their names."""
SNIFF_BYTES = max(len(m) for m, _ in MAGIC)
"""Bytes `binary_kind` needs to tell every format apart."""

_DECOMPRESS = {"gzip": "zcat", "bzip2": "bzcat", "zstd": "zstdcat", "xz": "xzcat"}
_SUFFIX = {"gzip": ".gz", "bzip2": ".bz2", "zstd": ".zst"}


def binary_kind(head: bytes) -> str | None:
    """The binary format `head` (a stream's first bytes) begins with, or None.

    >>> binary_kind(b"\\x1f\\x8b\\x08\\x00")
    'gzip'
    >>> binary_kind(b"score,label") is None
    True
    """
    for magic, kind in MAGIC:
        if head.startswith(magic):
            return kind
    return None


def not_text(name: str, kind: str, *, expected: str, stdin: bool) -> InputError:
    """The error for `kind` data where `expected` text ("CSV", "a calibration map") was read
    from `name`: what it is, and what to do instead."""
    what = f"'{name}' holds {kind} data, not {expected} text"
    if kind == "Parquet":
        fix = (
            "Parquet cannot be read from a pipe (its index is at the end of the file): give "
            "its file name instead."
            if stdin
            else "name it with a .parquet suffix."
        )
    elif kind in _DECOMPRESS:
        if stdin:
            fix = (
                f"decompress it first ({_DECOMPRESS[kind]} FILE | fedeval …), or give the "
                f"file name (fedeval reads .csv{_SUFFIX.get(kind, '')} files itself)."
                if expected == "CSV"
                else f"decompress it first ({_DECOMPRESS[kind]} FILE | fedeval …)."
            )
        elif expected == "CSV" and kind in _SUFFIX:
            fix = f"name it with a .csv{_SUFFIX[kind]} suffix, so it is decompressed as read."
        else:
            fix = f"decompress it first ({_DECOMPRESS[kind]} FILE)."
    else:
        fix = f"extract or convert it to {expected} first."
    return InputError(f"{what}: {fix}", file=None if stdin else name)
