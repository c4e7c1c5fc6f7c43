"""`jigcmd doctor`'s signing key check: the key serve and run would sign with, read as they read it.

Nothing is made or written: a host key not made yet is said to be made on first use, and a
key handed over on a descriptor (`$JIGCMD_SIGNING_KEY` naming a pipe) is not consumed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from jigcmd.attest.hostpublic import host_public_mismatch, lone_public_half
from jigcmd.attest.keys import HOST_KEY_NAME, KEY_ENV, SigningKeyError, inspect_signing_key
from jigcmd.durable.statedir import (
    StateDirError,
    checked_state_dir,
    default_state_dir,
    unmade_state_dir,
)
from jigcmd.frontends.diagnosis.verdicts import Check

__all__ = ["NAME", "signing_key_check"]

NAME = "signing key"
_FIX = (
    "give serve and run a key they can use: the host's key put back (PKCS#8 PEM Ed25519, "
    "0600), or --signing-key FILE; a damaged host key is never replaced by a new one "
    '(docs/attestation.md, "The key")'
)

_MISMATCH_FIX = (
    "find out who put that file there; `jigcmd key` writes the key's own public half again "
    "(`jigcmd verify` without --key refuses the host key until then)"
)

_LONE_FIX = (
    "on a host that only verifies, make sure it is the signer's key; else remove it, and "
    "give `jigcmd verify` the key you trust with --key PUB"
)


def signing_key_check(state_dir: Path | None, environ: Mapping[str, str] | None = None) -> Check:
    """The key `--state-dir` (or the default) and `$JIGCMD_SIGNING_KEY` give serve and run."""
    environ = os.environ if environ is None else environ
    named = environ.get(KEY_ENV)
    if named and _a_stream(Path(named)):
        return Check(
            NAME, "ok", f"${KEY_ENV} names {named}, a pipe or device: read once at a start, "
            "not here"
        )  # fmt: skip
    state = Path()
    if not named:
        try:
            state = state_dir or default_state_dir()
            if unmade_state_dir(state) is not None:
                return Check(NAME, "ok", f"no host key yet: serve and run make one in {state}")
            state = checked_state_dir(state)
        except StateDirError:
            return Check(NAME, "warn", "not checked: the state directory cannot be used")
    try:
        key = inspect_signing_key(state, environ)
    except SigningKeyError as exc:
        return Check(NAME, "FAIL", str(exc), _FIX)
    if key is None:
        lone = lone_public_half(state)
        if lone is not None:
            # What verify trusts (or refuses) without --key: said here as verify says it.
            return Check(
                NAME, "warn", f"no host key in {state} yet (nothing was created), but {lone}; "
                f"serve and run make {HOST_KEY_NAME} on first use and write its own public "
                "half over it", _LONE_FIX,
            )  # fmt: skip
        return Check(
            NAME, "ok", f"no host key in {state} yet (nothing was created); serve and run make "
            f"{HOST_KEY_NAME} on first use"
        )  # fmt: skip
    said = f"{key.source}: Ed25519, key id {key.public.keyid}"
    mismatch = None if named else host_public_mismatch(state, key)
    if mismatch is not None:
        # `jigcmd verify` without --key refuses it; a start writes the key's own half over it.
        return Check(NAME, "warn", f"{said}; but {mismatch}", _MISMATCH_FIX)
    return Check(NAME, "ok", said)


def _a_stream(path: Path) -> bool:
    """Whether `path` is a pipe or a device (`/dev/fd/N`): reading it would consume it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
