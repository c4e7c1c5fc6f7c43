"""Tmpfs mounts a test makes in the host's mount table, owned by the session that made them.

A session killed mid-test (SIGKILL, a job limit, a machine stopped) never reaches its
`finally`: its tmpfs stayed mounted under /tmp, and every later session on that machine
found /tmp holding a mount (the jarvis test that binds /tmp then fails under CI, by design).
So each mount is made with an owner file beside its point (pid and start time of the test
process), and each session first unmounts the `jigcmd-` tmpfs mounts whose owner is gone.
A mount without an owner file is never touched: nothing says whose it is.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from jigcmd.envelope import syscalls as sc

__all__ = ["OWNER_SUFFIX", "identity", "mount_points", "sweep_stale", "tmpfs"]

OWNER_SUFFIX = ".jigcmd-owner"


def identity(pid: int) -> str | None:
    """`pid` and its start time: a pid reused by a newer process never matches."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Field 22 (starttime), counted after the command name, which may hold spaces.
    return f"{pid} {stat.rpartition(')')[2].split()[19]}"


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
    owner = _owner(point)
    owner.write_text(identity(os.getpid()) or "", encoding="ascii")
    try:
        sc.mount(source, str(point), "tmpfs", flags, options)
    except OSError:
        owner.unlink()
        point.rmdir()
        raise
    try:
        yield point
    finally:
        _undo(point)


def _undo(point: Path) -> None:
    """Unmount `point` (lazily: a child may still hold a file there), remove it and its owner."""
    with contextlib.suppress(OSError):
        sc.umount2(str(point), sc.MNT_DETACH)
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
    """Unmount and remove our tmpfs mounts whose owning process is gone; their points."""
    swept = []
    for point in mount_points():
        try:
            recorded = _owner(point).read_text(encoding="ascii")
        except (FileNotFoundError, NotADirectoryError):
            continue
        pid = recorded.partition(" ")[0]
        if pid.isdigit() and identity(int(pid)) == recorded:
            continue
        _undo(point)
        swept.append(point)
    return swept
