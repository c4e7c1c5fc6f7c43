"""`jigcmd verify` without `--key` holds the state directory's public half against the private
key beside it whenever that can be read, and never trusts it in silence.

A swapped `signing-key.pub.pem` (a forger's key) was refused beside a 0600 key, but trusted
beside one a start refuses for signing (mode 0640, a link): the forged statement `verified`.
With the private key gone, verify trusted the public half while the doctor said no key was
there; now both say it is trusted unchecked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jigcmd.attest.attester import Attester
from jigcmd.attest.keys import HOST_KEY_NAME, HOST_PUBLIC_NAME, KEY_ENV, SigningKey
from tests.attest.test_statement import _identity, _record


def _jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != KEY_ENV}
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _signed_by(key: SigningKey, path: Path) -> Path:
    path.write_bytes(Attester(key, _identity()).attest(_record()))
    return path


@pytest.fixture
def host(tmp_path: Path) -> tuple[Path, str]:
    """A state directory with its host key made by `jigcmd key`, and that key's id."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    made = _jigcmd("key", "--state-dir", str(state))
    assert made.returncode == 0, made.stderr
    return state, made.stderr.split()[2]


@pytest.fixture
def forger() -> SigningKey:
    return SigningKey(Ed25519PrivateKey.generate(), "forger")


def _swap(state: Path, forger: SigningKey) -> None:
    (state / HOST_PUBLIC_NAME).write_bytes(forger.public.pem)
    os.chmod(state / HOST_PUBLIC_NAME, 0o644)


@pytest.mark.parametrize("how", ["0600", "0640", "0644 and another owner's", "a link"])
def test_a_swapped_public_half_is_refused_whatever_the_private_keys_mode(
    host: tuple[Path, str], forger: SigningKey, tmp_path: Path, how: str
) -> None:
    """Status 2 naming both ids, however a start would judge the private key for signing."""
    state, host_id = host
    private = state / HOST_KEY_NAME
    if how == "0640":
        os.chmod(private, 0o640)
    elif how.startswith("0644"):
        os.chmod(private, 0o644)
        if os.geteuid() == 0:
            os.chown(private, 65534, 65534)
    elif how == "a link":
        kept = tmp_path / "kept.pem"
        private.rename(kept)
        private.symlink_to(kept)
    _swap(state, forger)
    forged = _signed_by(forger, tmp_path / "forged.jsonl")
    done = _jigcmd("verify", str(forged), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert done.stderr.startswith(
        f"jigcmd verify: the host key is not trusted: {state / HOST_PUBLIC_NAME} holds key "
        f"{forger.public.keyid}, not the public half of {HOST_KEY_NAME} beside it (key "
        f"{host_id}); "
    ), done.stderr


@pytest.mark.parametrize("what", ["garbage", "a FIFO", "a dangling link"])
def test_a_private_key_that_cannot_be_read_refuses_the_public_half(
    host: tuple[Path, str], forger: SigningKey, tmp_path: Path, what: str
) -> None:
    """Nothing to hold it against: status 2 saying why, and --key named; no hang on a FIFO."""
    state, _ = host
    private = state / HOST_KEY_NAME
    private.unlink()
    if what == "garbage":
        private.write_bytes(b"garbage\n")
        private.chmod(0o600)
        why = f"signing key {private}: not a PEM private key ("
    elif what == "a FIFO":
        os.mkfifo(private, 0o600)
        why = f"signing key {private}: is a FIFO (named pipe), not a regular file)"
    else:
        private.symlink_to(tmp_path / "gone.pem")
        why = f"signing key {private}: cannot be read: No such file or directory)"
    _swap(state, forger)
    forged = _signed_by(forger, tmp_path / "forged.jsonl")
    done = _jigcmd("verify", str(forged), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    said = (
        f"jigcmd verify: the host key is not trusted: {state / HOST_PUBLIC_NAME} cannot be "
        f"held against the private key beside it ({why}"
    )
    assert done.stderr.startswith(said), done.stderr
    assert done.stderr.endswith(", or pass --key PUB\n"), done.stderr


def test_the_host_keys_own_statement_verifies_beside_a_0640_key_in_silence(
    host: tuple[Path, str], tmp_path: Path
) -> None:
    """Its own public half, held against it and found the same: no word on stderr."""
    state, _ = host
    os.chmod(state / HOST_KEY_NAME, 0o640)
    private = (state / HOST_KEY_NAME).read_bytes()
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415 - test only
        load_pem_private_key,
    )

    loaded = load_pem_private_key(private, None)
    assert isinstance(loaded, Ed25519PrivateKey)
    bundle = _signed_by(SigningKey(loaded, "host"), tmp_path / "bundle.jsonl")
    done = _jigcmd("verify", str(bundle), "--state-dir", str(state))
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr


def test_with_the_private_key_gone_verify_and_doctor_say_the_half_is_trusted_unchecked(
    host: tuple[Path, str], forger: SigningKey, tmp_path: Path
) -> None:
    """verify warns on stderr (status as the checks go) and the doctor warns in the same words,
    where it said `ok … no host key yet` of a directory whose public half verify trusted."""
    state, _ = host
    (state / HOST_KEY_NAME).unlink()
    _swap(state, forger)
    unchecked = (
        f"{state / HOST_PUBLIC_NAME} (key {forger.public.keyid}) is trusted unchecked: no "
        f"{HOST_KEY_NAME} beside it to hold it against (moved out in a rotation, or a host "
        "that only verifies)"
    )
    forged = _signed_by(forger, tmp_path / "forged.jsonl")
    done = _jigcmd("verify", str(forged), "--state-dir", str(state))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == (
        f"jigcmd verify: warning: {unchecked}; --key PUB names the key you trust\n"
    )
    doctor = _jigcmd("doctor", "--json", "--state-dir", str(state))
    checks: dict[str, dict[str, Any]] = {c["check"]: c for c in json.loads(doctor.stdout)}
    line = checks["signing key"]
    assert line["status"] == "warn", line
    assert line["detail"] == (
        f"no host key in {state} yet (nothing was created), but `jigcmd verify` without --key "
        f"warns and trusts it: {unchecked}; serve and run make {HOST_KEY_NAME} on first use "
        "and write its own public half over it"
    )
    assert not (state / HOST_KEY_NAME).exists()


def test_with_the_private_key_gone_a_degenerate_half_is_refused_by_both(
    host: tuple[Path, str], tmp_path: Path
) -> None:
    """The doctor says what verify says of it: refused, the reason verify gives."""
    state, _ = host
    (state / HOST_KEY_NAME).unlink()
    identity_pem = (
        b"-----BEGIN PUBLIC KEY-----\n"
        b"MCowBQYDK2VwAyEAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
        b"-----END PUBLIC KEY-----\n"
    )
    (state / HOST_PUBLIC_NAME).write_bytes(identity_pem)
    bundle = tmp_path / "b.jsonl"
    bundle.write_text(
        '{"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []}\n'
    )
    done = _jigcmd("verify", str(bundle), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    reason = done.stderr.removeprefix("jigcmd verify: ").rstrip("\n")
    assert reason.startswith(f"public key {state / HOST_PUBLIC_NAME}: a degenerate key"), reason
    doctor = _jigcmd("doctor", "--json", "--state-dir", str(state))
    checks: dict[str, dict[str, Any]] = {c["check"]: c for c in json.loads(doctor.stdout)}
    assert checks["signing key"]["status"] == "warn", checks["signing key"]
    assert (
        f"`jigcmd verify` without --key refuses the public half there: {reason}; "
        in checks["signing key"]["detail"]
    )
