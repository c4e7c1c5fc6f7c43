"""The audit rows of refused heads whose token is valid: bounded, written by one task.

A head h11 refused is answered by the protocol's callback at once (`http11.py`), where nothing
can await its row. The rows wait here, at most `bound` of them, for one writer that drains
them in order; past the bound each is counted by its actor and refusal, and the counts are
written as one summary row per actor, so a flood of refused heads cannot pile up rows in
memory. As jarvis stops (after its connections closed), the rest is written before the
journal closes: every answered refusal is a row or is counted in one.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable

import anyio

from jigcmd.cancel import CancelSignal
from jigcmd.jarvis.tools import ToolError

__all__ = ["HEAD_BACKLOG", "RefusedHeads"]

# Rows waiting for the writer at most; past it, refusals are only counted (one row per actor).
HEAD_BACKLOG = 1000

_Row = tuple[str, str, ToolError]


class RefusedHeads:
    """Refused heads of a valid token waiting for their audit rows, and those counted."""

    def __init__(self, bound: int = HEAD_BACKLOG) -> None:
        self._bound = bound
        self._rows: collections.deque[_Row] = collections.deque()
        self._counted: collections.Counter[tuple[str, str]] = collections.Counter()
        self._pending = anyio.Event()

    def note(self, actor: str, tool: str, refusal: ToolError) -> None:
        """One refused head of `actor` (from a protocol callback: nothing awaits it)."""
        if len(self._rows) < self._bound:
            self._rows.append((actor, tool, refusal))
        else:
            self._counted[actor, refusal.message] += 1
        self._pending.set()

    async def run(
        self,
        done: CancelSignal,
        write: Callable[[str, str, ToolError], Awaitable[None]],
        summary: Callable[[str, str], Awaitable[None]],
    ) -> None:
        """Write the rows (`write`) and the counts (`summary(actor, outcome)`) until `done`,
        then what is left."""
        while True:
            with anyio.CancelScope() as scope:
                unwatch = done.watch(scope.cancel)
                try:
                    await self._pending.wait()
                finally:
                    unwatch()
            self._pending = anyio.Event()
            with anyio.CancelScope(shield=True):
                await self._drain(write, summary)
            if done.is_set():
                return

    async def _drain(
        self,
        write: Callable[[str, str, ToolError], Awaitable[None]],
        summary: Callable[[str, str], Awaitable[None]],
    ) -> None:
        while self._rows:
            await write(*self._rows.popleft())
        counted, self._counted = self._counted, collections.Counter()
        for actor in sorted({actor for actor, _ in counted}):
            await summary(actor, self._outcome(actor, counted))

    def _outcome(self, actor: str, counted: collections.Counter[tuple[str, str]]) -> str:
        mine = {message: n for (who, message), n in counted.items() if who == actor}
        total = sum(mine.values())
        reasons = "; ".join(f"{message} ({n})" for message, n in sorted(mine.items()))
        noun = "request" if total == 1 else "requests"
        return (
            f"refused {total} more {noun} before the application, past the {self._bound} "
            f"rows waiting to be written: {reasons}"
        )
