"""DSSE v1: the pre-authentication encoding, the JSON envelope, and a bundle of envelopes.

A signature is over `PAE(payloadType, payload)`, never over the JSON around it (DSSE
`protocol.md`); `keyid` is a hint that selects a key, never a reason to trust one. A run's
attestation is an in-toto bundle: one envelope per line (JSON Lines), its jigcmd statement
first. Pure: signing and verifying are callables handed in (`jigcmd.attest.keys`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable

import msgspec

from jigcmd.jsonio import strict

__all__ = [
    "PAYLOAD_TYPE",
    "BundleError",
    "Envelope",
    "NotStrictJSON",
    "Signature",
    "attestation_fields",
    "bundle_digest",
    "decode_bundle",
    "encode_bundle",
    "pae",
    "payload_of",
    "sign",
    "signature_bytes",
    "unknown_fields",
]

# in-toto's payload type: the payload is a JSON Statement.
PAYLOAD_TYPE = "application/vnd.in-toto+json"


class BundleError(ValueError):
    """Raised when bytes are not a bundle of DSSE envelopes; the message says where and why."""


class NotStrictJSON(BundleError):
    """Raised when a line is JSON that breaks a strict rule (`jsonio.strict`): a duplicate
    key, which readers resolve differently, or nesting past 64 levels."""


class Signature(msgspec.Struct, frozen=True):
    """One signature: base64 of the signature bytes, and the signer's key id hint."""

    sig: str
    keyid: str = ""


class Envelope(msgspec.Struct, frozen=True, rename="camel"):
    """The DSSE JSON envelope (unknown fields are ignored, as the format says)."""

    payload: str
    payload_type: str
    signatures: list[Signature]


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSEv1 SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def sign(body: bytes, signer: Callable[[bytes], bytes], keyid: str) -> Envelope:
    """The envelope of `body` (an in-toto Statement), signed over its PAE by `signer`."""
    signature = signer(pae(PAYLOAD_TYPE, body))
    return Envelope(
        payload=base64.b64encode(body).decode("ascii"),
        payload_type=PAYLOAD_TYPE,
        signatures=[Signature(sig=base64.b64encode(signature).decode("ascii"), keyid=keyid)],
    )


def _b64(text: str, what: str) -> bytes:
    """Standard or URL-safe base64, padded or not (verifiers must accept either)."""
    data = text.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BundleError(f"{what} is not base64: {exc}") from exc


def payload_of(envelope: Envelope) -> bytes:
    """The envelope's payload bytes; raises `BundleError` when it is not base64."""
    return _b64(envelope.payload, "the payload")


def signature_bytes(signature: Signature) -> bytes:
    """One signature's bytes; raises `BundleError` when it is not base64."""
    return _b64(signature.sig, "the signature")


_encoder = msgspec.json.Encoder()


def encode_bundle(envelopes: list[Envelope]) -> bytes:
    """The bundle's bytes: one compact JSON envelope per line, each line ending in a newline."""
    return b"".join(_encoder.encode(envelope) + b"\n" for envelope in envelopes)


def decode_bundle(data: bytes) -> list[Envelope]:
    """The envelopes of a bundle (JSON Lines), or of one JSON envelope; `BundleError` if not.

    Each envelope is read as strict JSON, so every reader of the bundle sees the same one.
    """
    try:
        return [msgspec.convert(value, Envelope) for _, value in _values(data)]
    except msgspec.ValidationError as exc:
        raise BundleError(f"not a DSSE envelope: {exc}") from exc


def unknown_fields(data: bytes) -> list[str]:
    """The fields of a bundle's envelopes that DSSE does not define (ignored, so unsigned).

    Each as `line N $.name` (or `$.name` for one envelope), a signature's as
    `$.signatures[i].name`. Raises `BundleError` as `decode_bundle` does.
    """
    found = []
    for where, value in _values(data):
        if not isinstance(value, dict):
            continue
        found += [f"{where}$.{key}" for key in value if key not in _ENVELOPE_FIELDS]
        signatures = value.get("signatures")
        for index, signature in enumerate(signatures if isinstance(signatures, list) else []):
            if isinstance(signature, dict):
                at = f"{where}$.signatures[{index}]"
                found += [f"{at}.{key}" for key in signature if key not in ("sig", "keyid")]
    return found


_ENVELOPE_FIELDS = ("payload", "payloadType", "signatures")


def _values(data: bytes) -> list[tuple[str, object]]:
    """Each envelope's JSON value, and where it is (`line N ` in JSON Lines, else empty)."""
    text = data.strip()
    if not text:
        raise BundleError("the file is empty")
    # (line number, line): blank lines and CRLF endings are allowed between envelopes.
    lines = [(n, line) for n, line in enumerate(data.split(b"\n"), 1) if line.strip()]
    try:
        if len(lines) > 1 and all(line.lstrip().startswith(b"{") for _, line in lines):
            try:
                return [(f"line {n} ", _value(line, f"line {n}: ")) for n, line in lines]
            except strict.Malformed:
                pass  # perhaps one pretty-printed envelope: tried whole below
        return [("", _value(text, ""))]
    except strict.Malformed as exc:
        raise BundleError(f"not JSON Lines of DSSE envelopes: {exc}") from None


def _value(text: bytes, where: str) -> object:
    try:
        return strict.loads(text)
    except strict.Malformed:
        raise
    except strict.StrictJSONError as exc:
        raise NotStrictJSON(f"{where}not strict JSON: {exc}") from None


def bundle_digest(data: bytes) -> str:
    """The bundle's identity as delivered beside a result: `sha256:` and its hex digest."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def attestation_fields(bundle: bytes) -> dict[str, object]:
    """How a JSON answer carries a bundle: its digest, its exact bytes, and its envelopes.

    Plain JSON values, for any encoder (jarvis answers through the standard library's).
    """
    return {
        "digest": bundle_digest(bundle),
        "bundle": bundle.decode("utf-8"),
        "envelopes": msgspec.to_builtins(decode_bundle(bundle)),
    }
