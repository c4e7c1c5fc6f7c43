"""Liveness across PID namespaces: alive while its lock in the state directory is held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jigcmd.journal import identity, liveness
from jigcmd.journal.failures import JournalUnusable
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.store import Journal

# Holds the lock of a made-up identity of another PID namespace, says so, then waits.
_HOLDER = """
import fcntl, os, sys
path = sys.argv[1]
os.makedirs(os.path.dirname(path), exist_ok=True)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""

# Holds its own lock, forks a child that exits normally (atexit runs), then reports.
_FORKER = """
import os, sys
from jigcmd.journal import identity, liveness
state = sys.argv[1]
liveness.hold(state)
child = os.fork()
if child == 0:
    sys.exit(0)
os.waitpid(child, 0)
path = liveness.lock_path(state, identity.current())
print(os.path.exists(path))
"""


def _elsewhere() -> ProcessIdentity:
    """An identity of a PID namespace that is not ours."""
    me = identity.current()
    return me._replace(pid=4242, pidns=me.pidns + 1)


def test_another_namespaces_process_is_alive_while_its_lock_is_held(tmp_path: Path) -> None:
    """Held: alive; its holder SIGKILLed: dead, and its file removed by who found it so."""
    who = _elsewhere()
    path = liveness.lock_path(tmp_path, who)
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            assert liveness.alive(tmp_path, who)
            assert os.path.exists(path)
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
    assert not liveness.alive(tmp_path, who)
    assert not os.path.exists(path)


def test_another_namespaces_process_without_a_file_is_dead(tmp_path: Path) -> None:
    """No lock file: it never held one here, or it died and was found so."""
    assert not liveness.alive(tmp_path, _elsewhere())


def test_a_hold_is_counted_and_the_last_release_removes_the_file(tmp_path: Path) -> None:
    """Two holders in one process share one lock; the file goes with the last."""
    path = liveness.lock_path(tmp_path, identity.current())
    first = liveness.hold(tmp_path)
    second = liveness.hold(tmp_path)
    assert first == second and os.path.exists(path)
    liveness.release(first)
    assert os.path.exists(path)
    liveness.release(second)
    assert not os.path.exists(path)


def test_a_forked_childs_exit_leaves_its_parents_lock(tmp_path: Path) -> None:
    """A child exiting normally (its atexit handlers run) removes nothing of its parent's."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKER, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"


def test_prune_removes_the_files_of_the_dead_only(tmp_path: Path) -> None:
    """`recover`'s sweep: a free lock's file goes, a held one's stays."""
    held = liveness.hold(tmp_path)
    dead = liveness.lock_path(tmp_path, _elsewhere())
    Path(dead).touch()
    try:
        assert liveness.prune(tmp_path) == [os.path.basename(dead)]
        assert os.listdir(tmp_path / liveness.DIRECTORY) == [
            os.path.basename(liveness.lock_path(tmp_path, identity.current()))
        ]
    finally:
        liveness.release(held)


def test_a_journal_whose_lock_cannot_be_held_is_refused_naming_it(tmp_path: Path) -> None:
    """Nothing recorded under an identity no other namespace could see alive."""
    (tmp_path / liveness.DIRECTORY).touch()  # a file where the directory belongs
    with pytest.raises(JournalUnusable, match="cannot hold this process's liveness lock in"):
        Journal.open(tmp_path)


def test_first_holds_from_several_threads_at_once_share_one_lock(tmp_path: Path) -> None:
    """Journals open in worker threads: one lock, not a second one waiting on the first."""
    barrier = threading.Barrier(8)
    keys: list[liveness.Key] = []

    def opener() -> None:
        barrier.wait()
        keys.append(liveness.hold(tmp_path))

    threads = [threading.Thread(target=opener, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    # A failsafe, never a timing claim: a second lock on the file would wait for ever.
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert len(keys) == 8 and len(set(keys)) == 1
    assert len(os.listdir(tmp_path / liveness.DIRECTORY)) == 1
    for key in keys:
        liveness.release(key)
    assert os.listdir(tmp_path / liveness.DIRECTORY) == []


def test_a_fifo_under_a_lock_name_blocks_nothing_and_is_counted_alive(tmp_path: Path) -> None:
    """A FIFO planted in the live directory: `jigcmd recover` (which sweeps it) finishes at
    once, and the name it took is read as alive (never a guessed death), not removed."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    planted = liveness.lock_path(state, _elsewhere())
    os.makedirs(os.path.dirname(planted), mode=0o700, exist_ok=True)
    os.mkfifo(planted, 0o600)
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(state)],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert liveness.alive(state, _elsewhere())
    assert os.path.exists(planted)
