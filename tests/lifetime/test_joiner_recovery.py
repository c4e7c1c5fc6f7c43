"""One recovery pass at a time per state directory, as `jigcmd recover` meets it.

A pass holding the state directory's lock (a joiner's whose operation's server is gone, a
starting server's) keeps `jigcmd recover` waiting until it ends.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope


def test_jigcmd_recover_waits_for_a_pass_running_elsewhere(rig: Rig) -> None:
    """A pass holding the state directory's lock (as a joiner's or a starting server's does)
    keeps `jigcmd recover` waiting: two passes at once released the same cgroup jobs, the
    second warning of cleanups it could not confirm (until 2026-12-07)."""
    server = rig.serve()
    assert server.close_input() == 0
    fd = os.open(rig.state_dir / "recovery.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        command = [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(rig.state_dir)]
        recover = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                recover.wait(timeout=3)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        out, _ = recover.communicate(timeout=60)
    finally:
        os.close(fd)
    assert recover.returncode == 0, out
    assert "nothing to recover" in out
    rig.assert_nothing_left()
