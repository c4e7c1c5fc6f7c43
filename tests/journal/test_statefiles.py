"""The state directory's own checks, as a caller meets them through the command line."""

from __future__ import annotations

import os
from pathlib import Path

from tests.admitted_example import jigcmd_cli
from tests.required import require_root


def test_root_is_told_to_chown_a_state_directory_another_uid_owns(tmp_path: Path) -> None:
    """Root may take the directory over (a bind mount's owner is the usual cause): the fix
    names the chown beside a directory of its own."""
    require_root("chown to another uid")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 1234, 1234)
    done = jigcmd_cli("runs", "--state-dir", str(state))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        f"jigcmd runs: state directory {state} is owned by uid 1234, not by this user (uid 0); "
        f"run chown -R 0 {state} if it is yours (a bind mount or volume keeps its owner from "
        "the host), or use a directory of your own (--state-dir)\n"
    )
