"""The write-ahead log a writer commits to, watched for being removed or replaced under it.

SQLite goes on committing to a WAL file whose name was removed (it holds the file open), and
the last close of the journal copies that file into the database. A write whose commit went
there after the caller was told "nothing ran" would come back as an operation begun and never
closed (UNCERTAIN forever). So each write looks at the name before its COMMIT and after it: a
write that finds the WAL gone before committing is rolled back (nothing of it is kept, and the
close still copies every earlier commit into the database, losing nothing); one that finds it
gone after committing disowns the WAL: this process takes no more writes and its close folds
nothing (the journal is then refused as one whose WAL was lost, never re-run).
"""

from __future__ import annotations

import ctypes
import os
import sqlite3
from pathlib import Path

from jigcmd.journal.failures import WalRemoved

__all__ = ["WalFile", "abandon"]


class WalFile:
    """The WAL file of one read-write connection, as it was when the journal was opened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._id = _identity(path)
        # Set once a commit may have gone to the WAL after its name was removed.
        self.disowned = False

    def removed(self) -> OSError | None:
        """Why the name no longer leads to the WAL this connection writes; None while it does."""
        now = _identity(self.path)
        if self._id is None:
            self._id = now  # SQLite makes the WAL at the first read of the journal
            return None
        if now == self._id:
            return None
        return WalRemoved(self.path.name)

    def check_uncommitted(self) -> None:
        """Before a COMMIT: raise if the WAL is gone (the transaction is then rolled back)."""
        gone = self.removed()
        if gone is not None:
            raise gone

    def check_committed(self) -> None:
        """After a COMMIT: raise, disowning the WAL, if the commit may have gone to a lost WAL."""
        gone = self.removed()
        if gone is not None:
            self.disowned = True
            raise gone


def abandon(conn: sqlite3.Connection) -> None:
    """Never close `conn`: its close would copy a disowned WAL into the database.

    One extra reference keeps the collector, at interpreter exit too, from closing it; the
    process's end then leaves the WAL as a SIGKILL would, unread.
    """
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino
