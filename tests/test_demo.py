"""`jigcmd demo`: the whole account against real servers, and how a broken server is reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.demo_wire import ServerChild, WireError


def test_a_server_that_exits_before_answering_is_reported_with_its_stderr(tmp_path: Path) -> None:
    """The demo's client names the request left unanswered, the exit status and the stderr."""
    missing = tmp_path / "absent.toml"
    with ServerChild(missing, timeout=60) as server, pytest.raises(WireError) as caught:
        server.request("initialize", {})
    assert "before answering initialize" in str(caught.value)
    assert "jigcmd serve:" in caught.value.stderr


@pytest.mark.envelope
def test_the_demo_runs_every_step_as_expected() -> None:
    """`python -m jigcmd demo` exits 0 and shows each step's key result."""
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("required under CI but unavailable: needs root", pytrace=False)
        pytest.skip("needs root")
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "admitted: wrote " in out
    assert "<- tests: " in out
    assert "<- cli: " in out
    assert "`bun test test/project.test.ts`: exit code 0, stop reason exited" in out
    assert "`bun test test/project.test.ts`: exit code 1, stop reason exited" in out
    assert "Received: 3" in out
    assert '{"args":["--greeting","hi"],"records":["a","b"]}' in out
    assert "| contained " in out
    assert "ESCAPED" not in out
    assert "INVALID_INPUT: /files/..~1outside.ts" in out
    assert '"result":{"value":{"candidateDigest":' in out
    assert "resources: wall " in out
    assert out.count("server exited with status 0") == 2
    assert "demo: every step behaved as expected." in out
