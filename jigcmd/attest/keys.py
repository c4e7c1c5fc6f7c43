"""The host's Ed25519 signing key: made on first use in the state directory, or the operator's.

Which key signs, first that applies: `--signing-key FILE`; `$JIGCMD_SIGNING_KEY` naming a
file (for a key held elsewhere: a mounted secret, or `/dev/fd/N` for a key handed over on a
descriptor, which is read once at start); else the host key `signing-key.pem` in the state
directory, made on first use (0600, written whole and linked in, so two servers starting
together end with the same key) with its public half `signing-key.pub.pem` beside it.
A key is PKCS#8 PEM, unencrypted. A key that cannot be read or is not Ed25519 raises
`SigningKeyError` naming the file and the cause: the front does not start. The host key and
its public half are the state directory's files: read as regular files only
(`jigcmd.regularfile`), so a FIFO there is refused, not waited on for ever.

The one form this module writes (RFC 8410's DER on one PEM line, as `cryptography` and
`openssl genpkey` write it) is encoded and decoded here around the library's raw Ed25519
keys; any other text goes to the library's PEM parser. Its `serialization` package imports
SSH, RSA, DSA, EC, DH and cipher modules (42 of them) that a serving process never needs
(what that costs: docs/performance.md, "The server's idle image").
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import os
import secrets
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from jigcmd.attest.edwards import small_order
from jigcmd.attest.keyforms import KeyFormError, signing_key_form, sslib_public_raw, unarmoured
from jigcmd.regularfile import NotRegular, read_regular

__all__ = [
    "HOST_KEY_NAME",
    "HOST_PUBLIC_NAME",
    "KEY_ENV",
    "MAX_KEY_BYTES",
    "PublicKey",
    "SigningKey",
    "SigningKeyError",
    "inspect_signing_key",
    "key_id",
    "load_public",
    "open_signing_key",
    "parse_public",
    "public_half_words",
    "read_public_half",
]

HOST_KEY_NAME = "signing-key.pem"
HOST_PUBLIC_NAME = "signing-key.pub.pem"
KEY_ENV = "JIGCMD_SIGNING_KEY"
# A key file larger than this is not a PEM Ed25519 key (and is not read whole).
MAX_KEY_BYTES = 16 * 1024
# RFC 8410's DER for Ed25519: a PKCS#8 v1 private key is this prefix and the 32-byte seed,
# a SubjectPublicKeyInfo this prefix and the 32-byte public key. DER is canonical: these are
# the library's bytes too (a test holds them equal).
_PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
_PRIVATE_LABEL = b"PRIVATE KEY"
_PUBLIC_LABEL = b"PUBLIC KEY"


class SigningKeyError(Exception):
    """Raised when the signing key cannot be read, made or used; the message names the file."""


def _pem(label: bytes, der: bytes) -> bytes:
    """`der` as PEM: base64 in lines of 64 between the label's two lines."""
    body = base64.b64encode(der)
    lines = b"\n".join(body[start : start + 64] for start in range(0, len(body), 64))
    return b"-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, lines, label)


def _ed25519_seed(data: bytes) -> bytes | None:
    """The seed of a PEM PKCS#8 Ed25519 key in the one form `_pem` writes; else None."""
    lines = data.split(b"\n")
    if len(lines) != 4:
        return None
    try:
        der = base64.b64decode(lines[1], validate=True)
    except binascii.Error:
        return None
    seed = der[len(_PKCS8_PREFIX) :]
    if not der.startswith(_PKCS8_PREFIX) or len(seed) != 32:
        return None
    # Only that text: written back, the same bytes (no other line breaks, labels or padding).
    return seed if _pem(_PRIVATE_LABEL, der) == data else None


def key_id(public: Ed25519PublicKey) -> str:
    """The key's id: the hex SHA-256 of its SubjectPublicKeyInfo (DER)."""
    return hashlib.sha256(_SPKI_PREFIX + public.public_bytes_raw()).hexdigest()


def _public_pem(public: Ed25519PublicKey) -> bytes:
    return _pem(_PUBLIC_LABEL, _SPKI_PREFIX + public.public_bytes_raw())


