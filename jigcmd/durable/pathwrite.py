"""A journal write on a request's path: on the event loop, and in a worker thread only to wait.

The server's loop writes a row's begin and a run's evidence itself when it can (`begin_now`,
`record_result(wait=False)`): uncontended, as with one server, that is one quick local
commit, cheaper than the two hops to a worker thread. When another process holds the
journal's write lock (sessions sharing a state directory), the write tries again on the
loop every millisecond, for a while, before a worker thread waits for it: the thread's hops
and its wait for the GIL while the loop is busy cost more, under load, than the lock itself
(docs/performance.md, the eighth round of #26).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio

__all__ = ["LOOP_PAUSE_S", "LOOP_TRIES", "write_soon"]

LOOP_PAUSE_S = 0.001
LOOP_TRIES = 20

T = TypeVar("T")


async def write_soon(attempt: Callable[[], T | None], waiting: Callable[[], T]) -> T:
    """`attempt()` now; while it answers None, again every `LOOP_PAUSE_S` on the loop; after
    `LOOP_TRIES` more, `waiting()` in a worker thread.

    Like the thread's wait, the retries are not cancelled: a cancel arriving meanwhile is
    delivered once the write has landed, so its caller knows whether it wrote.
    """
    result = attempt()
    if result is not None:
        return result
    with anyio.CancelScope(shield=True):
        for _ in range(LOOP_TRIES):
            await anyio.sleep(LOOP_PAUSE_S)
            result = attempt()
            if result is not None:
                return result
        landed = await anyio.to_thread.run_sync(waiting)
    return landed
