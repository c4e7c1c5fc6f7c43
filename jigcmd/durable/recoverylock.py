"""One recovery pass at a time per state directory, across threads and processes.

A pass holds an exclusive `flock` on `<state dir>/recovery.lock` from its first journal write
to its last. Two passes at once would release the same cgroup jobs twice (the second one
reading a job that vanished under it as a cleanup it could not confirm), and a row a pass
has closed but not yet fenced (`recovery.pending`) is final only once that pass ends: a
waiter seeing such a row asks `running` whether a live process is still at it (the lock is
held), and runs a pass itself when none is (the one that closed it died mid-pass).

Each acquisition opens the file anew: a flock belongs to an open file description, so two
threads of one process exclude each other as two processes do, and a process's death
(SIGKILL included) releases its lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from jigcmd.journal import statefiles

__all__ = ["LOCK_NAME", "held", "running"]

LOCK_NAME = "recovery.lock"


@contextlib.contextmanager
def held(state_dir: Path, *, wait: bool) -> Iterator[bool]:
    """Hold the pass lock for the block: True once held; False (not `wait`) if another has it."""
    fd = _open(state_dir)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def running(state_dir: Path) -> bool:
    """Whether a live process (this one included) is running a recovery pass now."""
    with held(state_dir, wait=False) as mine:
        return not mine


def _open(state_dir: Path) -> int:
    where = os.path.join(state_dir, LOCK_NAME)
    flags = os.O_RDWR | os.O_CREAT
    return statefiles.open_regular(statefiles.directory_fd(state_dir), LOCK_NAME, flags, where)
