"""Two `jigcmd jarvis` of different PID namespaces on one state directory (containers).

The second starts in a PID namespace of its own (`unshare --pid --fork --mount-proc`) while
the first runs a command: its start-up recovery (`jarvis.startup.recover_at_start`, and the
envelopes' `recover`) must leave the live first one's run alone, which then ends as its own.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest

from jigcmd.journal.store import Journal
from tests.jarvis.jarvis_child import POLICY, JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN, auth, invoke_body, until
from tests.required import unavailable

pytestmark = pytest.mark.envelope

# Failsafes (never timing claims).
ANSWER_S = 60.0


def _running(state_dir: Path) -> list[int]:
    with Journal.open(state_dir) as journal:
        return [run.run_id for run in journal.jarvis_running()]


def _pids_running(argv: list[str]) -> list[int]:
    """The processes running `argv` (its first word as the policy resolved it: a path)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    words = handle.read().decode("utf-8", "replace").split("\0")[:-1]
            except OSError:
                continue
            if words[1:] == argv[1:] and os.path.basename(words[0]) == argv[0]:
                found.append(int(entry))
    return found


def _jarvis_elsewhere(tmp: Path, state_dir: Path) -> None:
    """A second jarvis, in a PID namespace of its own, started (recovery done) and stopped."""
    unshare = shutil.which("unshare")
    if unshare is None:
        unavailable("needs unshare (Debian package util-linux)")
    policy = tmp / "elsewhere-policy.toml"
    policy.write_text(POLICY)
    stderr_path = tmp / "elsewhere.stderr"
    argv = [
        *(unshare, "--pid", "--fork", "--mount-proc", "--kill-child"),
        *(sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(policy)),
        *("--port", "0", "--state-dir", str(state_dir)),
    ]
    env = {**os.environ, "JARVIS_BEARER_TOKEN": TOKEN, "TMPDIR": str(tmp)}
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env
        )
    try:
        deadline = time.monotonic() + ANSWER_S
        # It says it serves once its start-up recovery is over.
        while "serving http://" not in stderr_path.read_text("utf-8", "replace"):
            assert process.poll() is None, stderr_path.read_text("utf-8", "replace")
            assert time.monotonic() < deadline, stderr_path.read_text("utf-8", "replace")
            time.sleep(0.05)
        # To jarvis itself, the namespace's first process (unshare forwards no signal).
        with open(f"/proc/{process.pid}/task/{process.pid}/children", encoding="ascii") as kids:
            (first,) = map(int, kids.read().split())
        os.kill(first, signal.SIGTERM)
        assert process.wait(ANSWER_S) == 0, stderr_path.read_text("utf-8", "replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(ANSWER_S)


async def test_a_jarvis_starting_in_another_pid_namespace_leaves_a_live_ones_run_alone(
    tmp_path: Path,
) -> None:
    """The first jarvis's `sleep` outlives the second's start, and ends as its own."""
    machine_runs_jarvis()
    # A duration no other process runs with, to find the command among the host's processes.
    command = ["sleep", f"{random.randint(400, 900)}.{random.randint(10**5, 10**6)}"]
    with JarvisChild(tmp_path) as jarvis:
        answers: list[httpx.Response] = []
        async with httpx.AsyncClient(base_url=jarvis.base, timeout=ANSWER_S) as http:

            async def call() -> None:
                answers.append(
                    await http.post(
                        "/tools/jarvis.run.create",
                        json=invoke_body("jarvis.run.create", argv=command, timeout_ms=20_000),
                        headers=auth(),
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await until(lambda: len(_pids_running(command)) == 1, within=ANSWER_S)
                (running,) = _running(jarvis.state_dir)
                await anyio.to_thread.run_sync(_jarvis_elsewhere, tmp_path, jarvis.state_dir)
                # Still its own: recorded running, the command alive; then it ends.
                assert _running(jarvis.state_dir) == [running]
                (pid,) = _pids_running(command)
                os.kill(pid, signal.SIGTERM)
        (answer,) = answers
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "exited", answer.json()
        with Journal.open(jarvis.state_dir) as journal:
            run = journal.jarvis_get(running)
        assert run is not None and run.status == "exited", run
        jarvis.signal(signal.SIGTERM)
        assert jarvis.wait(ANSWER_S) == 0, jarvis.stderr()
