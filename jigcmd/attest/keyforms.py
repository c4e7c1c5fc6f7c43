"""What a key file holds when it is not the PEM jigcmd reads, so a refusal names its form.

Pure: bytes in, words (or a key's 32 raw bytes) out; `jigcmd.attest.keys` turns them into
keys and errors. A verifying key in another encoding (raw, hex, base64, DER, OpenSSH) is
named with what to give instead; a signing key that is a public key or an OpenSSH private
key is named before anything is said of its mode (a public key needs no chmod 600). A
securesystemslib / in-toto key dict (`{"keytype": "ed25519", "scheme": "ed25519",
"keyval": {"public": "<hex>"}}`) names the 32 raw bytes of one Ed25519 public key, nothing
else, so it is read as that key.
"""

from __future__ import annotations

import base64
import re

from jigcmd.jsonio import strict

__all__ = ["KeyFormError", "signing_key_form", "sslib_public_raw", "unarmoured"]

# The fields securesystemslib's `SSlibKey.to_dict()` writes (and older versions' hash list).
_SSLIB_FIELDS = {"keytype", "scheme", "keyval", "keyid_hash_algorithms"}
_HEX64 = re.compile("[0-9a-fA-F]{64}")
# How to turn an OpenSSH Ed25519 private key into PKCS#8 PEM: ssh-keygen's `-m PKCS8` does
# not apply to Ed25519 keys, so the way is the library jigcmd itself uses.
_OPENSSH_FIX = (
    'convert a copy with the cryptography library (docs/attestation.md, "The key"), or make '
    "a key with `openssl genpkey -algorithm ed25519 -out FILE`"
)


class KeyFormError(ValueError):
    """Raised when a key file is in a form that names itself but is not the one accepted."""


def _pem_labels(data: bytes) -> list[bytes]:
    return [line.strip() for line in data.splitlines() if line.startswith(b"-----BEGIN ")]


def signing_key_form(data: bytes) -> str | None:
    """Why `data` is not a private key jigcmd signs with, when its form says so; else None.

    Judged before the file's mode: a public key given by mistake is told to give the private
    key, not to chmod a public key 600.
    """
    labels = _pem_labels(data)
    text = data.strip()
    if any(b"OPENSSH PRIVATE KEY" in label for label in labels):
        return (
            "an OpenSSH private key (-----BEGIN OPENSSH PRIVATE KEY-----), not PKCS#8 PEM "
            "(-----BEGIN PRIVATE KEY-----), and ssh-keygen cannot write an Ed25519 key as "
            f"PKCS#8: {_OPENSSH_FIX}"
        )
    private = any(b"PRIVATE KEY" in label for label in labels)
    public = any(b"PUBLIC KEY" in label for label in labels) or text.startswith(b"ssh-")
    if public and not private:
        # A private key beside a public half is a file of several blocks: said as such.
        return (
            "a public key: a signing key is the private key (PKCS#8 PEM, -----BEGIN PRIVATE "
            "KEY-----, mode 0600); its public half is what verifiers get"
        )
    return None


def sslib_public_raw(data: bytes) -> bytes | None:
    """The 32 raw bytes of the Ed25519 public key a securesystemslib key dict names.

    None when `data` is no JSON object; `KeyFormError` saying what it is when it is JSON but
    not exactly such a key (another key type, a private key, another field).
    """
    if not data.lstrip().startswith(b"{"):
        return None
    try:
        value = strict.loads(data)
    except strict.StrictJSONError as exc:
        raise KeyFormError(f"a JSON object that breaks a strict JSON rule ({exc})") from None
    if not isinstance(value, dict) or "keytype" not in value:
        raise KeyFormError("a JSON object, but no securesystemslib key (no keytype)")
    keytype, scheme = value.get("keytype"), value.get("scheme")
    keyval = value.get("keyval")
    if keytype != "ed25519" or scheme != "ed25519":
        raise KeyFormError(
            f"a securesystemslib key of keytype {keytype!r} and scheme {scheme!r}, not an "
            "Ed25519 key (keytype and scheme 'ed25519')"
        )
    if isinstance(keyval, dict) and keyval.get("private"):
        raise KeyFormError(
            "a securesystemslib key holding its private key: give its public half alone, and "
            "keep the private key on the signing host"
        )
    extra = sorted(set(value) - _SSLIB_FIELDS)
    public = keyval.get("public") if isinstance(keyval, dict) and len(keyval) == 1 else None
    # Exactly the 64 digits: `bytes.fromhex` skips whitespace, so " ab…" of 64 characters
    # would be fewer than 32 bytes, refused in the library's words as the bundle's fault.
    if extra or not isinstance(public, str) or not _HEX64.fullmatch(public):
        what = f"fields {', '.join(extra)}" if extra else "keyval.public not 64 hex digits"
        raise KeyFormError(f"a securesystemslib Ed25519 key, but not one key: {what}")
    return bytes.fromhex(public)


def unarmoured(data: bytes) -> str:
    """What a key file without a PEM block looks like, so the error names the form it is."""
    text = data.strip()
    if not text:
        return "the file is empty"
    if text.startswith((b"ssh-ed25519 ", b"ssh-rsa ", b"ecdsa-sha2-", b"ssh-")):
        kind = text.split(b" ", 1)[0].decode("ascii", "replace")
        return f"an OpenSSH public key ({kind} …), no -----BEGIN line"
    if all(c in b"0123456789abcdefABCDEF" for c in b"".join(text.split())):
        digits = len(b"".join(text.split()))
        raw = " (an Ed25519 key's 32 raw bytes, in hex)" if digits == 64 else ""
        return f"{digits} hex digits{raw}, no -----BEGIN line"
    body = _base64(b"".join(text.split()))
    if body is not None and len(body) == 32:
        return "base64 of 32 bytes (an Ed25519 key's raw bytes), no -----BEGIN line"
    if body is not None and body[:1] == b"\x30":
        return "base64 of DER: a PEM block's body without its -----BEGIN and -----END lines"
    if len(data) == 32:
        return "32 bytes of binary (an Ed25519 key's raw bytes), no -----BEGIN line"
    if data[:1] == b"\x30":
        return (
            "binary DER (a SEQUENCE), no -----BEGIN line: `openssl pkey -pubin -inform DER "
            "-in FILE` prints it as PEM"
        )
    return f"{len(data)} bytes with no -----BEGIN line"


def _base64(text: bytes) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return None
