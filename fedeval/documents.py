"""Versioned JSON documents on disk: written atomically, read defensively.

Every fedeval file format names itself in a `schema` field `fedeval.<kind>/<version>`. A reader
refuses another document type, a version it does not know, and a newer version (rather than
guess what it means), with one message that names the file and says what to do.

Every document is sealed when written (`fedeval.integrity.seal`: a SHA-256 digest of its
canonical content, and an Ed25519 signature when a signing key is given) and its seal is verified
when read, before any field is used.
"""

from __future__ import annotations

import json
import os
from typing import Any

from fedeval.errors import InputError


def document_text(doc: dict[str, Any], *, sign_key: Any = None) -> str:
    """The sealed document as the JSON text fedeval writes (indented, one final newline);
    signed with `sign_key` (an Ed25519 private key) if given."""
    from fedeval.integrity import seal

    return json.dumps(seal(doc, sign_key=sign_key), indent=2, allow_nan=False) + "\n"


def write_document(doc: dict[str, Any], path: str | os.PathLike, *, sign_key: Any = None) -> None:
    """Seal (and sign, with `sign_key`) a JSON document and write it atomically (temp file, then
    rename)."""
    from fedeval.io import atomic_output

    text = document_text(doc, sign_key=sign_key)
    with atomic_output(path) as f:
        f.write(text)


def load_document(
    path: str | os.PathLike,
    *,
    prefix: str,
    version: int,
    noun: str,
    kind: str,
    hint: str,
    verify_key: Any = None,
    require_integrity: bool = True,
    integrity_since: int = 1,
) -> dict[str, Any]:
    """The document at `path` if its schema is `prefix` + a version ≤ `version` and its seal
    holds.

    `noun` names the file in "cannot read {noun}", `kind` ("a calibration map") says what it
    should be, `hint` how to make one.

    The seal (`fedeval.integrity.verify`) is checked whenever the document has one. It is
    required when `require_integrity` is true and the document's version is ≥
    `integrity_since` (so a reader can still accept the unsealed documents of a version written
    before seals: pass the first sealed version). `verify_key` (an Ed25519 public key) requires
    a valid signature by that key, whatever the version.
    """
    name = str(path)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise InputError(f"cannot read {noun} '{name}': no such file.") from None
    except IsADirectoryError:
        raise InputError(f"cannot read {noun} '{name}': it is a directory.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"'{name}' is not {kind}: it is not valid JSON ({e}).") from e
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
    from fedeval.integrity import verify

    required = require_integrity and int(found) >= integrity_since
    verify(doc, name, verify_key=verify_key, required=required)
    return doc
