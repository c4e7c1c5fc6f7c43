"""`jigcmd key` as a person types it: a mistyped `--state-dir` makes no key.

It once made the directory and a brand-new key, printed it and exited 0, so a rotation
recipe with a mistyped `$state` archived a fresh key as the retired one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jigcmd.attest.keys import HOST_KEY_NAME


def _key(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "key", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_state_dir_that_does_not_exist_is_status_2_and_nothing_is_made(
    tmp_path: Path,
) -> None:
    """Status 2 naming the path, "it does not exist" and how to make one; no key printed."""
    typo = tmp_path / "stat"
    done = _key("--state-dir", str(typo))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"jigcmd key: --state-dir {typo}: it does not exist")
    assert f"mkdir -p -m 700 {typo}" in done.stderr
    assert not typo.exists()


def test_an_existing_state_dir_gets_its_host_key_on_first_use(tmp_path: Path) -> None:
    """A directory that exists (made by the operator or serve) still gets its key made."""
    state = tmp_path / "state"
    state.mkdir()
    done = _key("--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("-----BEGIN PUBLIC KEY-----")
    assert (state / HOST_KEY_NAME).is_file()


def test_the_default_state_dir_is_still_made_on_first_use(tmp_path: Path) -> None:
    """No --state-dir: the default directory (here `$JIGCMD_STATE_DIR`) is made, and its key."""
    default = tmp_path / "default"
    done = _key(env={**os.environ, "JIGCMD_STATE_DIR": str(default)})
    assert done.returncode == 0, done.stderr
    assert (default / HOST_KEY_NAME).is_file()


def test_a_named_key_is_printed_and_no_state_dir_is_read_or_made(tmp_path: Path) -> None:
    """`--signing-key F` (or `$JIGCMD_SIGNING_KEY`) is what serve signs with: no state dir."""
    made = tmp_path / "made"
    made.mkdir()
    assert _key("--state-dir", str(made)).returncode == 0
    named = made / HOST_KEY_NAME
    typo, default = tmp_path / "stat", tmp_path / "default"
    by_option = _key("--signing-key", str(named), "--state-dir", str(typo))
    by_env = _key(
        env={**os.environ, "JIGCMD_SIGNING_KEY": str(named), "JIGCMD_STATE_DIR": str(default)}
    )
    for done in (by_option, by_env):
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("-----BEGIN PUBLIC KEY-----")
        assert done.stderr.endswith(f"({named})\n")
    assert by_option.stdout == by_env.stdout
    assert not typo.exists() and not default.exists()
