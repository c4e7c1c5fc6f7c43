"""Whether a recorded process is alive from any PID namespace: a flock each owner holds for life.

jigcmd processes sharing a state directory may live in different PID namespaces (containers,
or a host process and a container) on one kernel; a pid read in one names nothing, or an
unrelated process, in another. So every process whose identity the state directory records
as an owner or a supervisor holds an exclusive `flock` on `<state dir>/live/<identity>`
from before it records it until nothing of it runs: a server, `jigcmd run` or jarvis while
its journal is open (`Journal.open` takes it; the fronts close the journal last), a zygote
for its life (`ledger.Registry.hold_liveness`). The kernel
drops a flock when the last descriptor of its open file goes, at any death, SIGKILL
included, and flocks are shared by every mount of one filesystem (bind mounts too), so:
the file's lock is held → that process is alive; it is free, or there is no file → it is
dead. Its own namespace asks /proc instead (exact there, and the answer for identities
recorded before this file existed).

The descriptor is close-on-exec and taken after the process's start-time forks (a zygote
takes it after forking its spawner, which closes every descriptor but its socket, as each
pid 1 does), so no child that could outlive the owner shares it. Whoever finds the lock
free removes the file while holding it (never a successor's: one name is one identity).
The directory is 0700 and each file 0600: only the state directory's user (and root) can
hold or probe a lock, so no one else can make a dead owner look alive. NFS is out of scope:
its locks are not the local kernel's.
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import fcntl
import os
import stat
import time

from jigcmd.journal import identity
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.statefiles import directory_fd, subdirectory

__all__ = ["DIRECTORY", "Key", "alive", "hold", "lock_path", "prune", "release", "wait_exit"]

DIRECTORY = "live"
# How often `wait_exit` looks at another namespace's lock (it has no pidfd to poll).
_POLL_S = 0.02
# A state directory, by device and inode (a path may change; a symlink may name it twice).
Key = tuple[int, int]


class _Lock:
    """One held lock (a plain class: the zygote imports this, and no `dataclasses`)."""

    __slots__ = ("directory", "fd", "holders", "name", "pid")

    def __init__(self, fd: int, directory: int, name: str) -> None:
        # The process that took it: a forked child inherits the entry, not the lock.
        self.pid = os.getpid()
        self.fd = fd
        # The held `live` directory's descriptor and the file's name in it.
        self.directory = directory
        self.name = name
        # How many of this process's users still need it.
        self.holders = 1


_held: dict[Key, _Lock] = {}
# Journals are opened in worker threads: two first holds at once would take two locks on
# one file, and the second would wait for the first for ever.
_guard = _thread.allocate_lock()


def _name(who: ProcessIdentity) -> str:
    return f"{who.boot_id}.{who.pidns}.{who.pid}.{who.start}"


def lock_path(state_dir: str | os.PathLike[str], who: ProcessIdentity) -> str:
    """The file whose lock `who` holds while it lives."""
    return os.path.join(os.fspath(state_dir), DIRECTORY, _name(who))


def hold(state_dir: str | os.PathLike[str]) -> Key:
    """Hold this process's liveness lock in `state_dir` until `release` (OSError if it cannot).

    Counted: one lock per process and state directory, however many hold it; a process that
    records its identity holds it from before the first record until nothing of it runs.
    """
    with _guard:
        return _hold(state_dir)


def _hold(state_dir: str | os.PathLike[str]) -> Key:
    info = os.fstat(directory_fd(state_dir))
    key = (info.st_dev, info.st_ino)
    entry = _held.get(key)
    if entry is not None and entry.pid == os.getpid():
        entry.holders += 1
        return key
    if entry is not None:
        # A forked child's copy of its parent's descriptor: the lock is the parent's.
        del _held[key]
        os.close(entry.fd)
    directory = _directory(state_dir, create=True)
    assert directory is not None  # made when missing
    name = _name(identity.current())
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            fd = os.open(name, flags, 0o600, dir_fd=directory)
        except OSError as exc:
            # Opened beside its directory's descriptor: the error would name the file alone.
            path = os.path.join(os.fspath(state_dir), DIRECTORY, name)
            raise OSError(exc.errno, exc.strerror, path) from exc
        # Blocking: only a prober holds it, for a moment.
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _still_named(fd, directory, name):
            break
        # A prune removed the file between our open and our lock: make it again.
        os.close(fd)
    if not _held:
        atexit.unregister(_release_all)  # registered once, however often entries come and go
        atexit.register(_release_all)
    _held[key] = _Lock(fd, directory, name)
    return key


def release(key: Key) -> None:
    """One holder of this process's lock is done; the last one removes the file and unlocks."""
    with _guard:
        _release(key)


