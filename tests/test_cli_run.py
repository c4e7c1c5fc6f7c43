"""`jigcmd run` as a subprocess on the bundled example: exit statuses and the printed evidence.

The exit status says what happened to the call (0 evidence, 2 invalid input, 3 operational
failure), never the candidate's own exit code, which is in the evidence.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import jigcmd
from jigcmd.evidence import Evidence

pytestmark = pytest.mark.envelope

EXAMPLE = Path(jigcmd.__file__).parent / "example"
BINDING = EXAMPLE / "binding.toml"
CANDIDATES = EXAMPLE / "candidates"


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example Binding admitted into a fresh lock; the envelope must be buildable here."""
    doctor = jigcmd_cli("doctor")
    if doctor.returncode != 0:
        reason = f"jigcmd doctor says the envelope cannot be built:\n{doctor.stdout}"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    path = tmp_path_factory.mktemp("lock") / "jigcmd.lock"
    jigcmd_cli("lock", "--binding", str(BINDING), "--lock", str(path), check=True)
    return path


def jigcmd_cli(
    *args: str, check: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def run(
    lock: Path,
    state: Path,
    command: str,
    files: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return jigcmd_cli(
        "run",
        "--binding",
        str(BINDING),
        "--lock",
        str(lock),
        "--state-dir",
        str(state),
        command,
        "--files",
        str(files),
        *extra,
        env=env,
    )


def evidence(done: subprocess.CompletedProcess[str]) -> Evidence:
    """The one evidence object `--json` printed, decoded strictly."""
    return msgspec.json.decode(done.stdout, type=Evidence)


def test_passing_tests_exit_0_with_evidence_of_exit_code_0(lock: Path, tmp_path: Path) -> None:
    """The passing candidate's tests: status 0, evidence exitCode 0, cleanup complete."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "passing", "--json")
    assert done.returncode == 0, done.stderr
    found = evidence(done)
    assert (found.command, found.exit_code, found.stop_reason, found.cleanup) == (
        "tests",
        0,
        "exited",
        "complete",
    )
    assert found.invocation == ["bun", "test", "test/project.test.ts"]
    assert "1 pass" in found.stderr.text


def test_failing_tests_still_exit_0_with_evidence_of_exit_code_1(
    lock: Path, tmp_path: Path
) -> None:
    """A failing test is evidence, not a failure of jigcmd: status 0, evidence exitCode 1."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "failing", "--json")
    assert done.returncode == 0, done.stderr
    found = evidence(done)
    assert (found.exit_code, found.stop_reason) == (1, "exited")
    assert "1 fail" in found.stderr.text


def test_a_cli_command_gets_its_arguments_and_stdin(lock: Path, tmp_path: Path) -> None:
    """Arguments after `--` (even Bun-looking ones) and the stdin file reach the script as given."""
    stdin = tmp_path / "stdin.txt"
    stdin.write_text("first\nsecond \u00e9\n", encoding="utf-8")
    args = ["--smol", "-e", "a b"]
    done = run(
        lock,
        tmp_path / "state",
        "cli",
        CANDIDATES / "passing",
        "--stdin-file",
        str(stdin),
        "--json",
        "--",
        *args,
    )
    assert done.returncode == 0, done.stderr
    found = evidence(done)
    assert found.invocation == ["bun", "src/cli.ts", *args]
    assert json.loads(found.stdout.text) == {"args": args, "records": ["first", "second \u00e9"]}


def test_the_readable_summary_names_the_outcome_and_resources(lock: Path, tmp_path: Path) -> None:
    """Without --json the summary says how it ended and what it used."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "failing")
    assert done.returncode == 0, done.stderr
    assert "ended:      exit code 1 (stop reason: exited, cleanup: complete)" in done.stdout
    assert "resources:" in done.stdout


def test_invalid_input_exits_2_and_nothing_runs(lock: Path, tmp_path: Path) -> None:
    """A candidate with a reserved directory is refused before any envelope: status 2."""
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "node_modules").mkdir()
    (files / "node_modules" / "evil.js").write_text("module.exports = 1\n")
    state = tmp_path / "state"
    done = run(lock, state, "tests", files, "--json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "INVALID_INPUT" in done.stderr
    assert "node_modules" in done.stderr
    # Every envelope first reserves a slot under the state directory; none ever was.
    assert list((state / "slots").glob("*")) == []


def test_arguments_for_a_test_command_exit_2(lock: Path, tmp_path: Path) -> None:
    """A test command accepts no arguments: status 2, nothing printed on stdout."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "passing", "--json", "--", "--bail")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "INVALID_INPUT" in done.stderr


def test_an_unadmitted_binding_exits_3(lock: Path, tmp_path: Path) -> None:
    """Without a lock the command is unavailable: status 3, the reason on stderr, no evidence."""
    done = run(tmp_path / "missing.lock", tmp_path, "tests", CANDIDATES / "passing", "--json")
    assert done.returncode == 3
    assert done.stdout == ""
    assert "UNAVAILABLE" in done.stderr
    assert "jigcmd lock" in done.stderr


def test_tracing_marks_every_process_of_the_envelope_and_never_the_evidence(
    lock: Path, tmp_path: Path
) -> None:
    """JIGCMD_TRACE=1: stage marks from the server down to the candidate, none in its stderr."""
    trace_env = {**os.environ, "JIGCMD_TRACE": "1"}
    done = run(lock, tmp_path / "state", "tests", CANDIDATES / "passing", "--json", env=trace_env)
    assert done.returncode == 0, done.stderr
    evidence = msgspec.json.decode(done.stdout, type=Evidence)
    assert evidence.exit_code == 0
    assert "jigcmd-trace" not in evidence.stderr.text + evidence.stdout.text
    lines = [line.split(None, 4) for line in done.stderr.splitlines() if "jigcmd-trace" in line]
    labels = {fields[4] for fields in lines}
    # Every mark carries the marking process's CPU time so far (ms).
    assert all(float(fields[3]) >= 0 for fields in lines)
    for stage in ("service: run", "supervisor: launch", "init: go", "candidate: gate open"):
        assert stage in labels, sorted(labels)
