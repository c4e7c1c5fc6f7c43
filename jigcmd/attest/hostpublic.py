"""Which key `jigcmd verify` without `--key` trusts as this host's, and the doctor's words for it.

The state directory's `signing-key.pub.pem` is derived from `signing-key.pem` beside it, so
it is trusted as far as it can be held against that key. The private key is read for it
whenever it can be, whatever its mode (the mode guards signing, not this reading): a public
half that is not its own is refused. One that is there but cannot be read or is no key
refuses the public half too (status 2, why, and `--key`): a damaged host key serves nothing
(a start refuses it), and a warning a gate never reads would let a swapped public half pass
where the same swap beside a good key is refused. With no private key there at all (moved
out in a rotation, or a host that only verifies) the public half is all there is: trusted,
but never in silence: `verify` says so on stderr, and the doctor says the same.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from jigcmd.attest.keys import (
    HOST_KEY_NAME,
    HOST_PUBLIC_NAME,
    MAX_KEY_BYTES,
    PublicKey,
    SigningKey,
    SigningKeyError,
    parse_public,
    public_half_words,
    read_public_half,
)
from jigcmd.regularfile import NotRegular, read_regular

__all__ = ["HostPublic", "host_public_mismatch", "load_host_public", "lone_public_half"]


@dataclass(frozen=True)
class HostPublic:
    """The host's public half as `verify` trusts it; `unchecked` says why it was not checked."""

    key: PublicKey
    unchecked: str | None = None


def load_host_public(state_dir: Path) -> HostPublic:
    """The host key's public half, `signing-key.pub.pem` in a state directory already checked.

    Trusted only as far as the directory is: a file that is no regular file, or that group
    or others may write (so could swap for their own key), is refused; and so is one that is
    not the public half of the private key beside it, or that cannot be held against the
    private key there (see the module).
    """
    path = state_dir / HOST_PUBLIC_NAME
    try:
        data, info = read_regular(path, MAX_KEY_BYTES)
    except FileNotFoundError:
        raise SigningKeyError(
            f"no host key at {path}; pass --key PUB (`jigcmd key` prints it)"
        ) from None
    except NotRegular as exc:
        raise SigningKeyError(f"public key {path}: is {exc.what}, not a regular file") from None
    except OSError as exc:
        raise SigningKeyError(f"public key {path}: cannot be read: {exc.strerror}") from exc
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SigningKeyError(
            f"public key {path}: writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):04o}), so not trusted; run chmod 644 "
            f"{shlex.quote(str(path))}"
        )
    if info.st_uid != os.geteuid():
        raise SigningKeyError(
            f"public key {path}: owned by uid {info.st_uid}, not by this user "
            f"(uid {os.geteuid()}), so not trusted; remove it (a start writes it again)"
        )
    found = parse_public(data, path)
    private = state_dir / HOST_KEY_NAME
    if not os.path.lexists(private):
        return HostPublic(
            found,
            f"{path} (key {found.keyid}) is trusted unchecked: no {HOST_KEY_NAME} beside it "
            "to hold it against (moved out in a rotation, or a host that only verifies)",
        )
    try:
        own = read_public_half(private)
    except SigningKeyError as exc:
        raise SigningKeyError(
            f"the host key is not trusted: {path} cannot be held against the private key "
            f"beside it ({exc}); put the host's key back there (`jigcmd doctor` says what a "
            "start makes of it), or pass --key PUB"
        ) from None
    mismatch = public_half_words(data, path, own)
    if mismatch is not None:
        raise SigningKeyError(
            f"the host key is not trusted: {mismatch}; one of them was replaced. `jigcmd "
            "key` writes the private key's own public half again (and says what it held), or "
            "pass --key PUB"
        )
    return HostPublic(found)


def lone_public_half(state_dir: Path) -> str | None:
    """What `verify` without `--key` makes of a public half with no host key beside it.

    The doctor's words (so it trusts what verify trusts); None when there is no such file.
    """
    if not os.path.lexists(state_dir / HOST_PUBLIC_NAME):
        return None
    try:
        host = load_host_public(state_dir)
    except SigningKeyError as exc:
        return f"`jigcmd verify` without --key refuses the public half there: {exc}"
    return f"`jigcmd verify` without --key warns and trusts it: {host.unchecked}"


def host_public_mismatch(state_dir: Path, key: SigningKey) -> str | None:
    """Words for the state directory's public half when it is not `key`'s, else None.

    Read only (the doctor's): a missing or unreadable file is None, a start writes it again.
    """
    public = state_dir / HOST_PUBLIC_NAME
    try:
        data, _ = read_regular(public, MAX_KEY_BYTES)
    except OSError:
        return None
    return public_half_words(data, public, key.public)
