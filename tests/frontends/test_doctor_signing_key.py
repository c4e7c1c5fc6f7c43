"""`jigcmd doctor`'s `signing key` line: the key serve would sign with, read as serve reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jigcmd.attest.keys import HOST_KEY_NAME, HOST_PUBLIC_NAME, KEY_ENV
from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.frontends.diagnosis.keycheck import signing_key_check
from jigcmd.journal.marker import MARKER_NAME
from jigcmd.journal.store import Journal


def _jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != KEY_ENV}
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True, text=True, timeout=300, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def state(tmp_path: Path) -> Path:
    state = prepare_state_dir(tmp_path / "state")
    with Journal.open(state):
        pass
    return state


def test_garbage_in_the_host_key_fails_the_line_as_serve_refuses_it(state: Path) -> None:
    """Before, every line was ok while serve refused to start ("not a PEM private key")."""
    (state / HOST_KEY_NAME).write_bytes(b"garbage\n")
    os.chmod(state / HOST_KEY_NAME, 0o600)
    check = signing_key_check(state, {})
    assert check.status == "FAIL"
    assert check.detail.startswith(f"signing key {state / HOST_KEY_NAME}: not a PEM private key")
    assert check.hint is not None and "never replaced by a new one" in check.hint
    assert (state / HOST_KEY_NAME).read_bytes() == b"garbage\n"


def test_a_fifo_at_the_host_key_fails_the_line_and_does_not_hang(state: Path) -> None:
    os.mkfifo(state / HOST_KEY_NAME, 0o600)
    check = signing_key_check(state, {})
    assert check.status == "FAIL"
    assert "is a FIFO (named pipe), not a regular file" in check.detail


def test_no_host_key_yet_is_ok_and_none_is_made(state: Path) -> None:
    before = sorted(os.listdir(state))
    check = signing_key_check(state, {})
    assert (check.status, check.detail) == (
        "ok",
        f"no host key in {state} yet (nothing was created); serve and run make "
        f"{HOST_KEY_NAME} on first use",
    )
    assert sorted(os.listdir(state)) == before


def test_the_host_key_is_named_with_its_id_and_its_lost_public_half_not_written(
    state: Path,
) -> None:
    key = _jigcmd("key", "--state-dir", str(state))
    keyid = key.stderr.split()[2]
    (state / HOST_PUBLIC_NAME).unlink()
    check = signing_key_check(state, {})
    assert (check.status, check.detail) == (
        "ok",
        f"{state / HOST_KEY_NAME}: Ed25519, key id {keyid}",
    )
    assert not (state / HOST_PUBLIC_NAME).exists()


def test_the_key_named_by_the_environment_is_the_one_read(state: Path, tmp_path: Path) -> None:
    named = tmp_path / "k.pem"
    named.write_bytes(b"not a key")
    os.chmod(named, 0o600)
    check = signing_key_check(state, {KEY_ENV: str(named)})
    assert check.status == "FAIL" and check.detail.startswith(f"signing key {named}: ")


@pytest.mark.envelope
def test_doctor_fails_the_signing_key_line_and_names_it_in_the_summary(state: Path) -> None:
    """As a person runs it; a FIFO at the journal's marker fails the state line, no hang."""
    (state / HOST_KEY_NAME).write_bytes(b"garbage\n")
    os.chmod(state / HOST_KEY_NAME, 0o600)
    (state / MARKER_NAME).unlink()
    os.mkfifo(state / MARKER_NAME, 0o600)
    done = _jigcmd("doctor", "--json", "--state-dir", str(state))
    checks: dict[str, dict[str, Any]] = {c["check"]: c for c in json.loads(done.stdout)}
    assert done.returncode == 1
    assert checks["signing key"]["status"] == "FAIL", checks["signing key"]
    assert checks["state"]["status"] == "FAIL", checks["state"]
    assert "journal.mark is a FIFO (named pipe)" in checks["state"]["detail"]
    text = _jigcmd("doctor", "--state-dir", str(state))
    summary = text.stdout.splitlines()[-1]
    assert "(state directory, signing key)" in summary, summary
    assert "serve and run would not start: they sign every run with that key" in summary
