"""Seals on fedeval documents: a SHA-256 digest of the canonical content, optionally signed.

Every report manifest, aggregate and calibration map fedeval writes carries an ``integrity``
field::

    "integrity": {"sha256": "<hex>", "signature": "<hex>", "public_key": "<hex>"}

``sha256`` is the digest of `canonical_bytes` (the document without its ``integrity`` field as
sorted, compact JSON); ``signature`` and ``public_key`` appear only when the writer was given a
signing key: an Ed25519 signature (RFC 8032) over the same canonical bytes and the raw 32-byte
public key it verifies under.

What each proves:

- The bare digest detects accidental corruption and naive edits (a count changed by hand, ε
  rewritten in a manifest): the content no longer matches the digest. It proves nothing about
  who wrote the file: anyone who edits it can recompute the digest, since there is no secret in
  it.
- A signature proves who made the document, provided the reader checks it against a public key
  it trusts (``--verify-key NAME.pub``, obtained from the producer over a channel the reader
  trusts). Without that key a reader can only check that the signature matches the key embedded
  in the file, which catches edits to a signed file but not a forger who re-signs with a key of
  their own.

Ed25519 (Bernstein et al.; RFC 8032, "Edwards-Curve Digital Signature Algorithm") via the
`cryptography` package. Key files are PEM: PKCS#8 private keys (unencrypted, mode 0600) and
SubjectPublicKeyInfo public keys, as `fedeval keygen` writes them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedeval.core.errors import InputError, UsageError
from fedeval.core.sealing import (
    FIELD,
    Fault,
    SealBroken,
    canonical_bytes,
    check,
    is_private_key,
    make_seal,
    raw_public,
)

# cryptography loads its OpenSSL bindings on import (~50 ms): it is imported where a key is
# made, read, used or checked, so sealing an unsigned document (SHA-256 only) does not pay it.
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

_MESSAGES: dict[Fault, str] = {
    "digest-malformed": "integrity check failed: its '{field}' field is malformed (it must "
    "hold the 64 hex digits of a SHA-256 digest).",
    "uncanonical": "integrity check failed: its content cannot be canonicalised ({detail}).",
    "digest-mismatch": "integrity check failed: the SHA-256 of its content does not match (the "
    "file was edited after it was written).",
    "unsigned": "signature check failed: it is not signed, and --verify-key requires a "
    "signature by key {expected}.",
    "signature-malformed": "signature check failed: its '{field}' field is malformed (a "
    "signature needs 128 hex digits and its public key 64).",
    "other-key": "signature check failed: it is signed by another key ({signer}, expected "
    "{expected}).",
    "bad-signature": "signature check failed: the signature does not match its content (key "
    "{signer}); the file was edited or the signature forged.",
}
"""How `verify` words each way a document's seal fails (`fedeval.core.sealing.check`)."""


def digest(doc: dict[str, Any]) -> str:
    """Hex SHA-256 of `canonical_bytes(doc)`."""
    return hashlib.sha256(canonical_bytes(doc)).hexdigest()


