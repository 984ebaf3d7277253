"""Seals on documents: canonical bytes, SHA-256 digests, Ed25519 signatures and key files."""

from __future__ import annotations

import json
import os
import stat

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedeval.core.errors import InputError, UsageError
from fedeval.documents.files import document_text, load_document, write_document
from fedeval.documents.seals import (
    canonical_bytes,
    fingerprint,
    generate_keypair,
    load_private_key,
    load_public_key,
    seal,
    verify,
)

DOC = {
    "schema": "fedeval.test/2",
    "epsilon": 0.1,
    "tiny": 1e-300,
    "huge": 1.7976931348623157e308,
    "third": 1 / 3,
    "negative_zero": -0.0,
    "big": 2**80,
    "negative": -(2**63),
    "counts": [0, 1, 2, 3, -4],
    "nested": {"b": [1.5, {"z": None, "a": True}], "a": "ε — non-ASCII ✓"},
    "empty": {},
}


def load(path, **kw):
    return load_document(
        path, prefix="fedeval.test/", version=2, noun="test", kind="a test", hint="", **kw
    )


def edited(path, change) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


def test_canonical_bytes_are_sorted_compact_utf8_without_the_seal():
    data = canonical_bytes({"b": 1, "a": [1.0, "é"], "integrity": {"sha256": "x"}})
    assert data == '{"a":[1.0,"é"],"b":1}'.encode()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_canonical_bytes_refuse_nan_and_infinity(value):
    with pytest.raises(ValueError):
        canonical_bytes({"x": value})


def test_canonical_bytes_refuse_keys_that_are_not_strings():
    with pytest.raises(TypeError, match="strings"):
        canonical_bytes({"x": [{2: 1, 10: 2}]})


def test_written_then_read_document_recanonicalises_identically(tmp_path):
    sealed = seal(DOC)
    read_back = json.loads(document_text(DOC))
    assert canonical_bytes(read_back) == canonical_bytes(DOC) == canonical_bytes(sealed)
    assert read_back["tiny"] == 1e-300 and read_back["big"] == 2**80
    assert read_back["integrity"] == sealed["integrity"]
    # Key order and whitespace of the file do not matter, only the content.
    reordered = dict(reversed(list(read_back.items())))
    assert canonical_bytes(reordered) == canonical_bytes(DOC)
    write_document(DOC, tmp_path / "d.json")
    assert load(tmp_path / "d.json")["third"] == 1 / 3


def test_seal_is_last_and_replaces_a_previous_seal():
    sealed = seal(DOC)
    assert list(sealed)[-1] == "integrity" and set(sealed["integrity"]) == {"sha256"}
    assert seal(sealed) == sealed
    assert "integrity" not in DOC  # the input is not modified


def test_sealed_document_verifies_and_an_edited_one_names_the_file(tmp_path):
    path = tmp_path / "release.fedeval"
    write_document(DOC, path)
    load(path)

    edited(path, lambda d: d["counts"].__setitem__(2, 3))  # one number
    with pytest.raises(InputError) as info:
        load(path)
    msg = str(info.value)
    assert msg == (
        f"'{path}': integrity check failed: the SHA-256 of its content does not match (the file "
        "was edited after it was written)."
    )
    assert "\n" not in msg


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.__setitem__("epsilon", 0.2),
        lambda d: d["nested"].__setitem__("a", "other"),
        lambda d: d.__setitem__("extra", 1),
        lambda d: d.pop("empty"),
        lambda d: d.__setitem__("big", 2**80 + 1),
        lambda d: d.__setitem__("tiny", 1e-299),
    ],
)
def test_any_edit_breaks_the_digest(tmp_path, change):
    path = tmp_path / "d.json"
    write_document(DOC, path)
    edited(path, change)
    with pytest.raises(InputError, match="SHA-256 of its content does not match"):
        load(path)


def test_reformatting_the_file_keeps_the_digest(tmp_path):
    path = tmp_path / "d.json"
    write_document(DOC, path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(doc, ensure_ascii=True), encoding="utf-8")
    load(path)


def test_missing_or_malformed_seal(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(DOC))
    with pytest.raises(InputError, match=f"'{path}': integrity check failed: it has no"):
        load(path)
    load(path, require_integrity=False)
    assert load(path, integrity_since=3)["big"] == 2**80  # version 2 predates sealing here
    verify(DOC, "x", required=False)

    for bad in ("abc", {"sha256": "zz" * 32}, {"sha256": 5}, {}):
        path.write_text(json.dumps({**DOC, "integrity": bad}))
        with pytest.raises(InputError, match="'integrity' field is malformed"):
            load(path, require_integrity=False)  # a seal present is always checked


def test_nan_in_a_sealed_file_is_refused(tmp_path):
    path = tmp_path / "d.json"
    sealed = seal(DOC)
    path.write_text(json.dumps({**sealed, "epsilon": float("nan")}))
    # refused as it is read (NaN is not a JSON number), before the seal is even computed
    with pytest.raises(InputError, match="NaN is not a JSON number"):
        load(path)


def test_signed_document_verifies_with_its_key(tmp_path):
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "d.json"
    write_document(DOC, path, sign_key=key)
    integrity = json.loads(path.read_text())["integrity"]
    assert set(integrity) == {"sha256", "signature", "public_key"}
    assert len(integrity["signature"]) == 128 and len(integrity["public_key"]) == 64
    load(path, verify_key=key.public_key())
    load(path)  # no key: the embedded key is checked for consistency and accepted


