"""Waiting for one descriptor to turn readable or writable, with poll(2).

`select.select` refuses any descriptor past 1023 (`ValueError: filedescriptor out of range`),
and a process that holds many (a server with many sessions or envelopes, a test process
that opened many state directories) reaches such numbers; poll(2) has no such bound.
"""

from __future__ import annotations

import errno
import math
import select

__all__ = ["readable", "writable"]


def readable(fd: int, timeout: float | None) -> bool:
    """Whether `fd` turns readable (end of file and hangup count) within `timeout` seconds.

    None waits without limit; a descriptor that is not open raises `OSError` (EBADF), as
    `select.select` does.
    """
    return _ready(fd, select.POLLIN, timeout)


def writable(fd: int, timeout: float | None) -> bool:
    """Whether `fd` turns writable (an error or a reader gone counts: the write says which)
    within `timeout` seconds; as `readable` otherwise."""
    return _ready(fd, select.POLLOUT, timeout)


def _ready(fd: int, event_mask: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, event_mask)
    # Rounded up: a wait of a fraction of a millisecond must not become a busy loop of 0 ms.
    ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    events = poller.poll(ms)
    if any(event & select.POLLNVAL for _, event in events):
        raise OSError(errno.EBADF, f"descriptor {fd} is not open")
    return bool(events)