@dataclass(frozen=True)
class PublicKey:
    """A verifying key and its id."""

    key: Ed25519PublicKey
    keyid: str

    @property
    def pem(self) -> bytes:
        """The public key as SubjectPublicKeyInfo PEM."""
        return _public_pem(self.key)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether `signature` is this key's over `message`."""
        try:
            self.key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class SigningKey:
    """The Ed25519 key that signs run statements, and where it came from."""

    private: Ed25519PrivateKey
    source: str
    # A host key's `signing-key.pub.pem` that held another key (its words), written over as
    # this open read it: said by `jigcmd key`, never silently.
    replaced: str | None = None

    @property
    def public(self) -> PublicKey:
        """Its public half."""
        public = self.private.public_key()
        return PublicKey(public, key_id(public))

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature of `message`."""
        return self.private.sign(message)


def open_signing_key(
    state_dir: Path, explicit: Path | None = None, environ: Mapping[str, str] | None = None
) -> SigningKey:
    """The key this host signs with (see the module); raises `SigningKeyError`."""
    named = named_signing_key(explicit, environ)
    return named if named is not None else _host_key(state_dir)


def named_signing_key(
    explicit: Path | None = None, environ: Mapping[str, str] | None = None
) -> SigningKey | None:
    """The key `--signing-key` or `$JIGCMD_SIGNING_KEY` names, or None when neither does."""
    environ = os.environ if environ is None else environ
    named = explicit or (Path(environ[KEY_ENV]) if environ.get(KEY_ENV) else None)
    return None if named is None else SigningKey(_read_private(named), str(named))


def _read_bytes(path: Path, *, host: bool = False) -> bytes:
    """The key file's bytes, checked; `host`: the state directory's, a regular file only.

    A key the operator names may be a pipe (`/dev/fd/N`), read as it comes; the host key
    is opened without waiting on a FIFO or following a link (`jigcmd.regularfile`).
    """
    try:
        if host:
            data, info = read_regular(path, MAX_KEY_BYTES)
        else:
            with open(path, "rb") as file:
                info = os.fstat(file.fileno())
                if stat.S_ISDIR(info.st_mode):
                    raise SigningKeyError(f"signing key {path}: is a directory")
                data = file.read(MAX_KEY_BYTES + 1)
    except FileNotFoundError:
        raise SigningKeyError(f"signing key {path}: no such file") from None
    except NotRegular as exc:
        raise SigningKeyError(
            f"signing key {path}: is {exc.what}, not a regular file; fix: put the host's key "
            f"file back there (PEM, 0600), or pass --signing-key FILE"
        ) from None
    except OSError as exc:
        raise SigningKeyError(f"signing key {path}: cannot be read: {exc.strerror}") from exc
    if len(data) > MAX_KEY_BYTES:
        raise SigningKeyError(f"signing key {path}: larger than {MAX_KEY_BYTES} bytes")
    form = signing_key_form(data)
    if form is not None:
        # Its form first: a public key given by mistake needs no chmod 600.
        raise SigningKeyError(f"signing key {path}: {form}")
    if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
        raise SigningKeyError(
            f"signing key {path}: readable or writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):04o}); run chmod 600 {shlex.quote(str(path))}"
        )
    if stat.S_ISREG(info.st_mode) and info.st_uid != os.geteuid():
        # Its owner may read it (or chmod it to), and sign statements as this host.
        raise SigningKeyError(
            f"signing key {path}: owned by uid {info.st_uid}, not by this user "
            f"(uid {os.geteuid()}), who could sign as this host; run chown {os.geteuid()} "
            f"{shlex.quote(str(path))} if it is yours, else make a new key"
        )
    return data


def _read_private(path: Path, *, host: bool = False) -> Ed25519PrivateKey:
    return _parse_private(_read_bytes(path, host=host), path)


def read_public_half(path: Path) -> PublicKey:
    """The public half of the private key file `path`, to hold a public file against.

    Read (links followed, a FIFO refused) and parsed, but not held to what a key that signs
    must meet (its mode, its owner): those guard signing with it, not reading it. Raises
    `SigningKeyError` saying why it cannot be read or is no Ed25519 private key.
    """
    try:
        data, _ = read_regular(path, MAX_KEY_BYTES, follow=True)
    except NotRegular as exc:
        raise SigningKeyError(f"signing key {path}: is {exc.what}, not a regular file") from None
    except OSError as exc:
        raise SigningKeyError(f"signing key {path}: cannot be read: {exc.strerror}") from exc
    if len(data) > MAX_KEY_BYTES:
        raise SigningKeyError(f"signing key {path}: larger than {MAX_KEY_BYTES} bytes")
    public = _parse_private(data, path).public_key()
    return PublicKey(public, key_id(public))


def _parse_private(data: bytes, path: Path) -> Ed25519PrivateKey:
    seed = _ed25519_seed(data)
    if seed is not None:
        return Ed25519PrivateKey.from_private_bytes(seed)
    blocks = sum(1 for line in data.splitlines() if line.startswith(b"-----BEGIN "))
    if blocks > 1:
        # The library reads the first block alone: the key that signs would be a guess.
        raise SigningKeyError(
            f"signing key {path}: holds {blocks} PEM blocks, and one key signs: give a file "
            "with that one key alone"
        )
    # Any other text: the library parses it and says what it is.
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - see the module

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise SigningKeyError(
            f"signing key {path}: is encrypted; give an unencrypted PKCS#8 key"
        ) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SigningKeyError(f"signing key {path}: not a PEM private key ({exc})") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"signing key {path}: not an Ed25519 key")
    return key


def load_public(path: Path) -> PublicKey:
    """A public key from a file: one SubjectPublicKeyInfo PEM block, as `jigcmd key` prints,
    or a securesystemslib key dict naming the same Ed25519 key (`keyforms`)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise SigningKeyError(f"public key {path}: cannot be read: {exc.strerror}") from exc
    return parse_public(data, path)


