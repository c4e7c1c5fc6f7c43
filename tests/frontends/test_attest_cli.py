"""`jigcmd attest` as a person types it: reading a statement creates no state directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def attest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "attest", "--run-id", "run-1", "op-1", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_state_directory_that_does_not_exist_is_status_2_and_not_created(
    tmp_path: Path,
) -> None:
    """A typo is status 2 naming it; before, it was created with a fresh journal."""
    typo = tmp_path / "stat"
    done = attest("--state-dir", str(typo))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"jigcmd attest: --state-dir {typo}: no such directory")
    assert done.stdout == ""
    assert not typo.exists()


def test_a_default_state_directory_not_made_yet_has_no_such_operation(tmp_path: Path) -> None:
    """No --state-dir and none made yet: status 1, no such operation, nothing created."""
    default = tmp_path / "state"
    done = attest(env={**os.environ, "JIGCMD_STATE_DIR": str(default)})
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"jigcmd attest: no operation 'op-1' of run 'run-1' in {default}\n"
    assert not default.exists()


def test_a_state_directory_without_a_journal_gets_none(tmp_path: Path) -> None:
    """An empty state directory: status 1, no such operation, and still no journal in it."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    done = attest("--state-dir", str(state))
    assert done.returncode == 1, done.stderr
    assert "no operation 'op-1' of run 'run-1'" in done.stderr
    assert list(state.iterdir()) == []