def test_signature_by_another_key_is_refused_with_both_fingerprints(tmp_path):
    mine, theirs = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    path = tmp_path / "d.json"
    write_document(DOC, path, sign_key=theirs)
    with pytest.raises(InputError) as info:
        load(path, verify_key=mine.public_key())
    msg = str(info.value)
    assert msg.startswith(f"'{path}': signature check failed: it is signed by another key")
    assert fingerprint(theirs.public_key()) in msg and fingerprint(mine.public_key()) in msg


def test_unsigned_document_is_refused_when_a_verify_key_is_given(tmp_path):
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "d.json"
    write_document(DOC, path)
    with pytest.raises(InputError, match=f"'{path}': signature check failed: it is not signed"):
        load(path, verify_key=key.public_key())
    path.write_text(json.dumps(DOC))
    with pytest.raises(InputError, match="it is not signed"):
        load(path, verify_key=key.public_key(), require_integrity=False)


def test_edited_and_resealed_signed_document_fails_the_signature(tmp_path):
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "d.json"
    write_document(DOC, path, sign_key=key)
    forged = json.loads(path.read_text())
    forged["counts"][0] = 99
    signature = forged["integrity"]["signature"]
    forged = seal(forged)  # recompute the digest, keep the old signature
    forged["integrity"].update(
        signature=signature, public_key=key.public_key().public_bytes_raw().hex()
    )
    path.write_text(json.dumps(forged))
    for verify_key in (None, key.public_key()):
        with pytest.raises(InputError, match="signature does not match its content"):
            load(path, verify_key=verify_key)


def test_swapping_in_the_trusted_public_key_does_not_help_a_forger(tmp_path):
    trusted, forger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    path = tmp_path / "d.json"
    write_document(DOC, path, sign_key=forger)
    doc = json.loads(path.read_text())
    doc["integrity"]["public_key"] = trusted.public_key().public_bytes_raw().hex()
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="signature does not match"):
        load(path, verify_key=trusted.public_key())


def test_malformed_signature_fields(tmp_path):
    key = Ed25519PrivateKey.generate()
    sealed = seal(DOC, sign_key=key)
    for change in ({"signature": "ab"}, {"public_key": None}, {"signature": 7}):
        doc = {**sealed, "integrity": {**sealed["integrity"], **change}}
        with pytest.raises(InputError, match=r"'d': signature check failed: .* malformed"):
            verify(doc, "d")


def test_seal_refuses_a_key_that_is_not_ed25519():
    with pytest.raises(UsageError, match="Ed25519"):
        seal(DOC, sign_key=generate_private_key(SECP256R1()))


def test_keygen_writes_pem_files_with_private_mode_0600(tmp_path):
    private, public = tmp_path / "ci.key", tmp_path / "sub" / "ci.pub"
    key = generate_keypair(private, public)
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    sk, pk = load_private_key(private), load_public_key(public)
    assert fingerprint(sk.public_key()) == fingerprint(pk) == fingerprint(key)
    assert len(fingerprint(pk)) == 16 and int(fingerprint(pk), 16) >= 0
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["ci.key", "ci.pub", "sub"]

    path = tmp_path / "d.json"
    write_document(DOC, path, sign_key=sk)
    load(path, verify_key=pk)


@pytest.mark.parametrize("existing", ["key", "pub"])
def test_keygen_refuses_to_overwrite(tmp_path, existing):
    private, public = tmp_path / "k.key", tmp_path / "k.pub"
    (tmp_path / f"k.{existing}").write_text("precious")
    with pytest.raises(UsageError, match=f"'{tmp_path / ('k.' + existing)}' already exists"):
        generate_keypair(private, public)
    assert (tmp_path / f"k.{existing}").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"k.{existing}"]


def test_bad_key_files_raise_input_error_naming_the_file(tmp_path):
    generate_keypair(tmp_path / "k.key", tmp_path / "k.pub")
    missing = tmp_path / "nope.key"
    with pytest.raises(InputError, match=f"cannot read signing key '{missing}': no such file"):
        load_private_key(missing)
    with pytest.raises(InputError, match=r"cannot read verify key .* no such file"):
        load_public_key(missing)
    with pytest.raises(InputError, match="it is a directory"):
        load_public_key(tmp_path)

    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n")
    with pytest.raises(InputError, match=f"'{garbage}' is not a PEM private key"):
        load_private_key(garbage)
    garbage.write_bytes(b"\xff\xfe binary")
    with pytest.raises(InputError, match=f"'{garbage}' is not a PEM public key"):
        load_public_key(garbage)

    with pytest.raises(InputError, match="looks like a public key"):
        load_private_key(tmp_path / "k.pub")
    with pytest.raises(InputError, match="looks like a private key"):
        load_public_key(tmp_path / "k.key")

    ec = generate_private_key(SECP256R1())
    ec_key = tmp_path / "ec.key"
    ec_key.write_bytes(
        ec.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(InputError, match="not an Ed25519 private key"):
        load_private_key(ec_key)
    ec_pub = tmp_path / "ec.pub"
    ec_pub.write_bytes(
        ec.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(InputError, match="not an Ed25519 public key"):
        load_public_key(ec_pub)

    encrypted = tmp_path / "enc.key"
    encrypted.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    with pytest.raises(InputError, match="encrypted private key"):
        load_private_key(encrypted)
