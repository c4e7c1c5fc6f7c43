"""`jigcmd verify --key` takes one Ed25519 public key in PEM, as `jigcmd key` prints it.

Anything else is status 2 saying what the file is and what to give instead: a private key
(it should not travel to verifiers), several keys (the library would read the first alone),
or a key in another encoding (raw, hex, DER, OpenSSH).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

PUBLIC_FORM = (
    "give an Ed25519 public key in PEM (SubjectPublicKeyInfo, `-----BEGIN PUBLIC KEY-----`), "
    "as `jigcmd key` prints it"
)
_KEY = Ed25519PrivateKey.generate()
_PUBLIC = _KEY.public_key()
_PEM = _PUBLIC.public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)
_RAW = _PUBLIC.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
_PRIVATE = _KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
)
_OTHER = Ed25519PrivateKey.generate().public_key()


_NOT_ONE_KEY = "a securesystemslib Ed25519 key, but not one key: keyval.public not 64 hex digits"


def _sslib(public: str) -> bytes:
    """A securesystemslib key dict whose `keyval.public` is `public`, as written."""
    key = {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": public}}
    return json.dumps(key).encode()


def _pem(public: object) -> bytes:
    assert hasattr(public, "public_bytes")
    encoded: bytes = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return encoded


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            _PRIVATE,
            "this is a private key; give its public half (`jigcmd key` prints it), and keep the "
            "private key on the signing host",
        ),
        (
            _PEM + _pem(_OTHER),
            "holds 2 PEM blocks, and one key verifies: give the one key that signed (its id is "
            "each signature's keyid)",
        ),
        (
            _RAW,
            "not PEM: 32 bytes of binary (an Ed25519 key's raw bytes), no -----BEGIN line; "
            + PUBLIC_FORM,
        ),
        (
            _RAW.hex().encode() + b"\n",
            "not PEM: 64 hex digits (an Ed25519 key's 32 raw bytes, in hex), no -----BEGIN "
            f"line; {PUBLIC_FORM}",
        ),
        (
            base64.b64encode(_RAW),
            "not PEM: base64 of 32 bytes (an Ed25519 key's raw bytes), no -----BEGIN line; "
            + PUBLIC_FORM,
        ),
        (
            _PUBLIC.public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            ),
            f"not PEM: an OpenSSH public key (ssh-ed25519 …), no -----BEGIN line; {PUBLIC_FORM}",
        ),
        (
            _PUBLIC.public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            "not PEM: binary DER (a SEQUENCE), no -----BEGIN line: `openssl pkey -pubin "
            f"-inform DER -in FILE` prints it as PEM; {PUBLIC_FORM}",
        ),
        (
            b"".join(_PEM.splitlines()[1:-1]),
            "not PEM: base64 of DER: a PEM block's body without its -----BEGIN and -----END "
            f"lines; {PUBLIC_FORM}",
        ),
        (b"\n", f"not PEM: the file is empty; {PUBLIC_FORM}"),
        # 64 characters with whitespace inside: `bytes.fromhex` skipped it, and the library's
        # "32 bytes long" was said of the bundle.
        *(
            (_sslib(public), f"{_NOT_ONE_KEY}; {PUBLIC_FORM}")
            for public in (
                f" {_RAW.hex()[:62]} ",
                f"{_RAW.hex()[:60]}\t\n\x0b\x0c",
                f"{_RAW.hex()[:28]}{' ' * 8}{_RAW.hex()[28:56]}",
            )
        ),
    ],
    ids=[
        "private",
        "two keys",
        "raw",
        "hex",
        "base64",
        "openssh",
        "der",
        "pem body",
        "empty",
        "dict spaces",
        "dict tabs",
        "dict inner spaces",
    ],
)
def test_verify_refuses_a_key_file_that_is_not_one_public_pem(
    tmp_path: Path, data: bytes, said: str
) -> None:
    """Status 2, nothing checked, and the line says what the file is and what to give."""
    (tmp_path / "key").write_bytes(data)
    # An envelope in shape, its signature never checked: what is refused is the other file.
    (tmp_path / "bundle.jsonl").write_text(
        '{"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []}\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "verify", str(tmp_path / "bundle.jsonl"),
         "--key", str(tmp_path / "key")],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert done.stderr == f"jigcmd verify: public key {tmp_path / 'key'}: {said}\n"
