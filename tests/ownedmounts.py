"""Tmpfs mounts a test makes in the host's mount table, owned by the session that made them.

A session killed mid-test (SIGKILL, a job limit, a machine stopped) never reaches its
`finally`: its tmpfs stayed mounted, and every later session on that machine found it (one
under /tmp failed CI: the jarvis test that binds /tmp needs a /tmp holding no mounts). So:

- each mount point is a fresh `/var/tmp/jigcmd-<kind>-<hex>`, outside /tmp, so that a live
  session's mount never shows in another session's /tmp either;
- beside it, an owner file the test process holds an `flock` on while the mount lives
  (its pid is written in it for a person): a lock, not the pid, says whether the owner
  lives, so a session in another pid namespace, or a reused pid, never misjudges it;
- each session first unmounts the `jigcmd-` tmpfs mounts whose owner file it can lock: their
  owner is gone. A mount without an owner file is never touched: nothing says whose it is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

from jigcmd.envelope import syscalls as sc

__all__ = ["OWNER_SUFFIX", "PARENT", "fresh_point", "mount_points", "sweep_stale", "tmpfs"]

OWNER_SUFFIX = ".jigcmd-owner"
PARENT = Path("/var/tmp")


def fresh_point(kind: str) -> Path:
    """A mount point's path no one uses: `/var/tmp/jigcmd-<kind>-<hex>` (not made here)."""
    return PARENT / f"jigcmd-{kind}-{uuid.uuid4().hex[:12]}"


def _owner(point: Path) -> Path:
    return point.with_name(point.name + OWNER_SUFFIX)


@contextlib.contextmanager
def tmpfs(point: Path, source: str, options: str, flags: int = 0) -> Iterator[Path]:
    """Make `point` and mount a tmpfs `source` there, owned by this process; undone after.

    Raises `OSError` when the mount is refused, with nothing left behind.
    """
    if not source.startswith("jigcmd-"):
        raise ValueError(f"a test's mount source is named jigcmd-…, not {source!r}")
    point.mkdir()
    flags_owner = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    owner = os.open(_owner(point), flags_owner, 0o600)
    try:
        fcntl.flock(owner, fcntl.LOCK_EX)
        os.write(owner, f"{os.getpid()}\n".encode())
        try:
            sc.mount(source, str(point), "tmpfs", flags, options)
        except OSError:
            _remove(point)
            raise
        try:
            yield point
        finally:
            with contextlib.suppress(OSError):
                sc.umount2(str(point), sc.MNT_DETACH)
            _remove(point)
    finally:
        os.close(owner)


def _remove(point: Path) -> None:
    """Remove `point` (unmounted) and its owner file, the owner's lock still held."""
    with contextlib.suppress(FileNotFoundError):
        point.rmdir()
    _owner(point).unlink(missing_ok=True)


def _unescaped(field: str) -> str:
    """A mountinfo path field with its octal escapes (`\\040` for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match[1], 8)), field)


def mount_points(source_prefix: str = "jigcmd-") -> list[Path]:
    """Points of the tmpfs mounts in this mount namespace whose source starts so."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        for line in table:
            fields = line.split()
            rest = fields[fields.index("-") + 1 :]
            if rest[0] == "tmpfs" and rest[1].startswith(source_prefix):
                points.append(Path(_unescaped(fields[4])))
    return points


def sweep_stale() -> list[Path]:
    """Unmount and remove our tmpfs mounts whose owner is gone; their points.

    Never raises for a mount it cannot judge or undo: a sweep only tidies, and a session
    must not stop over it (that mount is left, as one without an owner file is).
    """
    swept = []
    for point in mount_points():
        with contextlib.suppress(OSError):
            if _sweep(point):
                swept.append(point)
    return swept


def _sweep(point: Path) -> bool:
    """Undo `point` if its owner file is unlocked (its owner died); whether it was."""
    owner = _owner(point)
    try:
        fd = os.open(owner, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        # Still the file the owner made? Otherwise the owner removed it as it ended.
        held, named = os.fstat(fd), owner.stat()
        if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
            return False
        try:
            sc.umount2(str(point), sc.MNT_DETACH)
        except OSError as exc:
            # EINVAL: not a mount point here any more; anything else leaves it in place.
            if exc.errno != errno.EINVAL:
                return False
        _remove(point)
        return True
    finally:
        os.close(fd)
