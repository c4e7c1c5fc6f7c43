"""Ed25519 through the OpenSSL libcrypto this Python's own `hashlib` is linked against.

Reached by ctypes through `_hashlib`'s shared object, whose symbol lookup includes the
libcrypto it was built with: no second copy of a crypto library in the server (the
`cryptography` package alone was ~9 MiB of its memory). Ed25519 is deterministic (RFC 8032),
so a signature is the same bytes whichever library makes it. Keys are held as OpenSSL
`EVP_PKEY` objects, freed with their Python owner. `Ed25519Unavailable` is raised when the
libcrypto lacks a function (OpenSSL before 1.1.1, or another library).
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from collections.abc import Callable
from typing import Any, Final

__all__ = [
    "PUBLIC_BYTES",
    "SEED_BYTES",
    "SIGNATURE_BYTES",
    "Ed25519Unavailable",
    "PrivateKey",
    "PublicKey",
    "parse_private_der",
    "parse_public_der",
]

SEED_BYTES: Final = 32
PUBLIC_BYTES: Final = 32
SIGNATURE_BYTES: Final = 64
# OpenSSL's NID_ED25519 (EVP_PKEY_ED25519).
_ED25519: Final = 1087

_p = ctypes.c_void_p
_size = ctypes.c_size_t
# Each function used: (result type, argument types).
_FUNCTIONS: Final[dict[str, tuple[Any, list[Any]]]] = {
    "EVP_PKEY_new_raw_private_key": (_p, [ctypes.c_int, _p, ctypes.c_char_p, _size]),
    "EVP_PKEY_new_raw_public_key": (_p, [ctypes.c_int, _p, ctypes.c_char_p, _size]),
    "EVP_PKEY_get_raw_private_key": (ctypes.c_int, [_p, ctypes.c_char_p, ctypes.POINTER(_size)]),
    "EVP_PKEY_get_raw_public_key": (ctypes.c_int, [_p, ctypes.c_char_p, ctypes.POINTER(_size)]),
    "EVP_PKEY_free": (None, [_p]),
    "EVP_MD_CTX_new": (_p, []),
    "EVP_MD_CTX_free": (None, [_p]),
    "EVP_DigestSignInit": (ctypes.c_int, [_p, _p, _p, _p, _p]),
    "EVP_DigestSign": (
        ctypes.c_int,
        [_p, ctypes.c_char_p, ctypes.POINTER(_size), ctypes.c_char_p, _size],
    ),
    "EVP_DigestVerifyInit": (ctypes.c_int, [_p, _p, _p, _p, _p]),
    "EVP_DigestVerify": (ctypes.c_int, [_p, ctypes.c_char_p, _size, ctypes.c_char_p, _size]),
    "d2i_AutoPrivateKey": (_p, [_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_long]),
    "d2i_PUBKEY": (_p, [_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_long]),
    "ERR_clear_error": (None, []),
}
# A bound libcrypto function (ctypes converts the arguments by its argtypes).
_Function = Callable[..., Any]
# Renamed in OpenSSL 3.0 (the old name is a macro there).
_BASE_ID_NAMES: Final = ("EVP_PKEY_get_base_id", "EVP_PKEY_base_id")


class Ed25519Unavailable(Exception):
    """Raised when this Python's libcrypto cannot do Ed25519 (a function is missing)."""


class _Lib:
    """The libcrypto functions, typed."""

    def __init__(self, dll: ctypes.CDLL) -> None:
        self.fn: dict[str, _Function] = {}
        for name, (restype, argtypes) in _FUNCTIONS.items():
            self.fn[name] = self._bind(dll, name, restype, argtypes)
        for name in _BASE_ID_NAMES:
            if hasattr(dll, name):
                self.fn["base_id"] = self._bind(dll, name, ctypes.c_int, [_p])
                break
        else:
            raise Ed25519Unavailable("libcrypto has no EVP_PKEY_get_base_id")

    @staticmethod
    def _bind(dll: ctypes.CDLL, name: str, restype: object, argtypes: list[Any]) -> _Function:
        try:
            function: Any = getattr(dll, name)
        except AttributeError:
            raise Ed25519Unavailable(
                f"libcrypto has no {name} (OpenSSL 1.1.1 or later needed)"
            ) from None
        function.restype = restype
        function.argtypes = argtypes
        bound: _Function = function
        return bound


@functools.cache
def _lib() -> _Lib:
    import _hashlib  # noqa: PLC0415 - the one door to the libcrypto, opened at first use

    try:
        return _Lib(ctypes.CDLL(_hashlib.__file__))
    except OSError as exc:
        where = _hashlib.__file__
        raise Ed25519Unavailable(f"cannot load libcrypto through {where}: {exc}") from exc


