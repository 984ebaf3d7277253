"""The privacy ledger's file (`fedeval.privacy.ledger`): its JSON lines read defensively,
locked while a line is appended, and sealed into a hash chain, line by line.

Every line of a ledger (the header with the budget first, then one line per release) is a JSON
object with two fields besides its content: ``prev``, the SHA-256 of the line before it (64
zeros for the header), and ``integrity``, the seal of `fedeval.core.sealing` that documents
carry too (the SHA-256 of the line's canonical content, ``prev`` included, and with a signing
key an Ed25519 signature over it). So each line's digest covers every line before it:

- editing any line (raising the budget in the header, lowering an ε) breaks that line's seal;
- re-sealing the edited line breaks the next line's ``prev``; removing or reordering a line
  breaks the ``prev`` of the line after it;
- re-sealing every line from the edit on defeats an unsigned chain: there is no secret in a
  SHA-256. A signed ledger (every line signed by the key that signed its header) cannot be
  rewritten without that private key, and a reader that names the public key it trusts
  (``--verify-key``) refuses a ledger signed by any other;
- removing the last lines leaves a shorter chain that is valid. The chain's head (the last
  line's digest, which ``fedeval ledger`` prints) kept elsewhere shows it: a ledger whose chain
  no longer passes through a head recorded earlier was truncated.

Bookkeeping, not enforcement: whoever can write the file can also delete it and start again.
What the chain gives is that a ledger it verifies is the ledger its writer (its key holder)
appended to, in order, with the budget it was created with.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fedeval.core.errors import InputError, UsageError
from fedeval.core.sealing import (
    FIELD,
    Fault,
    SealBroken,
    check,
    is_private_key,
    make_seal,
    raw_public,
)

GENESIS = "0" * 64
"""The ``prev`` of a ledger's first line (its header)."""
PREV = "prev"


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of every non-blank line of the file at `path`; `InputError`
    names the file and line of anything that is not JSON (NaN and Infinity included)."""
    if not path.is_file():
        raise InputError(
            f"cannot read ledger '{path}': not a regular file (a directory, FIFO or device).",
            file=str(path),
        )
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except OSError as e:
        raise InputError(f"cannot read ledger '{path}': {e.strerror or e}.") from None
    except UnicodeDecodeError as e:
        raise InputError(f"ledger '{path}' is not UTF-8 text ({e}).", file=str(path)) from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"ledger '{path}', line {i}"
        try:
            yield i, json.loads(line, parse_constant=_refuse_constant)
        except RecursionError:
            raise InputError(f"{where}: nested too deeply to be a ledger entry.") from None
        except ValueError as e:  # JSONDecodeError, NaN, an integer of 4300+ digits
            raise InputError(f"{where}: not valid JSON ({e}).") from None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the ledger's lock file (filelock, 60 s at most) while a line is appended."""
    try:
        from filelock import FileLock, Timeout
    except ImportError:
        raise UsageError(
            "the privacy ledger needs filelock: pip install filelock (or fedeval's 'accounting' "
            "extra)"
        ) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path) + ".lock", timeout=60)
        lock.acquire()
    except Timeout:
        raise UsageError(
            f"ledger '{path}' is locked by another run (for over 60 s); try again."
        ) from None
    except OSError as e:
        raise InputError(
            f"cannot lock ledger '{path}': {e.strerror or e}.", file=str(path)
        ) from None
    try:
        yield
    finally:
        lock.release()


def check_writable(path: str | os.PathLike[str]) -> None:
    """Refuse, before any work, a ledger that could not take a new entry."""
    path = Path(path)
    target = path if path.exists() else path.parent if str(path.parent) else Path(".")
    if path.exists() and not path.is_file():
        raise InputError(
            f"cannot use ledger '{path}': not a regular file (a directory, FIFO or device).",
            file=str(path),
        )
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(f"cannot write ledger '{path}': permission denied.", file=str(path))


def public_hex(sign_key: Any) -> str | None:
    """The hex raw public key of an Ed25519 private key (None for None)."""
    if sign_key is None:
        return None
    if not is_private_key(sign_key):
        raise UsageError("a ledger is signed with an Ed25519 private key (fedeval keygen).")
    return raw_public(sign_key.public_key()).hex()


