"""jarvis's one way to its journal: a store call at a time, off the event loop, fail closed.

SQLite goes on reading and writing a journal file that was unlinked: a jarvis whose state
directory was removed (or replaced) would answer from a deleted database and audit into
it, where nobody can ever read a row. So every store call first checks that the journal is
still the file it opened (and again when the call fails). Once it is not, the call raises
`JournalUnusable` (its message names the file, the cause and the fix) and `lost` is set:
the server stops at once, fail closed, and the front says so in one line as it exits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import anyio

from jigcmd.cancel import CancelSignal
from jigcmd.journal.store import Journal, JournalUnusable

__all__ = ["JournalCalls", "RunUnrecorded"]

_T = TypeVar("_T")


class RunUnrecorded(JournalUnusable):
    """The journal was lost after run `run_id`'s start was recorded: its caller is told the
    run's id, which it cannot read now (the next start marks the run uncertain)."""

    def __init__(self, lost: JournalUnusable, run_id: int) -> None:
        super().__init__(lost.path, lost.cause, lost.fix)
        self.run_id = run_id


class JournalCalls:
    """Runs store calls on one journal, one at a time in a worker thread, while it is there."""

    def __init__(self, store: Journal) -> None:
        self._store = store
        # SQLite fsyncs: off the event loop, and one call at a time.
        self._limiter = anyio.CapacityLimiter(1)
        # Set once the journal is found lost: whoever serves jarvis stops on it.
        self.lost = CancelSignal()

    async def __call__(self, call: Callable[[], _T]) -> _T:
        """`call()`'s result; `JournalUnusable` (and `lost` set) when the journal is gone."""
        try:
            return await anyio.to_thread.run_sync(
                partial(self._checked, call), limiter=self._limiter
            )
        except JournalUnusable:
            self.lost.set()
            raise

    def _checked(self, call: Callable[[], _T]) -> _T:
        lost = self._store.lost()
        if lost is None:
            try:
                return call()
            except (OSError, sqlite3.Error):
                # Removed between the check and the call: say so, not SQLite's own words.
                lost = self._store.lost()
                if lost is None:
                    raise
        raise lost
