"""The hostile-peer soak in CI: serve's memory stays bounded, jarvis answers under its floods."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.jarvis.jarvis_child import machine_runs_jarvis

pytestmark = pytest.mark.slow

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "soak_hostile.py"


def test_refused_calls_and_a_peer_that_never_reads_keep_the_servers_memory_bounded() -> None:
    """`scripts/soak_hostile.py` exits 0: both phases stayed within their RSS bound."""
    done = subprocess.run(
        [
            *(sys.executable, str(_SCRIPT), "--only", "serve"),
            *("--refused", "20000", "--pings", "2000000"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bounded: memory stayed within its bound" in done.stdout


def test_jarvis_answers_its_callers_under_half_open_concurrent_and_slow_body_floods() -> None:
    """`soak_hostile.py --only jarvis` exits 0 and prints held, answered, p99 and RSS."""
    machine_runs_jarvis()
    done = subprocess.run(
        [
            *(sys.executable, str(_SCRIPT), "--only", "jarvis"),
            *("--half-open", "1000", "--concurrent", "300", "--slow", "50"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "jarvis",
        "held",
        "answered",
        "p99",
        "RSS",
        "before",
        "RSS",
        "after",
    ]
    assert [line.split()[0] for line in lines[1:4]] == ["half-open", "concurrent", "slow"]
    assert "50 of 50" in lines[1], lines[1]
    assert "bounded: memory stayed within its bound" in done.stdout