def link(item: dict[str, Any], prev: str, *, sign_key: Any = None) -> dict[str, Any]:
    """`item` chained after the line whose digest is `prev`, sealed (and signed with
    `sign_key`, an Ed25519 private key)."""
    body = {k: v for k, v in item.items() if k not in (PREV, FIELD)}
    body[PREV] = prev
    public_hex(sign_key)  # refuses a key that is not an Ed25519 private key
    body[FIELD] = make_seal(body, sign_key)
    return body


_MESSAGES: dict[Fault, str] = {
    "digest-malformed": "its seal is malformed (no SHA-256 digest).",
    "uncanonical": "its content cannot be canonicalised ({detail}).",
    "digest-mismatch": "integrity check failed: the SHA-256 of the line does not match (it was "
    "edited after it was written).",
    "unsigned": "signature check failed: the line is not signed, and --verify-key requires a "
    "signature by that key.",
    "signature-malformed": "signature check failed: its seal is malformed.",
    "other-key": "signature check failed: the line is signed by another key than the one given.",
    "bad-signature": "signature check failed: the signature does not match the line (edited, "
    "or the signature forged).",
}
"""How a ledger words each way a line's seal fails (`fedeval.core.sealing.check`)."""


def _verify(item: dict[str, Any], where: str, verify_key: Any) -> None:
    """The line's seal holds (and its signature, by `verify_key` if given)."""
    try:
        check(item, verify_key)
    except SealBroken as e:
        raise InputError(f"ledger {where}: " + _MESSAGES[e.kind].format(detail=e.detail)) from None


def head(item: dict[str, Any]) -> str:
    """The digest of a sealed line: what the next line's ``prev`` must be."""
    return str(item[FIELD]["sha256"])


def signer(item: dict[str, Any]) -> str | None:
    """The hex public key a sealed line is signed by, or None for an unsigned line."""
    seal_ = item.get(FIELD)
    return seal_.get("public_key") if isinstance(seal_, dict) else None


def check_signer(path: Path, key: str | None, sign_key: Any, new: bool) -> None:
    """A signed ledger takes lines signed by its own key only; an unsigned one stays so."""
    if new:
        return
    mine = public_hex(sign_key)
    if key is not None and mine != key:
        raise UsageError(
            f"ledger '{path}' is signed (key {key[:16]}…): every line must be signed by that "
            "key; give its private key with --sign-key."
        )
    if key is None and mine is not None:
        raise UsageError(
            f"ledger '{path}' is not signed and stays so (a chain signed from its middle on "
            "would prove nothing about its start): drop --sign-key, or start a new ledger."
        )


def check_chain(items: Sequence[dict[str, Any]], name: str, *, verify_key: Any = None) -> str:
    """Verify a ledger's lines as a chain and return its head (GENESIS for no line).

    Each line's seal must hold; each line's ``prev`` must be the digest of the line before it;
    every line must be signed by the key that signed the first (or none be signed); with
    `verify_key`, that key. Raises `InputError` naming the first line (1-based) that fails."""
    prev = GENESIS
    key: str | None = None
    for i, item in enumerate(items, 1):
        where = f"{name}, line {i}"
        if FIELD not in item or PREV not in item:
            raise InputError(
                f"ledger {where}: the line is not sealed into the ledger's hash chain (no "
                f"'{PREV}' or '{FIELD}'): it was added or rewritten by hand."
            )
        _verify(item, where, verify_key)
        found = item.get(PREV)
        if not isinstance(found, str) or not hmac.compare_digest(found, prev):
            raise InputError(
                f"ledger {where}: the hash chain is broken (the line does not follow the one "
                "before it): a line before it was edited, removed or reordered."
            )
        if i == 1:
            key = signer(item)
        elif signer(item) != key:
            raise InputError(
                f"ledger {where}: signed "
                + ("by another key than" if key and signer(item) else "unlike")
                + " the ledger's header: every line of a signed ledger is signed by its key."
            )
        prev = head(item)
    return prev
