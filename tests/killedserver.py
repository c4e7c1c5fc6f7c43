"""A server killed (SIGKILL) with its operation open: its row stays `running`, its liveness
file stays behind with its lock free, as after a crash."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["kill_a_server_mid_run"]

_SERVER = """
import os, signal, sys
from pathlib import Path
from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.journal.identity import current
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
journal = Journal.open(prepare_state_dir(Path(sys.argv[1])))
journal.begin(NewRow(root_run="run-k", operation_id="op-killed", signature="sig",
                     context="session", deadline_unix_ms=1_900_000_000_000, run_id="d" * 16))
journal.record_envelope("op-killed", root_run="run-k", supervisor=current(), cgroup_paths=(),
                        netns="none")
os.kill(os.getpid(), signal.SIGKILL)
"""


def kill_a_server_mid_run(state: Path) -> None:
    """Leave operation `op-killed` of run `run-k` open in `state` by a process now dead."""
    done = subprocess.run(
        [sys.executable, "-c", _SERVER, str(state)], capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
