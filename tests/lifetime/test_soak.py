"""The soak script in CI: sequential runs through one server leave every resource flat."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

_SOAK = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def _soak(rig: Rig, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(_SOAK),
            "--binding",
            str(rig.binding),
            "--state-dir",
            str(rig.state_dir),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_sixty_sequential_runs_leave_descriptors_memory_cgroups_and_mounts_flat(rig: Rig) -> None:
    """`scripts/soak.py --runs 60` exits 0: nothing grew beyond its tolerance."""
    done = _soak(rig, "--runs", "60", "--every", "10")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "flat: nothing grew beyond its tolerance" in done.stdout
    assert not rig.rows() or all(row.state == "done" for row in rig.rows().values())


def test_runs_with_large_output_leave_the_servers_memory_flat(rig: Rig) -> None:
    """200 runs writing 60 KiB each: the session keeps no outcome, RSS stays within tolerance."""
    done = _soak(rig, "--runs", "200", "--every", "50", "--output-kib", "60")
    assert done.returncode == 0, done.stdout + done.stderr
