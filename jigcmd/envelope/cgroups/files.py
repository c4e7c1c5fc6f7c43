"""Plain-file primitives shared by the cgroup backends: read, write, wait, kill, remove.

Every failure is an `OSError` whose `filename` is the cgroup file or directory involved, so
the envelope can say exactly which piece of the containment could not be established.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jigcmd.envelope.cgroups.model import Membership

__all__ = [
    "cannot_create",
    "cpu_list",
    "freeze_and_kill",
    "join",
    "keyed",
    "nearest_cpus",
    "pids_in",
    "pin_cpus",
    "poll_until",
    "read",
    "remove_dirs",
    "swap_enabled",
    "wait_unpopulated",
    "write",
]

# rmdir of a cgroup whose last task is still exiting fails with EBUSY for a short while.
REMOVE_TIMEOUT_S = 0.5


def write(path: str, value: str) -> None:
    """Write `value` to a cgroup file that must already exist (a missing file is an error)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    except OSError as e:
        raise OSError(e.errno, f"cannot open for writing: {e.strerror}", path) from None
    try:
        os.write(fd, value.encode())
    except OSError as e:
        raise OSError(e.errno, f"cannot write {value!r}: {e.strerror}", path) from None
    finally:
        os.close(fd)


def cannot_create(where: str, directories: Sequence[str], fix: str) -> str:
    """Why no job's cgroup can be made in `where` (`directories`, none writable to this
    process): otherwise `fix`; for root, the cause root cannot fix by being root."""
    if os.geteuid() != 0:
        return f"cannot create cgroups in {where}; {fix}"
    if any(_mount_read_only(path) for path in directories):
        return (
            f"cannot create cgroups in {where}: read-only even for root (a read-only mount, "
            "as a container's /sys/fs/cgroup is unless bound writable)"
        )
    # A read-write mount that refuses root (EACCES, not EROFS): the directories belong to a
    # user this user namespace does not map (host root, seen from a rootless container's
    # root as the overflow uid), over which its capabilities count for nothing.
    owner = _owner(directories[0]) if directories else None
    whose = f"uid {owner}'s" if owner is not None else "another user's"
    return (
        f"cannot create cgroups in {where}: permission denied to root on a read-write mount "
        f"(the directories are {whose}, a user this root's user namespace does not map, as "
        "host root is to a rootless container); the host's root must delegate (chown -R) a "
        "directory of each hierarchy to this root's host uid"
    )


def _mount_read_only(directory: str) -> bool:
    """Whether the mount holding `directory` is read-only (the rw flag mountinfo shows)."""
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _owner(directory: str) -> int | None:
    try:
        return os.stat(directory).st_uid
    except OSError:
        return None


def join(membership: Membership, born_in: str | None) -> None:
    """Move the calling process into every directory of `membership` but `born_in`.

    See `CgroupJob.join`: a plain function of plain data, so that a process that holds no job
    object (pid 1 cloned by the spawner) joins the same way.
    """
    # One thread moved by `tasks` is the whole process only if it has no other thread.
    single = not membership.v1 or len(os.listdir("/proc/self/task")) == 1
    for path in membership.v1:
        write(os.path.join(path, "tasks" if single else "cgroup.procs"), "0")
    if membership.unified is not None and born_in != membership.unified:
        write(os.path.join(membership.unified, "cgroup.procs"), "0")


def read(path: str) -> str:
    """The whole text of a cgroup file."""
    # Plain system calls: a buffered text `open` costs three more (fstat, ioctl, lseek) and
    # a decoder, ~2.5x the time of these, on every look at a job (docs/envelope.md).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = [os.read(fd, 65536)]
            while chunks[-1]:
                chunks.append(os.read(fd, 65536))
        finally:
            os.close(fd)
    except OSError as e:
        raise OSError(e.errno, f"cannot read: {e.strerror}", path) from None
    return b"".join(chunks).decode("ascii")


def keyed(path: str) -> dict[str, int]:
    """A flat keyed file (`key value` per line), such as cpu.stat or memory.events."""
    result: dict[str, int] = {}
    for line in read(path).splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            result[key] = int(value)
    return result


