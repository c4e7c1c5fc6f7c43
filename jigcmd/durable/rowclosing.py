"""Closing rows after their answer: a row whose evidence is durable, and one left uncertain.

The close (cleanup proved, the resource report) is the last write of a completed run, made as
its answer goes out. It never decides what the caller hears: the evidence was durable first,
so a close lost to a crash is re-derived by recovery (`Journal.close_lost`); one the disk keeps
refusing past the closer's quick tries is handed to `LeftOpen`. A row whose outcome could not
be written at all was answered UNCERTAIN. `LeftOpen` closes both as they were answered (`done`
with the evidence, or uncertain in the words answered) as soon as the journal takes a write
again: at this server's next write, or by its own retries while the server lives idle, or at
its exit.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import NamedTuple

from jigcmd.errors import JigError
from jigcmd.journal.store import Journal

__all__ = ["JOURNAL_FAILURES", "Close", "LeftOpen", "RowCloser"]

logger = logging.getLogger(__name__)

# What a journal write raises when the disk or the database fails it (full, read-only, I/O).
JOURNAL_FAILURES = (sqlite3.Error, OSError)
# Pauses before the retries of a failed row close (a full disk may clear): 1.5 s in all,
# short enough for a server that exits meanwhile to stay within its two seconds.
_CLOSE_RETRY_S = (0.05, 0.2, 0.5, 0.75)
# A row's close with its evidence, report and statement bound: `Journal.finish`, to call.
Close = partial[bool | None]
# Pauses between the retries of closing the rows left open while this server lives (a full
# disk clears at the operator's pace): the last one repeats until they are closed.
_LEFT_OPEN_RETRY_S = (0.25, 0.5, 1.0, 2.0, 4.0)


class RowCloser:
    """Closes rows whose evidence is durable: here when it can, else in its one thread."""

    def __init__(self, left_open: LeftOpen) -> None:
        self._closer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jigcmd-closer")
        # Where a close the disk keeps refusing goes on being retried (and at exit).
        self._left_open = left_open

    def shutdown(self) -> None:
        """Finish the closes still pending (each retried as `_close_row` says; before
        `LeftOpen.shutdown`, which retries those given up once more)."""
        self._closer.shutdown(wait=True)

    def close(self, key: tuple[str, str], close: Close) -> None:
        """Close a row whose evidence is durable, here and without waiting; else in a thread.

        `key` is the row's (run, operation id). Unsynced and uncontended this is one quick
        local commit, cheaper than the hop to the closer thread and its wake-ups
        (docs/performance.md); a close that would wait for another writer, or fails, goes
        to the closer thread, which retries it.
        """
        operation_id = key[1]
        try:
            # No fsync: the evidence is durable already, with a statement signed before the
            # cleanup was proved; this one replaces it.
            closed = close(durable=False, wait=False)
        except JOURNAL_FAILURES as exc:
            logger.info("closing the journal row of %s at once failed: %s", operation_id, exc)
            closed = None
        if closed is None:
            closing = self._closer.submit(self._close_row, key, close)
            closing.add_done_callback(_report_close_failure)

    def _close_row(self, key: tuple[str, str], close: Close) -> None:
        """Close a row whose evidence is durable (in the closer thread), retrying failures.

        Reached when the close at once would have waited or failed: each try here waits for
        the writer. A close that keeps failing (a disk full for longer) goes to `LeftOpen`,
        retried while this server lives and at its exit; the row stays open with its
        evidence meanwhile, and recovery closes it `done` if this server dies first.
        """
        operation_id = key[1]
        for attempt, pause in enumerate((0.0, *_CLOSE_RETRY_S), start=1):
            time.sleep(pause)
            try:
                # The first try still skips the fsync, as the close at once did.
                closed = close(durable=attempt > 1)
                assert closed is not None  # a waiting write always writes or raises
                return
            except JOURNAL_FAILURES as exc:
                logger.warning(
                    "closing the journal row of %s failed (attempt %d): %s",
                    operation_id,
                    attempt,
                    exc,
                )
        logger.warning("the journal row of %s is closed once the journal takes it", operation_id)
        self._left_open.add_close(key, close)


def _report_close_failure(closing: Future[None]) -> None:
    error = closing.exception()
    if error is not None:
        # Not a journal failure (those go to `LeftOpen`): the row stays open with its durable
        # evidence, and recovery closes it (done) once this server is gone.
        logger.warning("closing a journal row after its answer failed: %s", error)


class _Left(NamedTuple):
    """A left-open row: the UNCERTAIN it was answered (None: its evidence), and its close."""

    uncertain: str | None
    close: Callable[[], object]


class LeftOpen:
    """This server's answered rows the journal would not close: their outcome unwritten
    (answered UNCERTAIN), or their evidence durable and only the close refused (`add_close`).

    Open, yet run nowhere: until closed, this server answers a retry of an UNCERTAIN one its
    UNCERTAIN (not a join), and `close_all` closes each as it was answered, so that every
    other process (`jigcmd runs`, doctor, another serve) sees them ended, and a replay says
    the same. A thread of its own retries that close while any is left, so an idle server's
    rows end as soon as space returns, not at its next call or exit (`shutdown` stops it).
    """

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._rows: dict[tuple[str, str], _Left] = {}
        # Guards `_rows` and `_retrier`, held briefly (an event loop takes it in `add`).
        self._guard = threading.Lock()
        # One close at a time: the retry thread's, a call's and the exit's.
        self._closing = threading.Lock()
        self._stopped = threading.Event()
        self._retrier: threading.Thread | None = None

    def __bool__(self) -> bool:
        return bool(self._rows)

    def add(self, key: tuple[str, str], error: JigError, *, cleanup_proved: bool) -> None:
        """Remember the row of (run, operation id) `key`, answered `error` (UNCERTAIN)."""
        assert error.ended_unix_ms is not None
        close = partial(
            self._journal.mark_uncertain,
            key[1],
            root_run=key[0],
            reason=error.message,
            cleanup_complete=cleanup_proved,
            problems="" if cleanup_proved else error.message,
            ended_unix_ms=error.ended_unix_ms,
        )
        self._keep(key, _Left(error.message, close))

    def add_close(self, key: tuple[str, str], close: Close) -> None:
        """Remember the row of `key`, answered its durable evidence, and its refused `close`."""
        # With the fsync now: the statement it replaces was synced with the evidence.
        self._keep(key, _Left(None, partial(close, durable=True)))

    def _keep(self, key: tuple[str, str], left: _Left) -> None:
        with self._guard:
            self._rows[key] = left
            if self._stopped.is_set() or self._retrier is not None:
                return
            self._retrier = threading.Thread(
                target=self._retry, name="jigcmd-left-open", daemon=True
            )
            self._retrier.start()

    def answered(self, key: tuple[str, str]) -> str | None:
        """The UNCERTAIN the row of `key` was answered with, while it is left open; else None
        (a row left open with its evidence is joined: it closes `done`)."""
        with self._guard:
            found = self._rows.get(key)
        return None if found is None else found.uncertain

    def shutdown(self) -> None:
        """Stop the retries, then close the rows still left open (blocking; before the
        journal closes)."""
        self._stopped.set()
        with self._guard:
            retrier = self._retrier
        if retrier is not None:
            retrier.join()
        self.close_all()

    def _retry(self) -> None:
        """Close the left-open rows, retrying with growing pauses until none is left."""
        for attempt in itertools.count():
            pause = _LEFT_OPEN_RETRY_S[min(attempt, len(_LEFT_OPEN_RETRY_S) - 1)]
            if self._stopped.wait(pause):
                return
            self.close_all()
            with self._guard:
                if not self._rows:
                    # Under the guard: an `add` after this starts a thread of its own.
                    self._retrier = None
                    return

    def close_all(self) -> None:
        """Close each left-open row as answered (blocking); stop at the first write that fails."""
        with self._closing:
            with self._guard:
                rows = list(self._rows.items())
            for (root_run, operation_id), left in rows:
                try:
                    # Written only while the row is open: a close recovery made stays.
                    left.close()
                except JOURNAL_FAILURES as exc:
                    # Still no room: tried again by the retries, at the next write, at exit,
                    # else by recovery.
                    logger.info("the journal row of %s stays open: %s", operation_id, exc)
                    return
                with self._guard:
                    self._rows.pop((root_run, operation_id), None)
