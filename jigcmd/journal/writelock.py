"""Taking the journal's write lock: at once, or waited for in fine steps.

Every write is a `BEGIN IMMEDIATE` transaction, and one connection of all the processes
sharing the file holds SQLite's write lock at a time, for a few statements and the commit
(a durable write syncs the WAL only after letting the lock go, `database.Database._sync_wal`).
SQLite's own busy handler waits for it by sleeping 1, 2, 5, 10, 15, 20, 25... ms between
tries, so with several servers on one state directory a waiter keeps losing to writers that
never slept (docs/performance.md, "The journal's write lock"). Here a waiting writer tries
again after 1 ms, then every 2 ms until its timeout, however long it has waited: it is never
asleep through a run of other writes, for the CPU of a few failed tries.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

__all__ = ["FIRST_PAUSE_S", "LONGEST_PAUSE_S", "WouldWait", "begin_immediate", "is_busy"]

FIRST_PAUSE_S = 0.001
LONGEST_PAUSE_S = 0.002
# The pause between tries (a seam for tests, which count the pauses instead of sleeping).
_sleep = time.sleep


class WouldWait(Exception):
    """A non-waiting write found the journal busy; nothing was written."""


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` says another connection holds a lock (`SQLITE_BUSY`, `SQLITE_LOCKED`)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def begin_immediate(
    conn: sqlite3.Connection,
    *,
    timeout_s: float | None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """`BEGIN IMMEDIATE` on `conn` (its busy timeout zero), retried until `timeout_s`.

    `timeout_s` None: one try, `WouldWait` if the lock is held. Otherwise the last
    `sqlite3.OperationalError` ("database is locked") once the timeout has passed; any other
    error at once. Nothing is left open when it raises.
    """
    deadline: float | None = None
    pause = FIRST_PAUSE_S
    # A transaction already open is the caller's: its BEGIN fails, and it is not ours to end.
    ours = not conn.in_transaction
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if ours and conn.in_transaction:
                conn.execute("ROLLBACK")
            if not is_busy(exc):
                raise
            if timeout_s is None:
                raise WouldWait from exc
            now = clock()
            if deadline is None:
                deadline = now + timeout_s
            if now >= deadline:
                raise
            _sleep(min(pause, deadline - now))
            pause = min(pause * 2, LONGEST_PAUSE_S)