def seal(doc: dict[str, Any], *, sign_key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """A copy of `doc` with its ``integrity`` field (any previous one replaced, last key).

    With `sign_key` the seal also holds the Ed25519 signature over the canonical bytes and the
    raw public key of `sign_key`.
    """
    if sign_key is not None and not is_private_key(sign_key):
        raise UsageError("a document is signed with an Ed25519 private key (fedeval keygen).")
    integrity = make_seal(doc, sign_key)
    out = {k: v for k, v in doc.items() if k != FIELD}
    out[FIELD] = integrity
    return out


def verify(
    doc: dict[str, Any],
    name: str,
    *,
    verify_key: Ed25519PublicKey | None = None,
    required: bool = True,
) -> None:
    """Check the seal of `doc` (read from the file `name`); `InputError` names the failed check.

    - No ``integrity`` field: refused when `required` or a `verify_key` is given, else accepted
      (documents of a version written before seals existed).
    - The SHA-256 of the canonical content must equal the stored one (an edited file fails).
    - With `verify_key`: the document must be signed, by that key, with a valid signature.
    - A signature but no `verify_key`: the signature is checked against the public key embedded
      in the document, and accepted if it matches. This catches edits to a signed file, but the
      embedded key is not trusted, only consistent: anyone can re-sign an edited document with a
      key of their own. Pass `verify_key` to know who made it.
    """
    if doc.get(FIELD) is None:
        if verify_key is not None:
            raise InputError(
                f"'{name}': signature check failed: it is not signed (no '{FIELD}' field), and "
                "--verify-key requires a signature by that key."
            )
        if required:
            raise InputError(
                f"'{name}': integrity check failed: it has no '{FIELD}' field (fedeval seals "
                "every document it writes; the seal was removed or the file was made by hand)."
            )
        return
    try:
        check(doc, verify_key)
    except SealBroken as e:
        message = _MESSAGES[e.kind].format(
            field=FIELD,
            detail=e.detail,
            signer=fingerprint(e.signer) if e.signer is not None else "",
            expected=fingerprint(verify_key) if verify_key is not None else "",
        )
        raise InputError(f"'{name}': {message}") from None


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """The first 16 hex digits of the SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(raw_public(public_key)).hexdigest()[:16]


def generate_keypair(
    private_path: str | os.PathLike[str], public_path: str | os.PathLike[str]
) -> Ed25519PublicKey:
    """Make a new Ed25519 key pair: PKCS#8 PEM private key (unencrypted, mode 0600) at
    `private_path`, PEM public key at `public_path`. Each file is written atomically and never
    over an existing file (`UsageError`). Returns the public key."""
    private_path, public_path = Path(private_path), Path(public_path)
    if private_path.resolve() == public_path.resolve():
        raise UsageError(
            f"the private and public key files must differ; both are '{private_path}'."
        )
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise UsageError(
                f"'{path}' already exists; fedeval keygen never overwrites a key. Choose another "
                "name or remove it first."
            )
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write_new(private_path, private_pem, 0o600)
    try:
        _write_new(public_path, public_pem, 0o644)
    except BaseException:
        with contextlib.suppress(OSError):
            private_path.unlink()
        raise
    return key.public_key()


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to a temp file beside `path` with `mode` (less the umask), then link it into
    place: atomic, and `UsageError` rather than replace a file that exists by then."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}.") from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, mode & ~umask)
        try:
            os.link(tmp, path)  # atomic, and fails rather than replace an existing file
        except FileExistsError:
            raise UsageError(
                f"'{path}' already exists; fedeval keygen never overwrites a key."
            ) from None
        except OSError as e:
            raise UsageError(f"cannot write '{path}': {e.strerror or e}.") from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _read_pem(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise InputError(f"cannot read {what} '{path}': no such file.") from None
    except IsADirectoryError:
        raise InputError(f"cannot read {what} '{path}': it is a directory.") from None
    except OSError as e:
        raise InputError(f"cannot read {what} '{path}': {e.strerror or e}.") from None


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file at `path`; `InputError` names the file."""
    from cryptography.hazmat.primitives import serialization

    data = _read_pem(path, "signing key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise InputError(
            f"'{path}' is an encrypted private key; fedeval reads unencrypted PKCS#8 keys "
            "(fedeval keygen makes one)."
        ) from None
    except (ValueError, UnicodeDecodeError):
        public = b"PUBLIC" in data
        hint = " (it looks like a public key: sign with the .key file)" if public else ""
        raise InputError(
            f"'{path}' is not a PEM private key{hint}. Make a key pair with `fedeval keygen -o "
            "NAME`."
        ) from None
    if not is_private_key(key):
        raise InputError(
            f"'{path}' is a {type(key).__name__.removeprefix('_')}, not an Ed25519 private key. "
            "Make one with `fedeval keygen -o NAME`."
        )
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """The Ed25519 public key in the PEM file at `path`; `InputError` names the file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = _read_pem(path, "verify key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnicodeDecodeError):
        hint = (
            " (it looks like a private key: verify with the .pub file)"
            if b"PRIVATE" in data
            else ""
        )
        raise InputError(
            f"'{path}' is not a PEM public key{hint}. Make a key pair with `fedeval keygen -o "
            "NAME`."
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(
            f"'{path}' is a {type(key).__name__.removeprefix('_')}, not an Ed25519 public key. "
            "Make one with `fedeval keygen -o NAME`."
        )
    return key
