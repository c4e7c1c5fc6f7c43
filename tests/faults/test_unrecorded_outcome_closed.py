"""An outcome the full disk could not record: its row ends for every other process once
space returns, while its server lives idle (no next call, no exit)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.faults.disk import SmallDisk
from tests.faults.test_full_disk import _begun, _finish_unrecorded

# A bound on waiting for the server's retries, not a timing claim: they come within seconds.
_FAILSAFE_S = 30.0


def _runs(disk: SmallDisk) -> str:
    """`jigcmd runs` on the disk's state directory, as another process reads it."""
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "runs", "--state-dir", str(disk.path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_a_row_left_uncertain_is_closed_once_space_returns_without_another_call(
    small_disk: SmallDisk,
) -> None:
    """The idle server closes it uncertain itself: `jigcmd runs` no longer shows it open."""
    ownership = _begun(small_disk, "op-1")
    try:
        small_disk.fill()
        _finish_unrecorded(ownership)
        small_disk.free()
        failsafe = time.monotonic() + _FAILSAFE_S
        listed = _runs(small_disk)
        while "uncertain" not in listed and time.monotonic() < failsafe:
            time.sleep(0.2)
            listed = _runs(small_disk)
        assert "op-1  uncertain" in listed, listed
    finally:
        ownership.close()
