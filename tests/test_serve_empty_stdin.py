"""`jigcmd serve` whose stdin ends before any request says so on stderr (and still exits 0).

A container engine's `run` without `-i`, or a host that spawns the server with a closed
stdin, gives it an empty input: the session ends at once, and without this line nothing
would say why nothing was answered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

_LINE = "jigcmd serve: stdin closed before any request: nothing to answer"
_PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def _serve(tmp_path: Path, stdin: bytes) -> subprocess.CompletedProcess[str]:
    binding = admit_example(tmp_path)
    done = subprocess.run(
        [
            sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding),
            "--state-dir", str(tmp_path / "state"),
        ],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    return done


def test_an_empty_stdin_is_named_on_stderr_and_the_exit_status_stays_0(tmp_path: Path) -> None:
    """No request, no answer: one stderr line saying why, exit status 0, nothing on stdout."""
    done = _serve(tmp_path, b"")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.startswith(_LINE)]
    assert len(lines) == 1, done.stderr


def test_a_session_that_read_a_request_ends_without_that_line(tmp_path: Path) -> None:
    """A ping answered, then EOF: the ordinary end, nothing more on stderr about stdin."""
    done = _serve(tmp_path, _PING)
    assert done.returncode == 0, done.stderr
    assert '"id":1' in done.stdout
    assert _LINE not in done.stderr
