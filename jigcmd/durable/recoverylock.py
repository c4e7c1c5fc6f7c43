"""One recovery pass at a time per state directory, across threads and processes.

A pass holds an exclusive `flock` on `<state dir>/recovery.lock` from its first journal write
to its last. Two passes at once would release the same cgroup jobs twice (the second one
reading a job that vanished under it as a cleanup it could not confirm), and a row a pass
has closed but not yet fenced (`recovery.pending`) is final only once that pass ends: a
waiter seeing such a row asks `running` whether a live process is still at it (the lock is
held), and runs a pass itself when none is (the one that closed it died mid-pass).

A waiter waits at most `WAIT_LIMIT` (`held_within`), then runs its pass anyway: a holder
can be stopped for good (SIGSTOP, `docker pause`, Ctrl-Z), and start-up must not hang on it.

Each acquisition opens the file anew: a flock belongs to an open file description, so two
threads of one process exclude each other as two processes do, and a process's death
(SIGKILL included) releases its lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from jigcmd.journal import statefiles
from jigcmd.journal.failures import JournalUnusable

__all__ = [
    "LOCK_NAME",
    "WAIT_LIMIT",
    "LockUnusable",
    "held",
    "held_within",
    "holder",
    "holder_pid",
    "running",
]

LOCK_NAME = "recovery.lock"

# How long start-up and `jigcmd recover` wait for another process's pass. A live pass ends
# within about the supervisor grace (3 s) plus 2 s a job; a stopped holder never does, and
# waiting for it hung every start-up. Past this the pass runs anyway, as before the lock
# existed: two passes at once only risk a spurious "could not confirm" for a job the other
# released.
WAIT_LIMIT = 5.0


class LockUnusable(JournalUnusable):
    """The pass lock file cannot be opened: the message names it, why and the fix (never
    the journal's: it is whole, and moving it away would lose every record)."""

    def __init__(self, path: Path, cause: str, fix: str) -> None:
        super().__init__(path, cause, fix)
        self.args = (f"recovery pass lock {path}: {cause}; fix: {fix}",)

    def __str__(self) -> str:
        return str(self.args[0])


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


@contextlib.contextmanager
def held_within(state_dir: Path, limit: float, waiting: Callable[[str], None]) -> Iterator[bool]:
    """Hold the pass lock for the block, waiting at most `limit` s (`waiting(holder)` is told
    once, as the wait starts): False when it was not had in time (run the block anyway)."""
    fd = _open(state_dir)
    try:
        if not _take(fd):
            waiting(holder(state_dir))
            end = time.monotonic() + limit
            while not _take(fd):
                if time.monotonic() >= end:
                    yield False
                    return
                time.sleep(0.05)
        yield True
    finally:
        os.close(fd)  # releases the lock


def holder(state_dir: Path) -> str:
    """Who holds the pass lock, in words: its pid when /proc/locks shows it, else the file."""
    pid = holder_pid(state_dir)
    where = state_dir / LOCK_NAME
    return f"pid {pid} ({where})" if pid is not None else f"another process ({where})"


def holder_pid(state_dir: Path) -> int | None:
    """The pid holding the pass lock, from /proc/locks; None if none is seen (or unreadable).

    Takes no lock and creates nothing (doctor reads it): the lock file is matched by inode.
    """
    try:
        st = os.lstat(state_dir / LOCK_NAME)
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return None
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters' lines have "->" in [1].
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key:
            pid = int(fields[4]) if fields[4].isdigit() else 0
            return pid or None  # 0: a process of a PID namespace this one cannot see
    return None


def _take(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def running(state_dir: Path) -> bool:
    """Whether a live process (this one included) is running a recovery pass now."""
    with held(state_dir, wait=False) as mine:
        return not mine


def _open(state_dir: Path) -> int:
    where = os.path.join(state_dir, LOCK_NAME)
    flags = os.O_RDWR | os.O_CREAT
    dir_fd = statefiles.directory_fd(state_dir)  # its faults are the state directory's
    try:
        return statefiles.open_regular(dir_fd, LOCK_NAME, flags, where)
    except OSError as exc:
        raise _unusable(Path(where), exc) from exc


def _unusable(where: Path, exc: OSError) -> LockUnusable:
    # Something other than the regular file jigcmd makes: it holds nothing, so removing it
    # loses nothing (a symbolic link is never followed, a FIFO never waited on).
    if exc.errno == errno.ELOOP:
        return LockUnusable(where, "it is a symbolic link (never followed)", f"remove {where}")
    if exc.errno in (errno.EISDIR, errno.EINVAL, errno.ENXIO):
        cause = "it is not a regular file (a directory, FIFO or device)"
        return LockUnusable(where, cause, f"remove {where}; jigcmd makes it anew, empty")
    cause = exc.strerror or str(exc)
    return LockUnusable(where, cause, f"check {where.parent} (permissions, disk, mounts)")
