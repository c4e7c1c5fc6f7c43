"""`jigcmd run --timeout`, what a deadline still reports, and the hint for a missing `--`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli_run import CANDIDATES, answer, jigcmd_cli, lock, refusal, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

SPIN = (
    'import { test } from "bun:test";\n'
    'test("spins", () => { console.log("started"); while (true) {} });\n'
)


@pytest.fixture
def spinning(tmp_path: Path) -> Path:
    """The example's test path, a test that never ends."""
    path = tmp_path / "spinning"
    (path / "test").mkdir(parents=True)
    (path / "test" / "project.test.ts").write_text(SPIN)
    return path


def test_a_timeout_stops_the_run_and_the_text_keeps_its_resources(
    lock: Path, tmp_path: Path, spinning: Path
) -> None:
    """Status 4, stop reason deadline, what it printed, and the resources: line."""
    done = run(lock, tmp_path / "state", "tests", spinning, "--timeout", "1.5")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "ended:      signal SIGKILL (stop reason: deadline, cleanup: complete)" in done.stdout
    assert "resources:  wall " in done.stdout
    assert "started" in done.stdout
    assert "DEADLINE_EXCEEDED" in done.stderr


def test_a_timeout_under_json_keeps_the_evidence_and_the_report(
    lock: Path, tmp_path: Path, spinning: Path
) -> None:
    """One object: the error, the collected evidence and the report, deadlineHit true."""
    done = run(lock, tmp_path / "state", "tests", spinning, "--timeout", "1", "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    found = refusal(done)
    assert found["error"]["code"] == "DEADLINE_EXCEEDED"
    assert found["evidence"]["stopReason"] == "deadline"
    assert found["report"]["deadlineHit"] is True
    assert found["report"]["wallMs"] > 0


@pytest.mark.parametrize(
    ("seconds", "why"),
    [
        ("0", "at most 10 seconds"),
        ("10.5", "at most 10 seconds"),
        ("-1", "'-1' is not a number of seconds"),
        ("nan", "'nan' is not a number of seconds"),
    ],
)
def test_a_timeout_outside_the_ceiling_is_refused_before_anything_runs(
    lock: Path, tmp_path: Path, seconds: str, why: str
) -> None:
    """More than 0 and at most 10 s, in digits: anything else is status 2, nothing run."""
    state = tmp_path / "state"
    done = run(lock, state, "tests", CANDIDATES / "passing", "--timeout", seconds, "--json")
    assert done.returncode == 2
    error = answer(done)["error"]
    assert error["code"] == "INVALID_INPUT"
    assert why in error["message"]
    assert not state.exists()


def test_a_forgotten_double_dash_gets_the_command_line_with_it() -> None:
    """`… cli --files DIR --greeting hi`: the error shows the same line with `--` in place."""
    files = str(CANDIDATES / "passing")
    done = jigcmd_cli("run", "--binding", "b.toml", "cli", "--files", files, "--greeting", "hi")
    assert done.returncode == 2
    assert (
        "unrecognized arguments: --greeting hi; a command's own arguments follow `--`: "
        f"jigcmd run --binding b.toml cli --files {files} -- --greeting hi"
    ) in done.stderr
