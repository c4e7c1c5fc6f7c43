"""The hostile-peer soak in CI: refused calls and unread answers leave memory bounded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "soak_hostile.py"


def test_refused_calls_and_a_peer_that_never_reads_keep_the_servers_memory_bounded() -> None:
    """`scripts/soak_hostile.py` exits 0: both phases stayed within their RSS bound."""
    done = subprocess.run(
        [sys.executable, str(_SCRIPT), "--refused", "20000", "--pings", "2000000"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bounded: memory stayed within its bound" in done.stdout
