"""`jigcmd run` interrupted: a stop signal is the caller's cancel, answered like `serve`'s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lifetime.candidates import SPIN
from tests.lifetime.watch import Proc, Watch, wait_for
from tests.test_cli_run import BINDING, answer, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py


@pytest.fixture
def watch() -> Iterator[Watch]:
    """A witness of every process the `jigcmd run` child starts."""
    witness = Watch()
    try:
        yield witness
    finally:
        witness.stop()


def _spinning_run(
    lock: Path, tmp_path: Path, watch: Watch, token: str, *extra: str
) -> subprocess.Popen[str]:
    """`jigcmd run … cli -- TOKEN` whose candidate spins; returned once it is running."""
    files = tmp_path / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text(SPIN)
    state = tmp_path / "state"
    options = ["--binding", str(BINDING), "--lock", str(lock), "--state-dir", str(state)]
    command = ["run", *options, "cli", "--files", str(files), *extra, "--", token]
    child = subprocess.Popen(
        [sys.executable, "-m", "jigcmd", *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch.add_root(child.pid)

    def spinning() -> bool:
        # Its line is printed before the loop: CPU time no start-up reaches means it printed
        # (a process merely seen running may not have yet, under load).
        running = _candidates(watch, child, token)
        return any(_cpu_seconds(proc) >= _SPUN_S for proc in running) or child.poll() is not None

    wait_for(spinning, 60, "the candidate spinning")
    return child


# Bun's start-up and the line cost well under this much CPU; the loop after it, soon more.
_SPUN_S = 0.3


def _cpu_seconds(proc: Proc) -> float:
    """User and system CPU time of `proc` so far (0 once it is gone)."""
    try:
        with open(f"/proc/{proc.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    # After the command: state is field 3, utime 14 and stime 15 (proc(5)).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _candidates(watch: Watch, child: subprocess.Popen[str], token: str) -> list[Proc]:
    """The running candidates carrying `token` (its command line carries it too)."""
    return [proc for proc in watch.running(token) if proc.pid != child.pid]


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda signum: signum.name
)
def test_a_stop_signal_fences_the_run_and_answers_cancelled_with_the_evidence(
    lock: Path, tmp_path: Path, watch: Watch, signum: signal.Signals
) -> None:
    """Mid-run: status 4, one JSON object, CANCELLED with what the candidate printed so far."""
    token = f"tok-{uuid.uuid4().hex}"
    child = _spinning_run(lock, tmp_path, watch, token, "--json")
    child.send_signal(signum)
    stdout, stderr = child.communicate(timeout=60)
    done = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    assert done.returncode == 4, stdout + stderr
    found = answer(done)
    assert set(found) == {"error", "evidence", "report", "attestation"}, found
    assert found["error"]["code"] == "CANCELLED"
    assert found["evidence"]["stopReason"] == "cancelled"
    assert found["evidence"]["cleanup"] == "complete"
    assert f"spinning {token}" in found["evidence"]["stdout"]["text"]
    assert "Traceback" not in stderr
    assert not _candidates(watch, child, token), "the candidate outlived jigcmd run"


def test_a_stop_signal_without_json_prints_how_the_run_ended(
    lock: Path, tmp_path: Path, watch: Watch
) -> None:
    """The text answer: stop reason cancelled, both streams so far, the reason on stderr."""
    token = f"tok-{uuid.uuid4().hex}"
    child = _spinning_run(lock, tmp_path, watch, token)
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 4, stdout + stderr
    assert "(stop reason: cancelled, cleanup: complete)" in stdout
    assert f"spinning {token}" in stdout
    assert "jigcmd run: CANCELLED: " in stderr
