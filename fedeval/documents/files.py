"""Versioned JSON documents on disk: written atomically, read defensively.

Every fedeval file format names itself in a `schema` field `fedeval.<kind>/<version>`. A reader
refuses another document type, a version it does not know, and a newer version (rather than
guess what it means), with one message that names the file and says what to do.

Every document is sealed when written (`fedeval.documents.seals.seal`: a SHA-256 digest of its
canonical content, and an Ed25519 signature when a signing key is given) and its seal is verified
when read, before any field is used.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any

from fedeval.core.errors import InputError, ReleaseError
from fedeval.tables.sniff import SNIFF_BYTES, binary_kind, not_text

# `fedeval.documents.seals` (cryptography) and `fedeval.tables.write` (pyarrow) load inside the
# functions that use them: the CLI imports this module to register its commands, and its
# `--version`, `--help` and shell completion must not pay for either.

MAX_DOCUMENT_BYTES = 256 << 20
"""Largest document read (a release of a height-20 hierarchy is about 60 MB)."""
MAX_DEPTH = 32
"""Deepest nesting a fedeval document may have (they use at most 6 levels)."""


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


STDIN = "-"


def read_json(path: str | os.PathLike[str], *, noun: str, kind: str, streams: bool = False) -> Any:
    """The JSON value in the file at `path`, read defensively: a regular file of at most
    `MAX_DOCUMENT_BYTES`, UTF-8, strict JSON (no NaN or Infinity), nested at most `MAX_DEPTH`
    deep. Every failure is one `InputError` naming the file.

    With `streams`, `path` may also be '-' (stdin) or a pipe (`<(…)`, a FIFO): read once, to
    its end (at most `MAX_DOCUMENT_BYTES`), then checked as a file is.
    Binary data (gzip, Parquet, … by its magic bytes) is named as such, with what to do."""
    stdin = str(path) == STDIN
    name = "<stdin>" if stdin and streams else str(path)
    if stdin and streams:
        raw = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
    else:
        raw = _read_file(path, name, noun, kind, streams)
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise InputError(f"'{name}' is too large to be {kind}.", file=name)
    binary = binary_kind(raw[:SNIFF_BYTES])
    if binary is not None:
        raise not_text(name, binary, expected="JSON", stdin=stdin and streams)
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as e:
        raise InputError(
            f"'{name}' is not {kind}: it is not UTF-8 text ({e}).", file=name
        ) from None
    except RecursionError:
        raise InputError(
            f"'{name}' is not {kind}: it is nested more than {MAX_DEPTH} levels deep.", file=name
        ) from None
    except ValueError as e:  # JSONDecodeError, NaN, an integer of more than 4300 digits
        msg = " ".join(str(e).split())
        raise InputError(
            f"'{name}' is not {kind}: it is not valid JSON ({msg}).", file=name
        ) from None
    if _depth(value) > MAX_DEPTH:
        raise InputError(
            f"'{name}' is not {kind}: it is nested more than {MAX_DEPTH} levels deep.", file=name
        )
    return value


def _read_file(
    path: str | os.PathLike[str], name: str, noun: str, kind: str, streams: bool
) -> bytes:
    """The bytes of `path` (at most one more than `MAX_DOCUMENT_BYTES`): a regular file, or
    with `streams` a pipe, read to its end."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"cannot read {noun} '{name}': no such file.", file=name) from None
    except OSError as e:
        raise InputError(f"cannot read {noun} '{name}': {e.strerror or e}.", file=name) from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"cannot read {noun} '{name}': it is a directory.", file=name)
    # A pipe ends when its writer closes it; a device such as /dev/zero never does.
    if not stat.S_ISREG(info.st_mode) and not (streams and stat.S_ISFIFO(info.st_mode)):
        raise InputError(
            f"cannot read {noun} '{name}': not a regular file (a FIFO, device or socket).",
            file=name,
        )
    if info.st_size > MAX_DOCUMENT_BYTES:
        raise InputError(
            f"'{name}' is too large to be {kind}: {info.st_size:,} bytes, at most "
            f"{MAX_DOCUMENT_BYTES:,}.",
            file=name,
        )
    try:
        with open(path, "rb") as f:
            return f.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as e:
        raise InputError(f"cannot read {noun} '{name}': {e.strerror or e}.", file=name) from None


def document_text(doc: dict[str, Any], *, sign_key: Any = None) -> str:
    """The sealed document as the JSON text fedeval writes (indented, one final newline);
    signed with `sign_key` (an Ed25519 private key) if given."""

    bad = _non_finite(doc)
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ReleaseError(
            f"this release is too noisy to estimate {shown} (not a finite number), so no "
            "document can be written; use more examples or a larger ε."
        )
    from fedeval.documents.seals import seal

    return json.dumps(seal(doc, sign_key=sign_key), indent=2, allow_nan=False) + "\n"


def _non_finite(value: Any) -> list[str]:
    """Paths (e.g. 'data.examples_estimate') of the NaN or infinite numbers in a document."""
    import math

    found: list[str] = []
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            found.append(path or "the value")
        elif isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return sorted(found)


def write_document(
    doc: dict[str, Any], path: str | os.PathLike[str], *, sign_key: Any = None
) -> None:
    """Seal (and sign, with `sign_key`) a JSON document and write it atomically (temp file, then
    rename)."""

    from fedeval.tables.write import atomic_output

    text = document_text(doc, sign_key=sign_key)
    with atomic_output(path) as f:
        f.write(text)


def load_document(
    path: str | os.PathLike[str],
    *,
    prefix: str,
    version: int,
    noun: str,
    kind: str,
    hint: str,
    verify_key: Any = None,
    require_integrity: bool = True,
    integrity_since: int = 1,
    value: Any = None,
) -> dict[str, Any]:
    """The document at `path` if its schema is `prefix` + a version ≤ `version` and its seal
    holds.

    `noun` names the file in "cannot read {noun}", `kind` ("a calibration map") says what it
    should be, `hint` how to make one.

    The seal (`fedeval.documents.seals.verify`) is checked whenever the document has one. It is
    required when `require_integrity` is true and the document's version is ≥
    `integrity_since` (so a reader can still accept the unsealed documents of a version written
    before seals: pass the first sealed version). `verify_key` (an Ed25519 public key) requires
    a valid signature by that key, whatever the version.

    `value` is the JSON value of `path` already read (`read_json`), so that a document from a
    pipe is read once and checked here like any other.
    """
    name = "<stdin>" if str(path) == STDIN and value is not None else str(path)
    doc = read_json(path, noun=noun, kind=kind) if value is None else value
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        raise InputError(f"'{name}' is not {kind}: it has no 'schema' field. {hint}")
    schema = doc["schema"]
    if not schema.startswith(prefix):
        raise InputError(f"'{name}' is a '{schema}' document, not {kind}. {hint}")
    found = schema.removeprefix(prefix)
    if not found.isdigit() or int(found) < 1:
        raise InputError(f"'{name}': unknown schema version '{schema}'.")
    if int(found) > version:
        raise InputError(
            f"'{name}' was written by a newer fedeval (schema '{schema}'); this version reads "
            f"'{prefix}{version}'. Upgrade fedeval to use it."
        )

    required = require_integrity and int(found) >= integrity_since
    from fedeval.documents.seals import verify

    verify(doc, name, verify_key=verify_key, required=required)
    return doc
