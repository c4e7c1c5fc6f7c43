"""Who a process is, in a way that survives pid reuse: pid + kernel start time + boot id.

A pid alone names a different process after it is recycled; the start time (field 22 of
`/proc/<pid>/stat`, clock ticks since boot) tells the two apart within one boot, and the boot
id tells boots apart (after a reboot every recorded process is gone, whatever its pid).
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
    "process_start",
    "wait_exit",
]

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Field 22 (starttime) counted from field 3, the first one after the parenthesised comm.
_STARTTIME_AFTER_COMM = 22 - 3


class ProcessIdentity(NamedTuple):
    """One process across its whole life: pid, start time in clock ticks, and the boot it ran in.

    A NamedTuple, so that the zygote carries it without msgspec (`jigcmd.envelope.stdjson`).
    """

    pid: int
    start: int
    boot_id: str


@functools.cache
def boot_id() -> str:
    """This boot's id (constant until the machine restarts)."""
    with open(_BOOT_ID, encoding="ascii") as handle:
        return handle.read().strip()


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
    return None if start is None else ProcessIdentity(pid=pid, start=start, boot_id=boot_id())


def current() -> ProcessIdentity:
    """The calling process's identity."""
    me = identify(os.getpid())
    assert me is not None  # our own /proc entry always exists
    return me


def is_alive(who: ProcessIdentity) -> bool:
    """Whether that very process still exists (a zombie counts as gone: it runs nothing)."""
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


def _pidfd(who: ProcessIdentity) -> int | None:
    """A pidfd for that very process, or None when it is gone or its pid was reused."""
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