def parse_public(data: bytes, path: Path) -> PublicKey:
    if len(data) > MAX_KEY_BYTES:
        raise SigningKeyError(f"public key {path}: larger than {MAX_KEY_BYTES} bytes")
    try:
        raw = sslib_public_raw(data)
    except KeyFormError as exc:
        raise SigningKeyError(f"public key {path}: {exc}; {_PUBLIC_FORM}") from None
    if raw is not None:
        # securesystemslib's (and in-toto's) key dict: the 32 raw bytes, unambiguous.
        return _not_degenerate(Ed25519PublicKey.from_public_bytes(raw), path)
    _one_public_pem(data, path)
    # Only `jigcmd verify` reads a public key: the library's parser, imported for it.
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - see the module

    try:
        loaded = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SigningKeyError(
            f"public key {path}: not a PEM public key ({exc}); {_PUBLIC_FORM}"
        ) from exc
    if not isinstance(loaded, Ed25519PublicKey):
        raise SigningKeyError(f"public key {path}: not an Ed25519 key; {_PUBLIC_FORM}")
    return _not_degenerate(loaded, path)


def _not_degenerate(public: Ed25519PublicKey, path: Path) -> PublicKey:
    """`public`, unless it is a point of small order (`edwards`), which no host's key is."""
    if small_order(public.public_bytes_raw()):
        raise SigningKeyError(
            f"public key {path}: a degenerate key (a point of small order, "
            f"{public.public_bytes_raw().hex()}) that signatures verify under with no private "
            "key, so no host's key; give the signer's own public key"
        )
    return PublicKey(public, key_id(public))


_PUBLIC_FORM = (
    "give an Ed25519 public key in PEM (SubjectPublicKeyInfo, `-----BEGIN PUBLIC KEY-----`), "
    "as `jigcmd key` prints it"
)


