"""The seal every fedeval document and ledger line carries, made and checked in one place.

A seal is the field ``integrity``::

    {"sha256": "<hex>", "signature": "<hex>", "public_key": "<hex>"}

``sha256`` is the digest of `canonical_bytes` (the object without its seal as sorted, compact
JSON); ``signature`` and ``public_key``, present only with a signing key, are an Ed25519
signature (RFC 8032) over the same bytes and the raw 32-byte public key it verifies under.
What a seal proves, and what it does not, is said in `fedeval.documents.seals` (documents) and
`fedeval.privacy.ledger_file` (the ledger's hash chain); each words its own refusals from the
`SealBroken.kind` raised here. The layer is the lowest so that both can stand on it.

`cryptography` loads its OpenSSL bindings on import (~50 ms): it is imported where a key is
used or checked, so sealing an unsigned document (SHA-256 only) does not pay it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

FIELD = "integrity"
"""The name of the seal's field in every document and ledger line."""

_HEX = frozenset("0123456789abcdef")
_SCALARS = frozenset({str, int, float, bool, type(None)})

Fault = Literal[
    "digest-malformed",
    "uncanonical",
    "digest-mismatch",
    "unsigned",
    "signature-malformed",
    "other-key",
    "bad-signature",
]
"""Why a seal does not hold, in the order `check` tries them."""


class SealBroken(Exception):
    """A seal that does not hold: `kind` says which check failed; `detail` the canonicalisation
    error (for ``uncanonical``); `signer` the embedded public key once it is read."""

    def __init__(
        self, kind: Fault, detail: str = "", signer: Ed25519PublicKey | None = None
    ) -> None:
        super().__init__(kind)
        self.kind: Fault = kind
        self.detail = detail
        self.signer = signer


def canonical_bytes(doc: dict[str, Any]) -> bytes:
    """The document without its ``integrity`` field as canonical JSON, UTF-8.

    Sorted keys, no whitespace (``separators=(",", ":")``), non-ASCII characters as themselves,
    no NaN or Infinity (`ValueError`). Numbers are written as Python's `json` writes them: ints
    exactly, floats by their shortest round-tripping repr, so a document written by fedeval and
    read back with `json.load` gives the same bytes. Keys must be strings (JSON turns other keys
    into strings, which would sort differently once read back): `TypeError` otherwise.
    """
    body = {k: v for k, v in doc.items() if k != FIELD}
    _check_keys(body)
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _check_keys(obj: Any) -> None:
    """Refuse dict keys that are not strings, anywhere in the document."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    raise TypeError(f"document keys must be strings; found {k!r}")
                if isinstance(v, dict | list | tuple):
                    stack.append(v)
        elif isinstance(item, list | tuple) and not set(map(type, item)) <= _SCALARS:
            # (the type scan runs in C: a release's millions of counts cost little)
            stack.extend(v for v in item if isinstance(v, dict | list | tuple))


def raw_public(key: Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of an Ed25519 public key."""
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def is_private_key(key: object) -> TypeGuard[Ed25519PrivateKey]:
    """Whether `key` is an Ed25519 private key (what fedeval keygen makes)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return isinstance(key, Ed25519PrivateKey)


def make_seal(doc: dict[str, Any], sign_key: Ed25519PrivateKey | None) -> dict[str, str]:
    """The seal of `doc`: the SHA-256 of its canonical bytes, and with `sign_key` (checked by
    the caller with `is_private_key`) the signature over them and the signer's raw public key."""
    data = canonical_bytes(doc)
    seal: dict[str, str] = {"sha256": hashlib.sha256(data).hexdigest()}
    if sign_key is not None:
        seal["signature"] = sign_key.sign(data).hex()
        seal["public_key"] = raw_public(sign_key.public_key()).hex()
    return seal


def _is_hex(value: object, n_bytes: int) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) == 2 * n_bytes and set(value) <= _HEX


def check(doc: dict[str, Any], verify_key: Ed25519PublicKey | None) -> Ed25519PublicKey | None:
    """Check the seal of `doc` (which has an ``integrity`` field); return the key that signed it
    (None for an unsigned seal, accepted only without `verify_key`).

    The digest must be well formed and equal the SHA-256 of the canonical content; a signature
    and public key, when either is present, must both be well formed; with `verify_key` the
    document must be signed by that key; the signature must verify. Raises `SealBroken` naming
    the first check that fails.
    """
    seal = doc.get(FIELD)
    sha = seal.get("sha256") if isinstance(seal, dict) else None
    if not isinstance(seal, dict) or not _is_hex(sha, 32):
        raise SealBroken("digest-malformed")
    try:
        data = canonical_bytes(doc)
    except (TypeError, ValueError) as e:
        raise SealBroken("uncanonical", str(e)) from None
    if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), sha):
        raise SealBroken("digest-mismatch")
    signature, embedded = seal.get("signature"), seal.get("public_key")
    if signature is None and embedded is None:
        if verify_key is not None:
            raise SealBroken("unsigned")
        return None
    if not (_is_hex(signature, 64) and _is_hex(embedded, 32)):
        raise SealBroken("signature-malformed")
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    signer = Ed25519PublicKey.from_public_bytes(bytes.fromhex(embedded))
    if verify_key is not None and raw_public(signer) != raw_public(verify_key):
        raise SealBroken("other-key", signer=signer)
    try:
        (verify_key or signer).verify(bytes.fromhex(signature), data)
    except InvalidSignature:
        raise SealBroken("bad-signature", signer=signer) from None
    return signer