def cpu_list(text: str) -> tuple[int, ...]:
    """The CPUs of a kernel CPU list such as `0-3,8,10-11` (empty text: none)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return tuple(sorted(cpus))


def nearest_cpus(root: str, base: str, name: str) -> tuple[str, tuple[int, ...]] | None:
    """The CPU list file `name` of `root`/`base`, else of its nearest ancestor up to `root`,
    that exists and lists CPUs, with them; None when none does."""
    path = os.path.normpath(os.path.join(root, base))
    while True:
        found = os.path.join(path, name)
        with contextlib.suppress(OSError):
            cpus = cpu_list(read(found))
            if cpus:
                return found, cpus
        if path == root or not path.startswith(root + os.sep):
            return None
        path = os.path.dirname(path)


def pin_cpus(cpus_file: str, effective_file: str, cpus: Sequence[int]) -> None:
    """Write `cpus` to a cpuset's cpus file; raise unless the kernel then reports exactly them."""
    wanted = tuple(sorted(set(cpus)))
    write(cpus_file, ",".join(str(cpu) for cpu in wanted))
    effective = cpu_list(read(effective_file))
    if effective != wanted:
        # A CPU the parent lacks (or one offline) narrows the effective set without an error.
        detail = f"the kernel pins to {list(effective)}, not {list(wanted)}"
        raise OSError(errno.EINVAL, detail, effective_file)


def pids_in(procs_path: str) -> list[int]:
    """The pids listed in a cgroup.procs file; a directory already gone lists none."""
    try:
        text = read(procs_path)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return []
        raise
    return [int(line) for line in text.split()]


def swap_enabled(proc_swaps: str = "/proc/swaps") -> bool:
    """Whether the machine has any swap device (then swap must be limited to zero)."""
    try:
        with open(proc_swaps, encoding="ascii") as f:
            return len(f.read().splitlines()) > 1
    except OSError:
        # Unreadable /proc/swaps: assume swap exists, so a missing swap control fails closed.
        return True


def wait_unpopulated(events_path: str, timeout: float) -> bool:
    """Wait until a v2 cgroup.events says `populated 0`; False at the timeout.

    The kernel signals every change of cgroup.events as POLLPRI, so this sleeps in poll(2)
    rather than spinning. A directory already gone counts as unpopulated.
    """
    deadline = time.monotonic() + timeout
    try:
        fd = os.open(events_path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLPRI)
        while True:
            text = os.pread(fd, 4096, 0).decode("ascii")
            if "populated 0" in text.splitlines():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            poller.poll(remaining * 1000)
    finally:
        os.close(fd)


def poll_until(check: Callable[[], bool], timeout: float) -> bool:
    """Re-evaluate `check` with a short backoff until it holds (True) or `timeout` passes (False).

    For v1 files, which offer no change notification.
    """
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.01)
    return True


def freeze_and_kill(
    freeze: Callable[[], None],
    thaw: Callable[[], None],
    list_pids: Callable[[], Iterable[int]],
    timeout: float,
) -> None:
    """SIGKILL every task of a tree that has no cgroup.kill: freeze, kill each pid, thaw, repeat.

    A frozen cgroup cannot fork, so the pid list read while frozen is complete. Repeats until
    no pid is listed; raises TimeoutError when tasks are still listed at the timeout.
    """
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while True:
        freeze()
        try:
            pids = list(list_pids())
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        finally:
            thaw()
        if not pids and not list(list_pids()):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(errno.ETIMEDOUT, f"tasks survive SIGKILL: {pids}")
        # Killed tasks leave the cgroup only once they finish exiting; give them a moment.
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def remove_dirs(
    paths: Sequence[str],
    timeout: float = REMOVE_TIMEOUT_S,
    rmdir: Callable[[str], None] = os.rmdir,
) -> None:
    """rmdir each cgroup directory, retrying EBUSY until `timeout`; raise unless all are gone.

    A successful rmdir is the kernel's word that the directory is gone and held no task.
    """
    deadline = time.monotonic() + timeout
    failures: list[OSError] = []
    for path in paths:
        pause = 0.0005
        while True:
            try:
                rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() >= deadline:
                    failures.append(OSError(e.errno, f"cannot remove cgroup: {e.strerror}", path))
                    break
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
    if failures:
        raise failures[0]
