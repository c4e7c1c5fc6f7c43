"""A v1 hierarchy the jobs never write, mounted read-only, refuses nothing; a job's one does.

Driven through `jigcmd doctor`, whose cgroups line asks the same question the fronts' start
refusal asks (`owncgroup.read_only_mount`), in a private mount namespace of its own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from jigcmd.envelope.cgroups.v1 import V1Backend
from tests.required import unavailable, usable_cgroups


def _doctor_with_read_only(controller: str) -> str:
    """The doctor's cgroups line, `controller`'s hierarchy bound read-only for it alone."""
    backend = usable_cgroups()
    if not isinstance(backend, V1Backend) or controller not in backend.hierarchies:
        unavailable(f"needs a v1 or hybrid host with {controller} mounted")
    if shutil.which("unshare") is None:
        unavailable("needs unshare(1)")
    mount = backend.hierarchies[controller]
    script = f'mount -o remount,bind,ro {mount} && exec "$@"'
    cli = [sys.executable, "-m", "jigcmd.cli", "doctor"]
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *cli],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = [text for text in done.stdout.splitlines() if text[6:].startswith("cgroups ")]
    return line


@pytest.mark.parametrize("controller", ["blkio", "devices", "cpuset"])
def test_a_read_only_hierarchy_no_job_writes_is_not_refused(controller: str) -> None:
    line = _doctor_with_read_only(controller)
    assert "read-only" not in line, line


def test_a_read_only_hierarchy_the_jobs_write_is_refused_naming_it() -> None:
    line = _doctor_with_read_only("memory")
    assert line.startswith("FAIL") and "memory is read-only" in line, line