def _one_public_pem(data: bytes, path: Path) -> None:
    """Refuse what is not exactly one public key's PEM block, saying what it is instead.

    A private key's public half would do, but a private key should not travel to verifiers;
    of several keys the library reads the first alone, so the rest would be ignored unsaid.
    """
    labels = [line.strip() for line in data.splitlines() if line.startswith(b"-----BEGIN ")]
    if any(b"PRIVATE KEY" in label for label in labels):
        raise SigningKeyError(
            f"public key {path}: this is a private key; give its public half (`jigcmd key` "
            "prints it), and keep the private key on the signing host"
        )
    if not labels:
        raise SigningKeyError(f"public key {path}: not PEM: {unarmoured(data)}; {_PUBLIC_FORM}")
    if len(labels) > 1:
        raise SigningKeyError(
            f"public key {path}: holds {len(labels)} PEM blocks, and one key verifies: give "
            "the one key that signed (its id is each signature's keyid)"
        )


def _host_key(state_dir: Path) -> SigningKey:
    path = state_dir / HOST_KEY_NAME
    if not os.path.lexists(path):
        _make_host_key(state_dir, path)
    key = SigningKey(_read_private(path, host=True), str(path))
    public = state_dir / HOST_PUBLIC_NAME
    pem = key.public.pem
    replaced = None
    try:
        data, info = read_regular(public, MAX_KEY_BYTES)
        # One another user owns or may write (so change) is written again, as ours.
        trusted = info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if data == pem and trusted:
            return key
        replaced = public_half_words(data, public, key.public, "held")
    except NotRegular as exc:
        raise _not_a_public_file(exc) from None
    except OSError:
        pass
    # Missing or not this key's: the public half is derived, so it is written again.
    try:
        _write_whole(public, pem, 0o644)
    except OSError as exc:
        raise SigningKeyError(f"public key {public}: cannot be written: {exc.strerror}") from exc
    return SigningKey(key.private, key.source, replaced)


def public_half_words(data: bytes, public: Path, own: PublicKey, verb: str = "holds") -> str | None:
    """Words for a public half on disk that is not `own` (the private key's), else None.

    `verify` without `--key` trusts that file: one holding another key (put there by
    mistake, or by someone who signs as this host with it) is said, naming both ids.
    """
    try:
        held = f"key {parse_public(data, public).keyid}"
    except SigningKeyError:
        held = "no Ed25519 public key"
    if held == f"key {own.keyid}":
        return None
    return (
        f"{public} {verb} {held}, not the public half of {HOST_KEY_NAME} beside it (key "
        f"{own.keyid})"
    )


def _not_a_public_file(exc: NotRegular) -> SigningKeyError:
    # Never replaced: something put it there, and the operator decides what it was.
    return SigningKeyError(
        f"public key {exc.path}: is {exc.what}, not a regular file; fix: remove it (it is "
        f"derived from {HOST_KEY_NAME} and written again)"
    )


def inspect_signing_key(
    state_dir: Path, environ: Mapping[str, str] | None = None
) -> SigningKey | None:
    """The key `open_signing_key` would give, read as it reads it but nothing made or written.

    None when the host key is not made yet. Raises `SigningKeyError` where a start would.
    """
    environ = os.environ if environ is None else environ
    if environ.get(KEY_ENV):
        named = Path(environ[KEY_ENV])
        return SigningKey(_read_private(named), str(named))
    path = state_dir / HOST_KEY_NAME
    if not os.path.lexists(path):
        return None
    key = SigningKey(_read_private(path, host=True), str(path))
    try:
        read_regular(state_dir / HOST_PUBLIC_NAME, MAX_KEY_BYTES)
    except NotRegular as exc:
        raise _not_a_public_file(exc) from None
    except OSError:
        pass  # missing or unreadable: a start writes it again
    return key


def _make_host_key(state_dir: Path, path: Path) -> None:
    pem = _pem(_PRIVATE_LABEL, _PKCS8_PREFIX + Ed25519PrivateKey.generate().private_bytes_raw())
    try:
        _write_whole(path, pem, 0o600, replace=False)
    except OSError as exc:
        if exc.errno == errno.EROFS:
            # The mount is the cause, in the words run and serve use for their journal.
            raise SigningKeyError(
                f"signing key {path}: cannot be made: the filesystem holding {state_dir} is "
                "mounted read-only; fix: remount it read-write, or pass another --state-dir"
            ) from exc
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
