"""The VM run's progress: which console lines are stages, and the guest script's own marks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.v2vm import STAGE_MARK, _guest_script, stage_of


@pytest.mark.parametrize(
    ("line", "stage"),
    [
        (
            b"v2vm-stage: guest up, running python -m pytest\r\n",
            "v2vm: guest up, running python -m pytest",
        ),
        (
            b"tests/envelope/test_hostile.py ..s...      [ 40%]\r\n",
            "v2vm: guest pytest tests/envelope/test_hostile.py ..s...      [ 40%]",
        ),
        (
            b"........F.....                 [ 97%]\n",
            "v2vm: guest pytest ........F.....                 [ 97%]",
        ),
        (b"[    1.234567] virtio_net virtio0: probe\r\n", None),
        (b"PASSED tests/v2vm/guest/test_v2_server.py::test_doctor\n", None),
        (b"\r\n", None),
    ],
)
def test_stage_lines_are_the_guests_marks_and_pytests_progress(
    line: bytes, stage: str | None
) -> None:
    """Kernel messages and test output stay in console.log; marks and progress lines are stages."""
    assert stage_of(line) == stage


def test_the_guest_script_marks_its_start_and_the_commands_end(tmp_path: Path) -> None:
    """Before the command, `guest up, running …`; after it, the status; both as stage marks."""
    script = _guest_script(["python", "-m", "pytest"], Path("/repo"), {}, tmp_path)
    lines = script.splitlines()
    assert lines[0] == f"echo '{STAGE_MARK}guest up, running python -m pytest'"
    ended = next(line for line in lines if "command ended with status" in line)
    assert lines.index(ended) > next(i for i, line in enumerate(lines) if "tee" in line)
    assert STAGE_MARK in ended


_LIVE = """
import pytest
from tests.v2vm.test_v2vm import _progress

@pytest.fixture(scope="session")
def vm(pytestconfig):
    _progress(pytestconfig)("v2vm: stage one")

def test_passes(vm):
    pass
"""


def test_the_suites_stage_lines_reach_the_terminal_past_pytests_capture(tmp_path: Path) -> None:
    """A passing test's captured output is dropped: the stage line shows only if written live."""
    (tmp_path / "test_live.py").write_text(_LIVE)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull),
            *("-W", "ignore::pytest.PytestUnknownMarkWarning", str(tmp_path / "test_live.py")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "v2vm: stage one" in done.stdout
