"""The recovery pass lock held by a process that never lets go (stopped, paused, wedged).

Start-up and `jigcmd recover` wait for another process's pass at most
`recoverylock.WAIT_LIMIT`, say whose it is, and then recover anyway; before, they hung
without a word for as long as the holder lived.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from jigcmd.durable.recoverylock import LOCK_NAME, WAIT_LIMIT
from tests.lifetime.frames import serve_child
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

# The holder: a process of the test's own that takes the lock and keeps it until killed.
_HOLD = (
    "import fcntl, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)
# What the bound leaves for the pass itself and a slow shared machine.
_MARGIN = 20.0


@pytest.fixture
def holder(rig: Rig) -> Iterator[subprocess.Popen[str]]:
    """A process holding `<state dir>/recovery.lock` (made by a first server's start-up)."""
    rig.serve().close_input(30)
    lock = rig.state_dir / LOCK_NAME
    assert lock.is_file()
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield proc
    finally:
        proc.kill()
        proc.communicate()  # reaps it and closes its pipe


def test_recover_waits_only_the_bound_and_names_the_holder(
    rig: Rig, holder: subprocess.Popen[str]
) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(rig.state_dir)],
        capture_output=True,
        text=True,
        timeout=WAIT_LIMIT + _MARGIN,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"waiting for the recovery pass held by pid {holder.pid}" in done.stderr
    assert "nothing to recover" in done.stdout
    assert took >= WAIT_LIMIT  # it did wait for the holder's pass first


def test_doctor_names_the_holder(rig: Rig, holder: subprocess.Popen[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "doctor", "--state-dir", str(rig.state_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next(x for x in done.stdout.splitlines() if " state " in f" {x} ")
    assert line.startswith("warn"), done.stdout
    assert f"{LOCK_NAME} is held by pid {holder.pid}" in line, line


def test_serve_starts_past_a_held_lock_and_says_whose(
    rig: Rig, holder: subprocess.Popen[str]
) -> None:
    stderr = rig.tmp / "held.stderr"
    server = serve_child(rig.binding, rig.state_dir, stderr, run_id=rig.run_id)
    rig.servers.append(server)
    # Sent at once: answered once start-up recovery is done.
    server.send({"jsonrpc": "2.0", "id": "ready", "method": "ping"})
    server.response("ready", timeout=WAIT_LIMIT + _MARGIN)
    text = stderr.read_text()
    assert f"waiting for the recovery pass of pid {holder.pid}" in text, text
    assert server.close_input(30) == 0


@pytest.mark.parametrize("planted", ["directory", "symlink", "fifo"])
def test_a_lock_that_is_no_regular_file_is_named_with_its_own_fix(rig: Rig, planted: str) -> None:
    """`jigcmd recover` and a starting `serve` name the lock file and say to remove it
    (until 2026-12-07 a directory there was "the journal file", with the fix of moving the
    whole journal away)."""
    rig.serve().close_input(30)
    lock = rig.state_dir / LOCK_NAME
    lock.unlink()
    if planted == "directory":
        lock.mkdir()
    elif planted == "symlink":
        lock.symlink_to(rig.tmp / "jigcmd-elsewhere")
    else:
        os.mkfifo(lock)
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(rig.state_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"jigcmd recover: recovery pass lock {lock}: "), done.stderr
    assert f"fix: remove {lock}" in done.stderr
    assert "journal.sqlite3" not in done.stderr
    server = serve_child(rig.binding, rig.state_dir, rig.tmp / "planted.stderr")
    rig.servers.append(server)
    server.send({"jsonrpc": "2.0", "id": "p", "method": "ping"})
    answer = server.response("p", timeout=60).decode()
    # The wire names the state directory `<state dir>` (its path is the host's).
    named = f"<state dir>/{LOCK_NAME}"
    assert f"recovery pass lock {named}: " in answer and f"fix: remove {named}" in answer, answer
    assert not (rig.tmp / "jigcmd-elsewhere").exists()  # a link is never followed
    if planted == "directory":
        lock.rmdir()
    else:
        lock.unlink()
