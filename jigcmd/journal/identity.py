"""Who a process is across pid reuse: pid, kernel start time, boot id and PID namespace.

A pid alone names a different process after it is recycled; the start time (field 22 of
`/proc/<pid>/stat`, clock ticks since boot) tells the two apart within one boot, and the boot
id tells boots apart (after a reboot every recorded process is gone, whatever its pid).
A pid and a start time mean something only in the PID namespace they were read in (two
containers each have a pid 1, started at nearly the same tick), so the identity names that
namespace too (the inode of `/proc/self/ns/pid`). The checks here (`is_alive`, `wait_exit`,
`kill_and_wait`) read and signal through this process's own /proc: they hold for identities
of its own namespace only (`local`); `jigcmd.journal.liveness` answers for any identity.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
from typing import NamedTuple

__all__ = [
    "ProcessIdentity",
    "boot_id",
    "current",
    "identify",
    "is_alive",
    "kill_and_wait",
    "local",
    "pid_namespace",
    "process_start",
    "wait_exit",
]

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Field 22 (starttime) counted from field 3, the first one after the parenthesised comm.
_STARTTIME_AFTER_COMM = 22 - 3


class ProcessIdentity(NamedTuple):
    """One process across its whole life: pid, start time in clock ticks, boot, PID namespace.

    A NamedTuple, so that the zygote carries it without msgspec (`jigcmd.envelope.stdjson`).
    """

    pid: int
    start: int
    boot_id: str
    # The inode of the PID namespace `pid` and `start` were read in; 0 for identities
    # recorded before jigcmd kept it (read as this process's own namespace, as they were).
    pidns: int = 0


@functools.cache
def boot_id() -> str:
    """This boot's id (constant until the machine restarts)."""
    with open(_BOOT_ID, encoding="ascii") as handle:
        return handle.read().strip()


@functools.cache
def pid_namespace() -> int:
    """The inode of this process's PID namespace (constant for its life)."""
    return os.stat("/proc/self/ns/pid").st_ino


def local(who: ProcessIdentity) -> bool:
    """Whether `who` was identified in this process's PID namespace (or before they were kept)."""
    return who.pidns in (0, pid_namespace())


def process_start(pid: int) -> int | None:
    """The start time of `pid` (field 22 of /proc/<pid>/stat), or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm may hold spaces and parentheses; it ends at the last ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[_STARTTIME_AFTER_COMM])


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of the live process `pid`, or None if there is none."""
    start = process_start(pid)
    if start is None:
        return None
    # /proc lists this namespace's processes (a container mounts its own), so `pid` is one.
    return ProcessIdentity(pid=pid, start=start, boot_id=boot_id(), pidns=pid_namespace())


def current() -> ProcessIdentity:
    """The calling process's identity."""
    me = identify(os.getpid())
    assert me is not None  # our own /proc entry always exists
    return me


def is_alive(who: ProcessIdentity) -> bool:
    """Whether that very process of this PID namespace still exists (a zombie counts as gone).

    Only for a `local` identity: another namespace's pid names nothing here.
    """
    _require_local(who)
    if who.boot_id != boot_id():
        return False
    if process_start(who.pid) != who.start:
        return False
    try:
        with open(f"/proc/{who.pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")


def _require_local(who: ProcessIdentity) -> None:
    if not local(who):
        # A pid of another namespace would name (and signal) an unrelated process here.
        raise ValueError(f"pid {who.pid} is of another PID namespace (pid:[{who.pidns}])")


def _pidfd(who: ProcessIdentity) -> int | None:
    """A pidfd for that very process, or None when it is gone or its pid was reused."""
    _require_local(who)
    if who.boot_id != boot_id():
        return None
    try:
        fd = os.pidfd_open(who.pid)
    except ProcessLookupError:
        return None
    # Checked after opening: from now on the pidfd can only ever refer to this process.
    if process_start(who.pid) != who.start:
        os.close(fd)
        return None
    return fd


def wait_exit(who: ProcessIdentity, timeout: float) -> bool:
    """Wait up to `timeout` seconds for the process to exit; True once it has (or was gone)."""
    fd = _pidfd(who)
    if fd is None:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout * 1000))))
    finally:
        os.close(fd)


def kill_and_wait(who: ProcessIdentity, timeout: float) -> bool:
    """SIGKILL that very process (never a successor with its pid); True once it has exited."""
    fd = _pidfd(who)
    if fd is None:
        return True
    try:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout * 1000))))
    finally:
        os.close(fd)