def _release(key: Key) -> None:
    entry = _held.get(key)
    if entry is None or entry.pid != os.getpid():
        return
    entry.holders -= 1
    if entry.holders == 0:
        del _held[key]
        _let_go(entry)


def _release_all() -> None:
    """At a clean exit: remove this process's files (a fork's exit leaves its parent's alone)."""
    for entry in _held.values():
        if entry.pid == os.getpid():
            _let_go(entry)
    _held.clear()


def _let_go(entry: _Lock) -> None:
    # Removed while still locked: a prober that opened it meanwhile finds it free once we
    # close, and its own removal then finds nothing to remove.
    with contextlib.suppress(OSError):
        os.unlink(entry.name, dir_fd=entry.directory)
    os.close(entry.fd)


def _directory(state_dir: str | os.PathLike[str], *, create: bool) -> int | None:
    """The held descriptor of `<state_dir>/live`, checked (`jigcmd.journal.statefiles`)."""
    return subdirectory(state_dir, DIRECTORY, create=create)


def _still_named(fd: int, directory: int, name: str) -> bool:
    """Whether `name` in `directory` is still the file open at `fd`."""
    try:
        named = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def alive(state_dir: str | os.PathLike[str], who: ProcessIdentity, *, tidy: bool = True) -> bool:
    """Whether the process `who`, recorded in `state_dir`, is still alive, whatever its namespace.

    Errs towards alive when it cannot tell (a file it may not open): a live owner's run is
    never fenced on a guess; a dead one's is, by whoever can take its lock. With `tidy`
    false (a verb that changes nothing: `runs`, `doctor`) a dead one's file is left.
    """
    if who.boot_id != identity.boot_id():
        return False
    if identity.local(who):
        if identity.is_alive(who):
            return True
        if tidy:
            _remove_if_free(state_dir, _name(who))
        return False
    directory = _directory(state_dir, create=False)
    return directory is not None and _locked(directory, _name(who), tidy=tidy)


def _locked(directory: int, name: str, *, tidy: bool = True) -> bool:
    """Whether some process holds the lock of `name` in `directory`; a free one's is removed
    when `tidy`."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        # Non-blocking: a FIFO planted under that name would block a plain open for ever.
        fd = os.open(name, flags, dir_fd=directory)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True  # not a lock file jigcmd made: never read as a death, never removed
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # held (EWOULDBLOCK), or no lock to be had here: never a guess of death
        # Ours: its owner is dead (a process records its identity only once it holds this
        # lock, and no process ever takes a dead identity's name again). An owner still
        # between making its file and locking it finds the file gone and makes it again.
        if tidy and _still_named(fd, directory, name):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory)
        return False
    finally:
        os.close(fd)


def _remove_if_free(state_dir: str | os.PathLike[str], name: str) -> None:
    """Remove a dead process's file, if it left one (its lock is then free)."""
    directory = _directory(state_dir, create=False)
    if directory is not None:
        _locked(directory, name)


def wait_exit(state_dir: str | os.PathLike[str], who: ProcessIdentity, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `who` to die; True once it is dead."""
    if identity.local(who):
        return identity.wait_exit(who, timeout)
    deadline = time.monotonic() + timeout
    while alive(state_dir, who):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def prune(state_dir: str | os.PathLike[str]) -> list[str]:
    """Remove the files of every dead process (`recover`); the names removed."""
    directory = _directory(state_dir, create=False)
    if directory is None:
        return []
    names = sorted(os.listdir(directory))
    mine = _name(identity.current())
    return [n for n in names if n != mine and not _locked(directory, n)]
