"""Versioned JSON documents on disk: written atomically, read defensively.

Every fedeval file format names itself in a `schema` field `fedeval.<kind>/<version>`. A reader
refuses another document type, a version it does not know, and a newer version (rather than
guess what it means), with one message that names the file and says what to do.
"""

from __future__ import annotations

import json
import os
from typing import Any

from fedeval.errors import InputError


def write_document(doc: dict[str, Any], path: str | os.PathLike) -> None:
    """Write a JSON document atomically (temp file, then rename)."""
    from fedeval.io import atomic_output

    with atomic_output(path) as f:
        f.write(json.dumps(doc, indent=2, allow_nan=False) + "\n")


def load_document(
    path: str | os.PathLike, *, prefix: str, version: int, noun: str, kind: str, hint: str
) -> dict[str, Any]:
    """The document at `path` if its schema is `prefix` + a version ≤ `version`.

    `noun` names the file in "cannot read {noun}", `kind` ("a calibration map") says what it
    should be, `hint` how to make one.
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
    return doc
