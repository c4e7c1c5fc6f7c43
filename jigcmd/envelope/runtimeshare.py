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

Without host root a zygote's mounts live in a user namespace it made, and a mount namespace
can be entered only from inside the user namespace that owns it, with no way back. So a
zygote without root checks the holder's copy first (its manifest, read through
`/proc/<pid>/root`), then joins the holder's user namespace (only one owned by our uid and a
child of ours: the same identity mapping it would have made itself), clones the copy there
and makes its mount namespace in that user namespace instead of one of its own.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
from collections.abc import Callable
from typing import NamedTuple

from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.cgroups.mounts import read_mounts
from jigcmd.journal.identity import process_start

__all__ = ["HOLDERS", "SOURCE_NAME", "Borrowed", "Fits", "Stranded", "borrow", "lock", "register"]

HOLDERS = "runtime.holders"
# The staging tmpfs's source, as staging.py mounts it and mountinfo shows it.
SOURCE_NAME = "jigcmd-runtime"
# linux/nsfs.h: _IO(0xb7, 0x1), _IO(0xb7, 0x2), _IO(0xb7, 0x4).
_NS_GET_USERNS = 0xB701
_NS_GET_PARENT = 0xB702
_NS_GET_OWNER_UID = 0xB704

Holder = tuple[int, int]
Fits = Callable[[str | int], bool]


class Stranded(RuntimeError):
    """Raised when this process cannot return to its own mount namespace after a clone."""


class Borrowed(NamedTuple):
    """What `borrow` found: the clone (or None), and whether we joined the holder's user ns."""

    tree: int | None
    joined: bool


def lock(path: str) -> int:
    """The holders file at `path`, open and exclusively locked: close the fd to unlock."""
    # Not waiting on a FIFO left in its place: only a regular file is locked.
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file; remove it")
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        raise
    return fd


def _listed(fd: int) -> list[Holder]:
    data = os.pread(fd, 1 << 16, 0).decode("ascii", "replace")
    holders: list[Holder] = []
    for line in data.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            holders.append((int(parts[0]), int(parts[1])))
    return holders


def _alive(holders: list[Holder]) -> list[Holder]:
    return [(pid, start) for pid, start in holders if process_start(pid) == start]


def register(fd: int) -> None:
    """List this process as a holder (last: the newest is tried first); drop the dead."""
    me = (os.getpid(), process_start(os.getpid()) or 0)
    holders = [holder for holder in _alive(_listed(fd)) if holder != me] + [me]
    data = "".join(f"{pid} {start}\n" for pid, start in holders).encode("ascii")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def borrow(fd: int, mount_point: str, fits: Fits) -> Borrowed:
    """A detached clone of a live holder's staging tmpfs (an `open_tree` fd) that `fits`.

    Call with the holders file locked (`fd`), from the host's mount namespace. As host root
    this process is back in it when this returns. Without root it has joined the holder's
    user namespace when `joined` says so (there is no way back to ours): the copy's mounts
    live there, and the caller makes its mount namespace in it rather than a user namespace
    of its own. `fits` reads a copy's manifest (a path, or the clone's fd) and says whether
    it holds our very sources.
    """
    root = os.geteuid() == 0
    for pid, start in reversed(_alive(_listed(fd))):
        if pid == os.getpid() or not _shows_staging(pid, mount_point):
            continue
        if root:
            tree = _clone(pid, start, mount_point)
            if tree is not None and fits(tree):
                return Borrowed(tree, joined=False)
            if tree is not None:
                os.close(tree)
        elif fits(f"/proc/{pid}/root{mount_point}"):
            borrowed = _join(pid, start, mount_point)
            if borrowed.joined:
                return borrowed
    return Borrowed(None, joined=False)


def _shows_staging(pid: int, mount_point: str) -> bool:
    """Whether `pid`'s mount at `mount_point` is a tmpfs named like ours, mounted read-only."""
    try:
        mounts = [m for m in read_mounts(f"/proc/{pid}/mountinfo") if m.point == mount_point]
    except OSError:
        return False
    if not mounts:
        return False
    top = mounts[-1]  # the topmost mount there
    return (top.root, top.fstype, top.source) == ("/", "tmpfs", SOURCE_NAME) and (
        "ro" in top.super_options
    )


def _clone(pid: int, start: int, mount_point: str) -> int | None:
    try:
        namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        # Checked after the open: the namespace is that of the process we listed, not of a
        # process that took its pid since.
        if process_start(pid) != start or not _ours(namespace):
            return None
        return _clone_in(namespace, mount_point)
    finally:
        os.close(namespace)


def _ours(namespace: int) -> bool:
    """Whether the mount namespace `namespace` belongs to this process's user namespace."""
    return _related(namespace, _NS_GET_USERNS, os.stat("/proc/self/ns/user"))


def _related(namespace: int, request: int, expected: os.stat_result) -> bool:
    """Whether `namespace`'s owner or parent (`request`) is the namespace `expected`."""
    try:
        found = fcntl.ioctl(namespace, request)
    except OSError:
        return False
    try:
        theirs = os.fstat(found)
    finally:
        os.close(found)
    return (theirs.st_dev, theirs.st_ino) == (expected.st_dev, expected.st_ino)


def _join(pid: int, start: int, mount_point: str) -> Borrowed:
    """Without root: join `pid`'s user namespace if it is one of ours, and clone its copy.

    Ours: owned by our uid and a child of our user namespace (anyone else's zygote, or a
    namespace made by another user, fails one of the two), and owning its mount namespace.
    """
    try:
        user = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        mounts = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return Borrowed(None, joined=False)
    try:
        owner = bytearray(4)
        fcntl.ioctl(user, _NS_GET_OWNER_UID, owner)
        if (
            process_start(pid) != start
            or struct.unpack("=I", owner)[0] != os.geteuid()
            or not _related(user, _NS_GET_PARENT, os.stat("/proc/self/ns/user"))
            or not _related(mounts, _NS_GET_USERNS, os.fstat(user))
        ):
            return Borrowed(None, joined=False)
        sc.setns(user, sc.CLONE_NEWUSER)
    except OSError:
        return Borrowed(None, joined=False)
    else:
        try:
            sc.setns(mounts, sc.CLONE_NEWNS)
            return Borrowed(sc.open_tree(mount_point, sc.OPEN_TREE_CLONE), joined=True)
        except OSError:
            # Joined, with no clone: the caller makes a copy of its own in this namespace.
            return Borrowed(None, joined=True)
    finally:
        os.close(user)
        os.close(mounts)


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
            # so it raises (not an OSError: no caller may take it for "no copy to borrow")
            # and the zygote fails to start rather than run on.
            try:
                sc.setns(home, sc.CLONE_NEWNS)
            except OSError as exc:
                raise Stranded(f"back to our own mount namespace: {exc}") from exc
            os.fchdir(cwd)
    finally:
        os.close(home)
        os.close(cwd)
