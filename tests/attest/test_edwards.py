"""`edwards.small_order`: the 8 points of order dividing 8, in every encoding, and no real key."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jigcmd.attest.edwards import small_order

# The 8 points whose order divides 8 (the identity; (0, -1) of order 2; (±√-1, 0) of order
# 4; four of order 8), as the literature lists them (libsodium's blocklist, "Taming the many
# EdDSAs"), and the non-canonical encodings of the same points: x = 0 with its sign bit set,
# and y + p for the two whose y is below 19.
CANONICAL = [
    "01" + "00" * 31,
    "ec" + "ff" * 30 + "7f",
    "00" * 32,
    "00" * 31 + "80",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
]
NON_CANONICAL = [
    "01" + "00" * 30 + "80",
    "ec" + "ff" * 31,
    "ed" + "ff" * 30 + "7f",
    "ed" + "ff" * 31,
    "ee" + "ff" * 30 + "7f",
    "ee" + "ff" * 31,
]
SMALL_ORDER = CANONICAL + NON_CANONICAL


@pytest.mark.parametrize("encoded", SMALL_ORDER)
def test_every_encoding_of_a_small_order_point_is_small_order(encoded: str) -> None:
    assert small_order(bytes.fromhex(encoded))


def test_no_real_key_is_small_order() -> None:
    """Keys made from seeds lie in the prime-order subgroup: never flagged."""
    for _ in range(64):
        assert not small_order(Ed25519PrivateKey.generate().public_key().public_bytes_raw())


def test_what_is_no_point_or_no_key_is_not_called_small_order() -> None:
    """y = 2 has no x on the curve; a wrong length is no key: the library's to refuse."""
    assert not small_order(bytes([2]) + bytes(31))
    assert not small_order(bytes(31))
