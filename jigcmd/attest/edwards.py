"""Whether an Ed25519 public key is a point of small order: a key every signature verifies under.

Such a point A (one of the 8 whose order divides 8) is no one's public key, yet signatures
verify under it with no private key (for the identity, R = identity and S = 0 passes
`[S]B = R + [k]A` for every message), and OpenSSL takes it all the same. Each such A has
8·A = identity, and no other point has; so the key's y is decoded as RFC 8032 does
(reduced modulo p, so a non-canonical encoding y + p is the same point; the sign of x is
irrelevant, since 8·(-A) = -(8·A)), and the point doubled three times in exact arithmetic
over GF(2^255 - 19).
Pure: 32 bytes in, a bool out.
"""

from __future__ import annotations

__all__ = ["small_order"]

_P = 2**255 - 19
# The curve -x² + y² = 1 + d·x²·y², d = -121665/121666.
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_IDENTITY = (0, 1)


def _inverse(value: int) -> int:
    return pow(value, _P - 2, _P)


def _x_of(y: int) -> int | None:
    """An x with (x, y) on the curve (RFC 8032, 5.1.3), or None when there is none."""
    squared = (y * y - 1) * _inverse(_D * y * y + 1) % _P
    x = pow(squared, (_P + 3) // 8, _P)
    if (x * x - squared) % _P:
        x = x * _SQRT_M1 % _P
    return None if (x * x - squared) % _P else x


def _double(x: int, y: int) -> tuple[int, int]:
    # The addition law of a = -1, d a non-square: complete, so no denominator is ever 0.
    xx, yy = x * x % _P, y * y % _P
    dxxyy = _D * xx * yy % _P
    return 2 * x * y * _inverse(1 + dxxyy) % _P, (yy + xx) * _inverse(1 - dxxyy) % _P


def small_order(raw: bytes) -> bool:
    """Whether the 32-byte encoding `raw` is a point whose order divides 8, in any encoding.

    False for what is no point at all: the library's verification fails every signature there.
    """
    if len(raw) != 32:
        return False
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    x = _x_of(y % _P)
    if x is None:
        return False
    point = (x, y % _P)
    for _ in range(3):
        point = _double(*point)
    return point == _IDENTITY