class _Key:
    """An owned `EVP_PKEY` holding an Ed25519 key, freed with this object."""

    def __init__(self, pkey: int | None) -> None:
        if not pkey:
            _lib().fn["ERR_clear_error"]()
            raise ValueError("libcrypto refused the key")
        self._pkey = pkey
        weakref.finalize(self, _lib().fn["EVP_PKEY_free"], pkey)

    def _raw(self, getter: str, size: int) -> bytes:
        buffer = ctypes.create_string_buffer(size)
        length = _size(size)
        if _lib().fn[getter](self._pkey, buffer, ctypes.byref(length)) != 1 or length.value != size:
            _lib().fn["ERR_clear_error"]()
            raise ValueError("libcrypto could not give the raw key")
        return buffer.raw

    def public_bytes(self) -> bytes:
        """The raw 32-byte public key."""
        return self._raw("EVP_PKEY_get_raw_public_key", PUBLIC_BYTES)


class PrivateKey(_Key):
    """An Ed25519 signing key."""

    @classmethod
    def from_seed(cls, seed: bytes) -> PrivateKey:
        """The key whose 32-byte private seed is `seed` (RFC 8032)."""
        if len(seed) != SEED_BYTES:
            raise ValueError(f"an Ed25519 seed is {SEED_BYTES} bytes, not {len(seed)}")
        lib = _lib().fn
        return cls(lib["EVP_PKEY_new_raw_private_key"](_ED25519, None, seed, SEED_BYTES))

    def seed(self) -> bytes:
        """The raw 32-byte private seed."""
        return self._raw("EVP_PKEY_get_raw_private_key", SEED_BYTES)

    def public_key(self) -> PublicKey:
        """Its public half."""
        return PublicKey.from_bytes(self.public_bytes())

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of `message`."""
        lib = _lib().fn
        ctx = lib["EVP_MD_CTX_new"]()
        if not ctx:
            raise MemoryError("EVP_MD_CTX_new failed")
        try:
            signature = ctypes.create_string_buffer(SIGNATURE_BYTES)
            length = _size(SIGNATURE_BYTES)
            signed = lib["EVP_DigestSignInit"](ctx, None, None, None, self._pkey) == 1 and (
                lib["EVP_DigestSign"](ctx, signature, ctypes.byref(length), message, len(message))
                == 1
            )
            if not signed or length.value != SIGNATURE_BYTES:
                lib["ERR_clear_error"]()
                raise ValueError("libcrypto could not sign")
            return signature.raw
        finally:
            lib["EVP_MD_CTX_free"](ctx)


class PublicKey(_Key):
    """An Ed25519 verifying key."""

    @classmethod
    def from_bytes(cls, raw: bytes) -> PublicKey:
        """The key whose raw 32-byte encoding is `raw`."""
        if len(raw) != PUBLIC_BYTES:
            raise ValueError(f"an Ed25519 public key is {PUBLIC_BYTES} bytes, not {len(raw)}")
        lib = _lib().fn
        return cls(lib["EVP_PKEY_new_raw_public_key"](_ED25519, None, raw, PUBLIC_BYTES))

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether `signature` is this key's over `message`."""
        lib = _lib().fn
        ctx = lib["EVP_MD_CTX_new"]()
        if not ctx:
            raise MemoryError("EVP_MD_CTX_new failed")
        try:
            if lib["EVP_DigestVerifyInit"](ctx, None, None, None, self._pkey) != 1:
                lib["ERR_clear_error"]()
                raise ValueError("libcrypto could not verify")
            good = lib["EVP_DigestVerify"](ctx, signature, len(signature), message, len(message))
            lib["ERR_clear_error"]()
            return bool(good == 1)
        finally:
            lib["EVP_MD_CTX_free"](ctx)


def _parse(decoder: str, der: bytes) -> int:
    """An owned `EVP_PKEY` from DER, or ValueError; a key of another type is `TypeError`."""
    lib = _lib().fn
    cursor = ctypes.c_char_p(der)
    pkey = lib[decoder](None, ctypes.byref(cursor), len(der))
    if not pkey:
        lib["ERR_clear_error"]()
        raise ValueError("not a DER key libcrypto can read")
    if lib["base_id"](pkey) != _ED25519:
        lib["EVP_PKEY_free"](pkey)
        raise TypeError("not an Ed25519 key")
    return int(pkey)


def parse_private_der(der: bytes) -> PrivateKey:
    """An Ed25519 key from unencrypted PKCS#8 DER (ValueError; TypeError: another type)."""
    return PrivateKey(_parse("d2i_AutoPrivateKey", der))


def parse_public_der(der: bytes) -> PublicKey:
    """An Ed25519 key from SubjectPublicKeyInfo DER (ValueError; TypeError: another type)."""
    return PublicKey(_parse("d2i_PUBKEY", der))
