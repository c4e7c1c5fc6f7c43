"""`jigcmd demo`: the whole account against real servers, and how a broken server is reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild, WireError
from tests.required import require_root


def test_a_server_that_cannot_start_answers_with_the_reason_and_then_is_reported_gone(
    tmp_path: Path,
) -> None:
    """A refused start answers each request it reads; once nothing more is asked it ends, and
    the demo's client then reports it gone."""
    missing = tmp_path / "absent.toml"
    with ServeChild(missing, ["--state-dir", str(tmp_path / "state")], timeout=60) as server:
        refused = server.request("initialize", {})
        # Asked again on reading that answer (an SDK's `initialize` after `server/discover`).
        again = server.request("tools/list", {})
        assert server.wait_exit(60) == 2
        with pytest.raises(WireError) as caught:
            server.request("tools/list", {})
    # The peer reads the reason without the host's paths; the operator's stderr has them.
    assert "<binding dir>/absent.toml: cannot be read" in refused["error"]["message"]
    assert str(tmp_path) not in refused["error"]["message"]
    assert again["error"] == refused["error"]
    # Gone before the third request was written, or while it waited for the answer.
    gone = str(caught.value)
    assert "cannot write to the server's stdin" in gone or "before answering tools/list" in gone


@pytest.mark.envelope
def test_the_demo_runs_every_step_as_expected(tmp_path: Path) -> None:
    """`python -m jigcmd demo --state-dir` exits 0, shows each step's key result, and its
    journal is where it was told to be."""
    require_root()
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "demo", "--state-dir", str(tmp_path / "state")],
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
    assert (tmp_path / "state" / "journal.sqlite3").is_file()
