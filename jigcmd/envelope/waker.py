"""Waking one coroutine from the event loop's callbacks: readers and timers, no task each.

A run's collection waits on several things at once (the supervisor's socket, two output
pipes, a batch timer, a time limit). A task per wait costs a task, its cancel scope and a
reader registered and removed at every wait (each a few tens of µs with the CPU's caches
cold, as a server finds them between runs: docs/envelope.md, "The twentieth round"); here
the loop calls plain callbacks, which note what happened and wake the one waiting coroutine.
asyncio only, the product's one backend (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec

__all__ = ["Waker"]

P = ParamSpec("P")


class Waker:
    """Wakes the coroutine in `until` whenever a callback notes something (`wake`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._woken = False
        self._future: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None

    def wake(self) -> None:
        """Something the waiter may be waiting for happened (safe to call at any time)."""
        self._woken = True
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    def guarded(self, callback: Callable[P, None]) -> Callable[P, None]:
        """`callback` for the loop: what it raises is raised by the waiter, not logged and lost."""

        def run(*args: P.args, **kwargs: P.kwargs) -> None:
            try:
                callback(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - handed to the waiter, which raises it
                if self._failure is None:
                    self._failure = exc
                self.wake()

        return run

    async def until(self, ready: Callable[[], bool], seconds: float) -> bool:
        """Until `ready()` holds (looked at after each wake) or `seconds` pass; whether it holds.

        Raises what a guarded callback raised.
        """
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            self.wake()

        timer: asyncio.TimerHandle | None = None
        try:
            while True:
                self._raise_failure()
                if ready():
                    return True
                if expired:
                    return False
                if timer is None:
                    timer = self.loop.call_later(max(0.0, seconds), expire)
                await self._woken_up()
        finally:
            if timer is not None:
                timer.cancel()

    async def _woken_up(self) -> None:
        if not self._woken:
            self._future = self.loop.create_future()
            try:
                await self._future
            finally:
                self._future = None
        self._woken = False

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
