"""DSSE v1: the pre-authentication encoding, envelopes, and bundles of them."""

from __future__ import annotations

import base64

import pytest

from jigcmd.attest import dsse


def test_pae_matches_the_specifications_test_vector() -> None:
    """protocol.md's example: DSSEv1 29 http://example.com/HelloWorld 11 hello world."""
    assert (
        dsse.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_counts_bytes_not_characters() -> None:
    """Lengths are of the UTF-8 bytes: a multibyte type and body are counted in bytes."""
    assert dsse.pae("tÿpe", "bödy".encode()) == "DSSEv1 5 tÿpe 5 bödy".encode()


def test_a_signed_envelope_is_over_the_pae_of_the_in_toto_payload_type() -> None:
    """sign() hands the signer exactly PAE(application/vnd.in-toto+json, body)."""
    seen: list[bytes] = []

    def signer(message: bytes) -> bytes:
        seen.append(message)
        return b"\x01\x02"

    envelope = dsse.sign(b'{"a":1}', signer, "kid")
    assert seen == [b'DSSEv1 28 application/vnd.in-toto+json 7 {"a":1}']
    assert envelope.payload_type == "application/vnd.in-toto+json"
    assert base64.b64decode(envelope.payload) == b'{"a":1}'
    assert envelope.signatures[0].keyid == "kid"
    assert dsse.signature_bytes(envelope.signatures[0]) == b"\x01\x02"


def test_a_bundle_is_one_envelope_per_line_and_decodes_back() -> None:
    """encode_bundle writes JSON Lines; decode_bundle reads them (and one lone envelope)."""
    first = dsse.sign(b"one", lambda m: b"s1", "k")
    second = dsse.sign(b"two", lambda m: b"s2", "k")
    data = dsse.encode_bundle([first, second])
    assert data.count(b"\n") == 2 and data.endswith(b"\n")
    assert dsse.decode_bundle(data) == [first, second]
    pretty = b'{\n  "payload": "b25l",\n  "payloadType": "x",\n  "signatures": []\n}\n'
    assert dsse.decode_bundle(pretty) == [dsse.Envelope("b25l", "x", [])]


def test_url_safe_and_unpadded_base64_are_accepted() -> None:
    """Verifiers must accept either base64 alphabet (protocol.md); padding may be absent."""
    raw = bytes(range(250, 256))
    url = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert dsse.payload_of(dsse.Envelope(url, "t", [])) == raw


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "empty"),
        (b"not json", "not JSON Lines"),
        (b'{"payload": 1, "payloadType": "t", "signatures": []}', "not a DSSE envelope"),
        (b'{"payloadType": "t", "signatures": []}', "not a DSSE envelope"),
    ],
)
def test_what_is_not_a_bundle_is_refused_with_the_reason(data: bytes, words: str) -> None:
    """Empty, non-JSON and wrongly shaped input each say what is wrong."""
    with pytest.raises(dsse.BundleError, match=words):
        dsse.decode_bundle(data)


def test_a_payload_that_is_not_base64_is_refused() -> None:
    """A broken payload is a BundleError naming it, not a crash."""
    with pytest.raises(dsse.BundleError, match="the payload is not base64"):
        dsse.payload_of(dsse.Envelope("***", "t", []))


def test_the_bundle_digest_is_the_sha256_of_its_bytes() -> None:
    """bundle_digest names the exact bytes delivered."""
    assert dsse.bundle_digest(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
