"""The host's Ed25519 signing key: made on first use in the state directory, or the operator's.

Which key signs, first that applies: `--signing-key FILE`; `$JIGCMD_SIGNING_KEY` naming a
file (for a key held elsewhere: a mounted secret, or `/dev/fd/N` for a key handed over on a
descriptor, which is read once at start); else the host key `signing-key.pem` in the state
directory, made on first use (0600, written whole and linked in, so two servers starting
together end with the same key) with its public half `signing-key.pub.pem` beside it.
A key is PKCS#8 PEM, unencrypted. A key that cannot be read or is not Ed25519 raises
`SigningKeyError` naming the file and the cause: the front does not start. The keys are
OpenSSL's, through `jigcmd.attest.ed25519` (the PEM armour is read and written here).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from jigcmd.attest import ed25519

__all__ = [
    "HOST_KEY_NAME",
    "HOST_PUBLIC_NAME",
    "KEY_ENV",
    "PublicKey",
    "SigningKey",
    "SigningKeyError",
    "key_id",
    "load_public",
    "open_signing_key",
]

HOST_KEY_NAME = "signing-key.pem"
HOST_PUBLIC_NAME = "signing-key.pub.pem"
KEY_ENV = "JIGCMD_SIGNING_KEY"
# A key file larger than this is not a PEM Ed25519 key (and is not read whole).
_MAX_KEY_BYTES = 16 * 1024
# RFC 8410: the DER of an Ed25519 key's PKCS#8 (v1) and SubjectPublicKeyInfo, before the
# raw 32 bytes.
_PKCS8_PREFIX: Final = bytes.fromhex("302e020100300506032b657004220420")
_SPKI_PREFIX: Final = bytes.fromhex("302a300506032b6570032100")
_K = TypeVar("_K", ed25519.PrivateKey, ed25519.PublicKey)
# One PEM block: its label and its base64 body (RFC 7468).
_PEM_BLOCK: Final = re.compile(
    rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n([A-Za-z0-9+/=\r\n\t ]*?)-----END \1-----"
)


class SigningKeyError(Exception):
    """Raised when the signing key cannot be read, made or used; the message names the file."""


def key_id(public: ed25519.PublicKey) -> str:
    """The key's id: the hex SHA-256 of its SubjectPublicKeyInfo (DER)."""
    return hashlib.sha256(_SPKI_PREFIX + public.public_bytes()).hexdigest()


def _pem(label: str, der: bytes) -> bytes:
    """`der` in PEM armour, 64 base64 characters a line (RFC 7468)."""
    body = base64.b64encode(der)
    lines = b"".join(body[i : i + 64] + b"\n" for i in range(0, len(body), 64))
    return b"-----BEGIN %s-----\n%s-----END %s-----\n" % (label.encode(), lines, label.encode())


def _unarmour(data: bytes) -> tuple[str, bytes] | None:
    """The first PEM block's label and DER, or None when there is no readable one."""
    found = _PEM_BLOCK.search(data)
    if found is None:
        return None
    try:
        der = binascii.a2b_base64(re.sub(rb"\s", b"", found.group(2)), strict_mode=True)
    except binascii.Error:
        return None
    return found.group(1).decode("ascii"), der


@dataclass(frozen=True)
class PublicKey:
    """A verifying key and its id."""

    key: ed25519.PublicKey
    keyid: str

    @property
    def pem(self) -> bytes:
        """The public key as SubjectPublicKeyInfo PEM."""
        return _pem("PUBLIC KEY", _SPKI_PREFIX + self.key.public_bytes())

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether `signature` is this key's over `message`."""
        return self.key.verify(signature, message)


@dataclass(frozen=True)
class SigningKey:
    """The Ed25519 key that signs run statements, and where it came from."""

    private: ed25519.PrivateKey
    source: str

    @classmethod
    def generate(cls, source: str) -> SigningKey:
        """A new random key (for tests and one-off tools; a host's key is `open_signing_key`)."""
        return cls(ed25519.PrivateKey.from_seed(secrets.token_bytes(ed25519.SEED_BYTES)), source)

    @property
    def public(self) -> PublicKey:
        """Its public half."""
        public = self.private.public_key()
        return PublicKey(public, key_id(public))

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature of `message`."""
        return self.private.sign(message)

    def pkcs8_pem(self) -> bytes:
        """The key as unencrypted PKCS#8 PEM, as `open_signing_key` reads it."""
        return _pem("PRIVATE KEY", _PKCS8_PREFIX + self.private.seed())


def open_signing_key(
    state_dir: Path, explicit: Path | None = None, environ: Mapping[str, str] | None = None
) -> SigningKey:
    """The key this host signs with (see the module); raises `SigningKeyError`."""
    environ = os.environ if environ is None else environ
    named = explicit or (Path(environ[KEY_ENV]) if environ.get(KEY_ENV) else None)
    if named is not None:
        return SigningKey(_read_private(named), str(named))
    return _host_key(state_dir)


