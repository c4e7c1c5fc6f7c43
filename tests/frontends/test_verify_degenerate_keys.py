"""`jigcmd verify` refuses a degenerate Ed25519 key: a point of small order, no one's key.

Under the identity point, R = identity and S = 0 verifies every message: with it as
`--key` (PEM or a securesystemslib dict), or as the state directory's public half, a
statement no one signed was `verified`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from jigcmd.attest.attester import Attester
from jigcmd.attest.keys import HOST_PUBLIC_NAME, PublicKey, SigningKey, key_id
from tests.attest.test_edwards import SMALL_ORDER
from tests.attest.test_statement import _identity, _record

_IDENTITY = bytes([1]) + bytes(31)


@dataclass(frozen=True)
class _Forger(SigningKey):
    """Signs as the identity point: R = identity, S = 0, whatever the message."""

    @property
    def public(self) -> PublicKey:
        point = Ed25519PublicKey.from_public_bytes(_IDENTITY)
        return PublicKey(point, key_id(point))

    def sign(self, message: bytes) -> bytes:
        return _IDENTITY + bytes(32)


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "verify", *args],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _sslib(raw: bytes) -> str:
    return json.dumps({"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": raw.hex()}})


def _said(path: Path, raw: bytes) -> str:
    return (
        f"jigcmd verify: public key {path}: a degenerate key (a point of small order, "
        f"{raw.hex()}) that signatures verify under with no private key, so no host's key; "
        "give the signer's own public key\n"
    )


@pytest.fixture
def forged(tmp_path: Path) -> Path:
    bundle = tmp_path / "forged.jsonl"
    forger = _Forger(Ed25519PrivateKey.generate(), "forger")
    bundle.write_bytes(Attester(forger, _identity()).attest(_record()))
    return bundle


@pytest.mark.parametrize("form", ["pem", "sslib"])
def test_a_statement_signed_as_the_identity_point_is_refused_with_its_key(
    forged: Path, tmp_path: Path, form: str
) -> None:
    """Status 2 naming the key file, where it was `verified` (status 0)."""
    key = tmp_path / "key"
    point = _Forger(Ed25519PrivateKey.generate(), "forger").public
    key.write_bytes(point.pem if form == "pem" else _sslib(_IDENTITY).encode())
    done = _verify(str(forged), "--key", str(key))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert done.stderr == _said(key, _IDENTITY)


@pytest.mark.parametrize("encoded", SMALL_ORDER)
def test_every_encoding_of_a_small_order_point_is_refused_as_a_key(
    forged: Path, tmp_path: Path, encoded: str
) -> None:
    raw = bytes.fromhex(encoded)
    key = tmp_path / "key.json"
    key.write_text(_sslib(raw))
    done = _verify(str(forged), "--key", str(key))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", _said(key, raw))


def test_the_identity_as_the_state_directorys_public_half_is_refused(
    forged: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    public = state / HOST_PUBLIC_NAME
    public.write_bytes(_Forger(Ed25519PrivateKey.generate(), "forger").public.pem)
    os.chmod(public, 0o644)
    done = _verify(str(forged), "--state-dir", str(state))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", _said(public, _IDENTITY))


def test_a_real_keys_statement_still_verifies(tmp_path: Path) -> None:
    signer = SigningKey(Ed25519PrivateKey.generate(), "host")
    bundle = tmp_path / "bundle.jsonl"
    bundle.write_bytes(Attester(signer, _identity()).attest(_record()))
    key = tmp_path / "key.json"
    key.write_text(_sslib(signer.public.key.public_bytes_raw()))
    done = _verify(str(bundle), "--key", str(key))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("verified\n")
