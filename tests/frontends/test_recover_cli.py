"""`jigcmd recover` as a person types it: a mistyped state directory, other directories' jobs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.plan import Limits
from tests.durable.recovering import real_backend

__all__ = ["real_backend"]  # the fixture, from tests/durable/recovering.py


def recover(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "recover", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip


def test_a_state_directory_that_does_not_exist_is_refused_and_not_created(
    tmp_path: Path,
) -> None:
    """A typo is status 2 naming it; before, it was created and "nothing to recover"."""
    typo = tmp_path / "stat"
    done = recover("--state-dir", str(typo))
    assert done.returncode == 2
    assert done.stderr.startswith(f"jigcmd recover: --state-dir {typo}: no such directory")
    assert not typo.exists()


def test_a_default_state_directory_not_made_yet_has_nothing_to_recover(tmp_path: Path) -> None:
    """No --state-dir and none made yet: status 0, said so, still nothing created."""
    default = tmp_path / "state"
    done = recover(env={**os.environ, "JIGCMD_STATE_DIR": str(default)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"nothing to recover: no state directory at {default} yet\n"
    assert not default.exists()


def test_other_state_directories_jobs_are_one_summary_line(
    tmp_path: Path, real_backend: CgroupBackend
) -> None:
    """Two live-looking jigcmd jobs no row names: one "left alone" line, not one per job."""
    jobs = [real_backend.create(f"jigcmd-{uuid.uuid4().hex[:16]}", Limits()) for _ in range(2)]
    try:
        (tmp_path / "state").mkdir(mode=0o700)
        done = recover("--state-dir", str(tmp_path / "state"))
        assert done.returncode == 0, done.stdout + done.stderr
        left = [line for line in done.stdout.splitlines() if line.startswith("left alone")]
        assert len(left) == 1, done.stdout
        assert "not this recovery's business" in left[0]
        # Other tests on this machine may hold jobs too: at least these two are counted.
        count = int(left[0].split()[2])
        assert count >= 2, left[0]
        if count <= 3:
            assert all(job.name in left[0] for job in jobs)
    finally:
        for job in jobs:
            with contextlib.suppress(OSError):
                job.remove()