def _read_bytes(path: Path) -> bytes:
    try:
        with open(path, "rb") as file:
            info = os.fstat(file.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise SigningKeyError(f"signing key {path}: is a directory")
            data = file.read(_MAX_KEY_BYTES + 1)
    except FileNotFoundError:
        raise SigningKeyError(f"signing key {path}: no such file") from None
    except OSError as exc:
        raise SigningKeyError(f"signing key {path}: cannot be read: {exc.strerror}") from exc
    if len(data) > _MAX_KEY_BYTES:
        raise SigningKeyError(f"signing key {path}: larger than {_MAX_KEY_BYTES} bytes")
    if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
        raise SigningKeyError(
            f"signing key {path}: readable or writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):04o}); chmod 600 it"
        )
    return data


def _read_private(path: Path) -> ed25519.PrivateKey:
    data = _read_bytes(path)
    block = _unarmour(data)
    if block is None:
        raise SigningKeyError(f"signing key {path}: not a PEM private key (no readable PEM block)")
    label, der = block
    if label == "ENCRYPTED PRIVATE KEY" or b"Proc-Type: 4,ENCRYPTED" in data:
        raise SigningKeyError(f"signing key {path}: is encrypted; give an unencrypted PKCS#8 key")
    if not label.endswith("PRIVATE KEY"):
        raise SigningKeyError(f"signing key {path}: not a PEM private key (a {label!r} block)")
    try:
        return _unavailable_as_error(path, ed25519.parse_private_der, der)
    except TypeError:
        raise SigningKeyError(f"signing key {path}: not an Ed25519 key") from None
    except ValueError as exc:
        raise SigningKeyError(f"signing key {path}: not a PEM private key ({exc})") from exc


def _unavailable_as_error(path: Path, parse: Callable[[bytes], _K], der: bytes) -> _K:
    try:
        return parse(der)
    except ed25519.Ed25519Unavailable as exc:
        raise SigningKeyError(f"key {path}: this Python's OpenSSL cannot use it: {exc}") from exc


def load_public(path: Path) -> PublicKey:
    """A public key from a PEM file (SubjectPublicKeyInfo, or a private key's public half)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"public key {path}: cannot be read: {exc.strerror}") from exc
    block = _unarmour(data)
    if block is None:
        raise SigningKeyError(f"public key {path}: not a PEM key (no readable PEM block)")
    label, der = block
    try:
        if label == "PUBLIC KEY":
            loaded = _unavailable_as_error(path, ed25519.parse_public_der, der)
        elif label.endswith("PRIVATE KEY") and label != "ENCRYPTED PRIVATE KEY":
            loaded = _unavailable_as_error(path, ed25519.parse_private_der, der).public_key()
        else:
            raise SigningKeyError(f"public key {path}: not a PEM key (a {label!r} block)")
    except TypeError:
        raise SigningKeyError(f"public key {path}: not an Ed25519 key") from None
    except ValueError as exc:
        raise SigningKeyError(f"public key {path}: not a PEM key ({exc})") from exc
    return PublicKey(loaded, key_id(loaded))


def _host_key(state_dir: Path) -> SigningKey:
    path = state_dir / HOST_KEY_NAME
    if not path.exists():
        _make_host_key(state_dir, path)
    key = SigningKey(_read_private(path), str(path))
    public = state_dir / HOST_PUBLIC_NAME
    pem = key.public.pem
    with contextlib.suppress(OSError):
        if public.read_bytes() == pem:
            return key
    # Missing or not this key's: the public half is derived, so it is written again.
    try:
        _write_whole(public, pem, 0o644)
    except OSError as exc:
        raise SigningKeyError(f"public key {public}: cannot be written: {exc.strerror}") from exc
    return key


def _make_host_key(state_dir: Path, path: Path) -> None:
    try:
        pem = SigningKey.generate(str(path)).pkcs8_pem()
    except ed25519.Ed25519Unavailable as exc:
        raise SigningKeyError(
            f"signing key {path}: this Python's OpenSSL cannot make it: {exc}"
        ) from exc
    try:
        _write_whole(path, pem, 0o600, replace=False)
    except OSError as exc:
        raise SigningKeyError(
            f"signing key {path}: cannot be made in {state_dir}: {exc.strerror}"
        ) from exc


def _write_whole(path: Path, data: bytes, mode: int, *, replace: bool = True) -> None:
    """Write `data` to a temporary file, fsync it, and put it at `path` in one step.

    `replace=False`: link it in, so that a file made meanwhile by another process wins.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        if replace:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
