"""Waiting for an envelope slot: first come, first served, bounded by each caller's deadline.

Envelope slots are flock'd files shared by every jigcmd on the state directory; a slot
freed by this process wakes the first waiter at once, one freed by another process is
found by the first waiter's next look (every `POLL_S`). Only the first waiter takes a
slot, so a caller that arrives later never overtakes one that is queued. A waiter gives
up, with nothing run, when its deadline passes or it is cancelled; at most `MAX_WAITING`
callers wait, and one more is refused at once.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Awaitable, Callable
from typing import Final

import anyio

from jigcmd.cancel import CancelSignal
from jigcmd.errors import Code, JigError
from jigcmd.journal.reservations import Slot

__all__ = ["MAX_WAITING", "POLL_S", "Queued", "SlotQueue"]

# How often the first waiter looks for a slot another process freed.
POLL_S: Final = 0.05
# Callers that may wait at once in one process; beyond it a call is refused, not queued.
MAX_WAITING: Final = 256

# Told when a caller has to wait, with how many callers are ahead of it, and again while it
# waits (`SlotQueue.acquire`'s `every`).
Queued = Callable[[int], Awaitable[None]]


class SlotQueue:
    """The callers of one process waiting for an envelope slot, in arrival order."""

    def __init__(self, take: Callable[[str], Slot | None], exhausted: Callable[[], str]) -> None:
        """`take(tag)`: a free slot now or None; `exhausted()`: why none is free."""
        self._take = take
        self._exhausted = exhausted
        self._waiting: collections.deque[_Waiter] = collections.deque()

    @property
    def waiting(self) -> int:
        """How many callers are waiting now."""
        return len(self._waiting)

    async def acquire(
        self,
        tag: str,
        *,
        deadline: float,
        cancel: CancelSignal,
        queued: Queued | None = None,
        every: float = math.inf,
    ) -> Slot:
        """A slot, at once or after the callers ahead; `deadline` is a `time.monotonic()` time.

        A caller that waits is told through `queued`, then again every `every` seconds: a
        caller whose own timeout restarts on each word hears one while it waits. Raises
        `DEADLINE_EXCEEDED` or `CANCELLED` (nothing ran) when the wait ends without a slot,
        and `RESOURCE_EXHAUSTED` when too many callers wait already.
        """
        if not self._waiting:
            slot = self._take(tag)
            if slot is not None:
                return slot
        if len(self._waiting) >= MAX_WAITING:
            raise JigError(
                Code.RESOURCE_EXHAUSTED,
                f"{self._exhausted()}; {MAX_WAITING} calls are waiting already",
            )
        waiter = _Waiter()
        self._waiting.append(waiter)
        try:
            if queued is not None:
                await queued(len(self._waiting) - 1)
            told = time.monotonic()
            while True:
                if self._waiting[0] is waiter:
                    slot = self._take(tag)
                    if slot is not None:
                        return slot
                if queued is not None and time.monotonic() - told >= every:
                    told = time.monotonic()
                    await queued(self._waiting.index(waiter))
                if cancel.is_set() and not cancel.deadline_passed():
                    raise JigError(
                        Code.CANCELLED, "cancelled while waiting for an envelope slot; nothing ran"
                    )
                remaining = deadline - time.monotonic()
                # A stop for the last waiting caller's deadline ends the wait as its own would.
                if remaining <= 0 or cancel.deadline_passed():
                    raise JigError(
                        Code.DEADLINE_EXCEEDED,
                        f"the deadline passed while waiting for an envelope slot "
                        f"({self._exhausted()}); nothing ran",
                    )
                # Another process may free a slot without telling us: look again after POLL_S.
                with anyio.move_on_after(min(remaining, POLL_S)):
                    await waiter.wait(cancel)
        finally:
            self._waiting.remove(waiter)
            self.released()

    def released(self) -> None:
        """A slot of this process was given back: the first waiter looks at once."""
        if self._waiting:
            self._waiting[0].wake.set()


class _Waiter:
    """One waiting caller: woken when a slot may be free."""

    def __init__(self) -> None:
        self.wake = anyio.Event()

    async def wait(self, cancel: CancelSignal) -> None:
        """Until woken or cancelled (the caller bounds how long); then ready to be woken again.

        The cancel wakes the wait as it is set: no task races it.
        """
        unwatch = cancel.watch(self.wake.set)
        try:
            await self.wake.wait()
        finally:
            unwatch()
            self.wake = anyio.Event()
