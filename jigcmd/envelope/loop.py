"""The zygote's event loop: descriptors that turn readable, and each envelope's timer.

One `epoll` for every envelope (pid 1's status pipe and pidfd, the run's socket) and the
zygote's control socket; each envelope carries at most one timer (`Envelope.timer`, a
monotonic time), checked after every wake-up. Single-threaded: callbacks run one at a time.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jigcmd.envelope.lifecycle import Envelope
    from jigcmd.envelope.spawner import Spawner

__all__ = ["EventLoop"]


class EventLoop:
    """Watches descriptors and fires envelopes' timers (`lifecycle.Loop`)."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self.callbacks: dict[int, Callable[[], None]] = {}
        # Watched descriptors also waited on to turn writable (`want_writable`).
        self.writers: dict[int, Callable[[], None]] = {}
        # Every envelope the loop drives, until it is done.
        self.envelopes: set[Envelope] = set()
        # Who clones pid 1s (spawner.py); None: the loop's own process does.
        self.spawner: Spawner | None = None

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback` whenever `fd` turns readable."""
        self.callbacks[fd] = callback
        self.epoll.register(fd, select.EPOLLIN)

    def unwatch(self, fd: int) -> None:
        """Stop watching `fd` (before it is closed); unknown descriptors are ignored."""
        self.writers.pop(fd, None)
        if self.callbacks.pop(fd, None) is not None:
            with contextlib.suppress(OSError):
                self.epoll.unregister(fd)

    def want_writable(self, fd: int, callback: Callable[[], None] | None) -> None:
        """Also call `callback` when the watched `fd` turns writable; None: no more."""
        if fd not in self.callbacks or (callback is None and fd not in self.writers):
            return
        if callback is None:
            del self.writers[fd]
        else:
            self.writers[fd] = callback
        events = select.EPOLLIN | (select.EPOLLOUT if callback is not None else 0)
        self.epoll.modify(fd, events)

    def built(self, envelope: Envelope) -> None:
        """`envelope` is prepared (the zygote then starts the next preparation)."""

    def done(self, envelope: Envelope) -> None:
        """`envelope` is released or given up: the loop forgets it."""
        self.envelopes.discard(envelope)

    def turn(self, timers: Iterable[float] = ()) -> None:
        """Wait for the next event or due timer (or the earliest of `timers`) and handle it."""
        now = time.monotonic()
        due = [e.timer for e in self.envelopes if e.timer is not None]
        due += [t for t in timers if t > now]
        timeout = max(0.0, min(due) - now) if due else -1.0
        for fd, events in self.epoll.poll(timeout):
            writer = self.writers.get(fd) if events & select.EPOLLOUT else None
            if writer is not None:
                writer()
            callback = self.callbacks.get(fd) if events & ~select.EPOLLOUT else None
            if callback is not None:
                callback()
        now = time.monotonic()
        for envelope in list(self.envelopes):
            if envelope.timer is not None and envelope.timer <= now:
                envelope.on_timer()

    def run_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Turn until `condition()` holds; whether it did within `timeout` seconds."""
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() >= end:
                return False
            self.turn((end,))
        return True

    def close(self) -> None:
        """Close the epoll descriptor."""
        self.epoll.close()
