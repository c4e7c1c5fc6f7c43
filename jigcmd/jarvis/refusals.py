"""Refusals in the audit trail: every call's own row, and the unauthenticated ones counted.

A refused call that carried the server's token gets its own audit row like any decision:
its actor is known, and it could as well have made calls that are audited one by one. A
request refused before it authenticated (a wrong or missing token; a foreign `Host` or a
browser `Origin` where no token was checked first, which `jigcmd jarvis` always does) can
come from any local process, as fast as it likes: one row each would let anyone fill the
disk and bury the trail. Those are counted by reason, a closed
vocabulary, and written as one row per `interval` at most: the first after a quiet spell at
once, the rest of a burst in the row due when the interval ends, the remainder when the
server stops.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Awaitable, Callable

import anyio

from jigcmd.cancel import CancelSignal

__all__ = ["UNAUTHENTICATED", "UNAUTHENTICATED_ROW_S", "Unauthenticated", "sent"]

# The actor of the rows that count requests refused before they authenticated.
UNAUTHENTICATED = "unauthenticated"
# At most one such row per this many seconds (8,640 a day under a constant flood).
UNAUTHENTICATED_ROW_S = 10.0


def sent(args: object) -> tuple[tuple[str, ...], str]:
    """The argv and cwd a refused call sent, as far as they are strings (for its audit row)."""
    if not isinstance(args, dict):
        return (), ""
    argv, cwd = args.get("argv"), args.get("cwd")
    strings: tuple[str, ...] = ()
    if isinstance(argv, list) and all(isinstance(item, str) for item in argv):
        strings = tuple(argv)
    return strings, (cwd if isinstance(cwd, str) else "")


class Unauthenticated:
    """Requests refused before they authenticated, counted by reason until their row is written."""

    def __init__(self, interval: float = UNAUTHENTICATED_ROW_S) -> None:
        self._interval = interval
        self._counts: collections.Counter[str] = collections.Counter()
        self._pending = anyio.Event()
        self._last_row = -math.inf

    def note(self, reason: str) -> None:
        """One more refusal; `reason` is one of a fixed set of words, never request data."""
        self._counts[reason] += 1
        self._pending.set()

    async def run(self, stop: CancelSignal, write: Callable[[str], Awaitable[None]]) -> None:
        """Write the counts as rows (`write(outcome)`), one per interval at most, until `stop`."""
        while True:
            with anyio.CancelScope() as scope:
                unwatch = stop.watch(scope.cancel)
                try:
                    await self._pending.wait()
                    await anyio.sleep(max(0.0, self._last_row + self._interval - time.monotonic()))
                finally:
                    unwatch()
            if self._counts:
                counts, self._counts = self._counts, collections.Counter()
                self._pending = anyio.Event()
                self._last_row = time.monotonic()
                with anyio.CancelScope(shield=True):
                    await write(_outcome(counts))
            if stop.is_set():
                return


def _outcome(counts: collections.Counter[str]) -> str:
    total = sum(counts.values())
    reasons = "; ".join(f"{reason} ({n})" for reason, n in counts.most_common())
    noun = "request" if total == 1 else "requests"
    return f"refused {total} {noun} before authentication: {reasons}"
