"""One staged runtime per state directory: mount the copy another zygote already made.

Why: each zygote's copy of Bun and its libraries is 78.8 MiB of memory the host holds for as
long as the zygote lives, and four sessions running Bun from four copies spend more CPU per
run than four running one (docs/performance.md, "The staged runtime").

How: the kernel keeps a tmpfs alive while any mount of it exists, in any namespace. A zygote
whose staging tmpfs is complete lists itself (pid and start time) in `runtime.holders` in the
state directory. A zygote starting later, as host root, joins a listed zygote's mount
namespace just long enough to clone that one mount (`open_tree` refuses a mount of another
namespace), goes back to its own, and attaches the clone in its private namespace
(`staging.enter`); it then lists itself too, so the copy stays findable while any holder
lives. Every step is checked, and any failure means a copy of its own, as before:
- the holder is alive and the same process (its start time), its mount namespace belongs to
  our own user namespace (nobody without host root can make such a namespace), and its mount
  at our mount point is a `jigcmd-runtime` tmpfs;
- the copy's manifest names, for every file we stage, the very source file we would copy
  (`staging.identity`); another installation's runtime is never borrowed.
The file is locked (`flock`) while a zygote borrows, stages or writes the list, so a copy is
never seen half made and concurrent starts make one copy, not several.

A zygote without host root makes its own copy: its mounts live in a user namespace of its own.
"""

from __future__ import annotations

import fcntl
import os

from jigcmd.envelope import syscalls as sc

__all__ = ["HOLDERS", "borrow", "lock", "register", "start_time"]

HOLDERS = "runtime.holders"
_FSTYPE_NAME = "jigcmd-runtime"
_NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1), linux/nsfs.h

Holder = tuple[int, int]


def lock(path: str) -> int:
    """The holders file at `path`, open and exclusively locked: close the fd to unlock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        raise
    return fd


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Field 22 of stat(5); the split starts at field 3, after the name in parentheses.
    return int(fields[19])


def _listed(fd: int) -> list[Holder]:
    data = os.pread(fd, 1 << 16, 0).decode("ascii", "replace")
    holders: list[Holder] = []
    for line in data.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            holders.append((int(parts[0]), int(parts[1])))
    return holders


def _alive(holders: list[Holder]) -> list[Holder]:
    return [(pid, start) for pid, start in holders if start_time(pid) == start]


def register(fd: int) -> None:
    """List this process as a holder (last: the newest is tried first); drop the dead."""
    me = (os.getpid(), start_time(os.getpid()) or 0)
    holders = [holder for holder in _alive(_listed(fd)) if holder != me] + [me]
    data = "".join(f"{pid} {start}\n" for pid, start in holders).encode("ascii")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def borrow(fd: int, mount_point: str) -> int | None:
    """A detached clone of a live holder's staging tmpfs (an `open_tree` fd), or None.

    Call as host root with the holders file locked (`fd`), from the host's mount namespace:
    this process is back in it when this returns.
    """
    if os.geteuid() != 0:
        return None
    for pid, start in reversed(_alive(_listed(fd))):
        if pid == os.getpid() or not _shows_staging(pid, mount_point):
            continue
        tree = _clone(pid, start, mount_point)
        if tree is not None:
            return tree
    return None


def _shows_staging(pid: int, mount_point: str) -> bool:
    """Whether `pid`'s mount at `mount_point` is a tmpfs named like ours, mounted read-only."""
    try:
        with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as mountinfo:
            lines = mountinfo.read().splitlines()
    except OSError:
        return False
    # mountinfo(5): id parent major:minor root mount-point options ... - type source super.
    mounts = [line.split() for line in lines if len(line.split()) > 4]
    ours = [fields for fields in mounts if fields[4] == _escaped(mount_point)]
    if not ours:
        return False
    fields = ours[-1]  # the topmost mount there
    tail = fields[fields.index("-") + 1 :] if "-" in fields else []
    return fields[3] == "/" and tail[:2] == ["tmpfs", _FSTYPE_NAME] and "ro" in tail[2].split(",")


def _escaped(path: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)


def _clone(pid: int, start: int, mount_point: str) -> int | None:
    try:
        namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        # Checked after the open: the namespace is that of the process we listed, not of a
        # process that took its pid since.
        if start_time(pid) != start or not _ours(namespace):
            return None
        return _clone_in(namespace, mount_point)
    finally:
        os.close(namespace)


def _ours(namespace: int) -> bool:
    """Whether the mount namespace `namespace` belongs to this process's user namespace."""
    try:
        owner = fcntl.ioctl(namespace, _NS_GET_USERNS)
    except OSError:
        return False
    try:
        theirs, mine = os.fstat(owner), os.stat("/proc/self/ns/user")
    finally:
        os.close(owner)
    return (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino)


def _clone_in(namespace: int, mount_point: str) -> int | None:
    home = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    cwd = os.open(".", os.O_PATH | os.O_CLOEXEC)
    try:
        try:
            sc.setns(namespace, sc.CLONE_NEWNS)
        except OSError:
            return None
        try:
            return sc.open_tree(mount_point, sc.OPEN_TREE_CLONE)
        except OSError:
            return None
        finally:
            # Back home, always: a failure here leaves this process in another's namespace,
            # so it raises and the zygote fails to start rather than run on.
            sc.setns(home, sc.CLONE_NEWNS)
            os.fchdir(cwd)
    finally:
        os.close(home)
        os.close(cwd)
