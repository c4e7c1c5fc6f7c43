"""A caller's cancel, as every layer from the fronts down to the envelope reads it.

Like anyio's `Event` it is set, looked at and waited for; it also tells its watchers when it
is set. Whoever must act on a cancel (the collector forwarding it to the envelope, a waiter
of a shared operation) is called back instead of keeping a task waiting for it, and the
run's end need not cancel that task (docs/envelope.md, "The twentieth round"). A shared
operation's end is signalled the same way, for its waiters to watch beside their own cancel
(`jigcmd.command.sharing`).

A stop has a cause: a caller's cancel, or, for a shared operation, the deadline of the last
caller waiting for it passing before the work's own (`jigcmd.command.sharing`); whoever
answers for the stop says which (`cause`), and the envelope stops the run as such.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import anyio

__all__ = ["CancelSignal", "StopCause"]

# Why a stop was asked: a cancel, or the deadline of the last caller waiting for the work.
StopCause = Literal["cancelled", "deadline"]


class CancelSignal:
    """A cancel that calls its watchers once, as it is set."""

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._watchers: list[Callable[[], None]] = []
        self._cause: StopCause = "cancelled"

    def set(self, cause: StopCause = "cancelled") -> None:
        """Set it for `cause`; each watcher is called (at once, in the setter's turn), then
        forgotten. A second set changes nothing: the first cause stands."""
        if self._event.is_set():
            return
        self._cause = cause
        self._event.set()
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            watcher()

    def is_set(self) -> bool:
        """Whether it was set."""
        return self._event.is_set()

    @property
    def cause(self) -> StopCause:
        """Why it was set (`cancelled` until it is)."""
        return self._cause

    def deadline_passed(self) -> bool:
        """Whether it was set because the deadline of the last caller waiting passed."""
        return self._event.is_set() and self._cause == "deadline"

    async def wait(self) -> None:
        """Until it is set."""
        await self._event.wait()

    def watch(self, watcher: Callable[[], None]) -> Callable[[], None]:
        """Call `watcher` when it is set (now, if it is); returns what ends the watch.

        A watcher must not raise: it runs in whichever task sets the cancel.
        """
        if self._event.is_set():
            watcher()
            return _nothing
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch


def _nothing() -> None:
    return None
