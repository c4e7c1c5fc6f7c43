"""One rule: what jigcmd opens in a state directory, it reaches through one held descriptor.

`durable.statedir` checks a state directory's path from `/` down, opens the directory once
and `anchor`s the descriptor here, held for the process's life. Every sub-directory
(`slots`, `live`, `envelopes`, `resources`) and every file in them is then opened relative
to that descriptor (`dir_fd=`, `O_NOFOLLOW`, `O_CLOEXEC`): a path renamed or re-pointed after
the check cannot redirect a write, and a symbolic link inside is never followed. A
sub-directory is accepted only as a real directory of this user that no one else may write
(`subdirectory`); a file that may be a FIFO or a device is opened `O_NONBLOCK` and refused
unless it is a regular file (`open_regular`), so no verb hangs on it. `runtime`, the staging
tmpfs's mount point, is checked at start as they are, and opened with no link followed
where the zygote mounts on it (`jigcmd.envelope.staging`).

A process that did not check the directory itself (a supervisor or zygote, given its path
by the server that did) anchors it on first use; its parent checked every component.
"""

from __future__ import annotations

import _thread
import errno
import os
import shlex
import stat

__all__ = [
    "StateDirError",
    "anchor",
    "directory_fd",
    "open_regular",
    "subdirectory",
]

# The sub-directories jigcmd makes in a state directory (`runtime`: the staging tmpfs's
# mount point, staging.py, which mounts on it in the zygote's namespace only).
SUBDIRECTORIES = ("slots", "live", "envelopes", "resources", "runtime")


class StateDirError(Exception):
    """Raised when the state directory cannot be created or is not safe to use."""

    def __init__(self, reason: str, fix: str | None = None) -> None:
        super().__init__(reason if fix is None else f"{reason}; {fix}")
        self.reason = reason
        self.fix = fix

    def __reduce__(self) -> tuple[type[StateDirError], tuple[str, str | None]]:
        return type(self), (self.reason, self.fix)


# (pid, path) -> the descriptor: a forked child inherits its parent's (same directory).
_anchors: dict[tuple[int, str], int] = {}
_subdirs: dict[tuple[int, str, str], int] = {}
# The zygote imports this: `_thread`, as `liveness.py` does, and no pathlib.
_guard = _thread.allocate_lock()


def anchor(path: str | os.PathLike[str], fd: int) -> None:
    """Hold `fd`, the checked directory `path`, for this process's life.

    The same directory checked again keeps the first descriptor (the second is closed); a
    directory made anew at that path (the old one removed) replaces it, and the old
    descriptor is left open, since a caller may still hold it.
    """
    with _guard:
        key = (os.getpid(), os.fspath(path))
        held = _anchors.get(key)
        if held is not None and _same(held, fd):
            os.close(fd)
            return
        _anchors[key] = fd
        for stale in [k for k in _subdirs if k[:2] == key]:
            del _subdirs[stale]


def _same(one: int, other: int) -> bool:
    a, b = os.fstat(one), os.fstat(other)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def directory_fd(path: str | os.PathLike[str]) -> int:
    """The held descriptor of state directory `path`, opened and checked now if none is.

    Raises `StateDirError` when the directory is not one of this user's that no one else
    may write.
    """
    key = (os.getpid(), os.path.abspath(path))
    with _guard:
        fd = _anchors.get(key)
        if fd is None:
            fd = _open_checked(key[1], None, key[1])
            _anchors[key] = fd
        return fd


def subdirectory(state: str | os.PathLike[str], name: str, *, create: bool) -> int | None:
    """The descriptor of `<state>/<name>`, checked; made 0700 when missing and `create`.

    None when it is missing and not `create`. Raises `StateDirError` naming it when it is
    not a directory of this user that no one else may write: another user able to write
    `slots/` could plant `slot-0 -> /etc/shadow`.
    """
    parent = directory_fd(state)
    where = os.path.join(os.path.abspath(state), name)
    key = (os.getpid(), os.path.abspath(state), name)
    with _guard:
        fd = _subdirs.get(key)
        if fd is not None:
            return fd
        if create:
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
            except FileExistsError:
                pass
            except OSError as exc:
                fix = None
                if exc.errno == errno.ENOSPC:
                    fix = "free space or inodes (`df -i`) on the filesystem holding it"
                raise StateDirError(f"{where} cannot be created: {exc.strerror}", fix) from exc
        try:
            fd = _open_checked(name, parent, where)
        except FileNotFoundError:
            if create:
                raise
            return None
        _subdirs[key] = fd
        return fd


def open_regular(dir_fd: int, name: str, flags: int, where: str, mode: int = 0o600) -> int:
    """`name` in `dir_fd`, opened with no link followed and refused unless a regular file.

    `O_NONBLOCK` so that a FIFO planted (or left) there cannot hang the open; OSError
    naming `where` for a link or a special file.
    """
    try:
        fd = os.open(
            name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, f"{where} is a symbolic link; remove it") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{where} is not a regular file; remove it")
    return fd


def _open_checked(name: str, parent: int | None, where: str) -> int:
    """A directory descriptor of `name`, refused unless a directory ours no one else writes."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise StateDirError(
                f"{where} is not a directory (a symbolic link or a file)",
                f"remove it (jigcmd makes {os.path.basename(where)} 0700 itself)",
            ) from None
        raise StateDirError(f"{where} cannot be opened: {exc.strerror}") from exc
    try:
        checked(where, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_ours_fix(where: str, kind: str) -> str:
    """What to do about `where`, another user's: root may take it over, anyone else not."""
    if not kind:
        return f"remove it, or run chown {os.geteuid()} {shlex.quote(where)} if it is yours"
    if os.geteuid() == 0:
        # Most often a volume or bind mount that keeps its owner from the host or image.
        return (
            f"run chown -R 0 {shlex.quote(where)} if it is yours (a bind mount or volume keeps its "
            "owner from the host), or use a directory of your own (--state-dir)"
        )
    return "use a directory of your own (--state-dir)"


def checked(where: str, info: os.stat_result, *, kind: str = "") -> None:
    """Refuse a directory `where` (`kind`, e.g. "state directory", prefixes its name) that is
    not this user's or that others may write."""
    named = f"{kind} {where}" if kind else where
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"{named} is not a directory")
    if info.st_uid != os.geteuid():
        raise StateDirError(
            f"{named} is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})",
            _not_ours_fix(where, kind),
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StateDirError(
            f"{named} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})",
            f"run chmod 700 {shlex.quote(where)}"
            if kind
            else f"remove {shlex.quote(where)} (jigcmd makes it again, 0700): another user "
            "may have left files in it",
        )
