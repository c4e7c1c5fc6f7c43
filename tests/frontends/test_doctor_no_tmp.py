"""The doctor's end-to-end probe stages where serve and run do (r32 ct 1).

In a read-only-root container with a writable state directory (`--read-only --tmpfs
/var/lib/jigcmd`) there is no temporary directory at all: run and serve stage under the
state directory and work, and the doctor's probe must not fail for want of /tmp.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.frontends.namespaced_doctor import doctor_after
from tests.frontends.test_doctor_cli import checks

pytestmark = pytest.mark.envelope


def test_the_end_to_end_probe_runs_without_a_temporary_directory(tmp_path: Path) -> None:
    """/tmp, /var/tmp and the working directory read-only, the state directory writable:
    the probe runs, and the scratch directory it staged in is gone afterwards."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    # /tmp read-only but for the state directory (its own mount, made writable first).
    setup = "\n".join(
        [
            "mount --bind /tmp /tmp",
            f"mount --bind {state} {state}",
            "mount -o remount,bind,ro /tmp",
            "mount -t tmpfs -o ro jigcmd-r32E-vartmp /var/tmp",
            "[ ! -d /usr/tmp ] || mount -t tmpfs -o ro jigcmd-r32E-usrtmp /usr/tmp",
        ]
    )
    done = doctor_after(setup, "--json", "--state-dir", str(state), home=tmp_path, cwd="/proc")
    assert done.stdout, done.stderr
    line = checks(done)["end-to-end"]
    assert "No usable temporary directory" not in line["detail"], line
    assert line["status"] == "ok", line
    assert os.listdir(state) == []
