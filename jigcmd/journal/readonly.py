"""Reading a WAL-mode journal without writing to it, on a read-only mount too.

The verbs that only read (`runs`, `attest`, `jarvis-audit`) open the journal with SQLite's
`mode=ro`. SQLite reads a WAL-mode database read-only when its `-wal` and `-shm` files exist,
or when they can be made beside it (then the reader leaves them there, empty, for the next
writer's close to remove) (sqlite.org/wal.html, "Read-Only Databases"). On a read-only
mount after a writer's clean close neither exists nor can be made, and SQLite refuses
(`SQLITE_CANTOPEN`). Then the database is opened `immutable=1`, which is exact there: with
no WAL every commit is in the database file, and the mount keeps anyone from changing it.
`immutable` ignores a WAL, so a WAL holding commits (a writer killed) without its `-shm` is
refused, never read short. A full filesystem is read so too (`jigcmd prune --dry-run` on a
full disk): SQLite cannot size a `-shm` there, and with an empty WAL every commit is in the
database file, which no writer changes while it cannot grow its WAL.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path

from jigcmd.journal.failures import filesystem_full, wal_unreadable

__all__ = ["connect_read_only"]

# What SQLite raises when it cannot make or size the `-shm` on a full filesystem.
_UNSIZED = (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN)


def connect_read_only(path: Path, *, timeout_s: float) -> sqlite3.Connection:
    """A connection that only reads the journal `path`, its WAL included, having read it once.

    Raises `sqlite3.Error` as SQLite does, and `JournalUnusable` for a WAL it cannot read.
    """
    conn = _connect(path, "mode=ro", timeout_s)
    try:
        # SQLite opens the WAL and its index at the first read, not at connect.
        conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.Error as exc:
        # Closed whatever the error ("file is not a database" is no OperationalError):
        # a connection left to the collector holds the file open until it runs.
        conn.close()
        primary = _primary(exc) if isinstance(exc, sqlite3.OperationalError) else None
        if primary == sqlite3.SQLITE_CANTOPEN and _read_only_mount(path.parent):
            if _size(Path(f"{path}-wal")) > 0:
                raise wal_unreadable(path) from exc
        elif primary not in _UNSIZED or not filesystem_full(path.parent):
            raise
        elif _size(Path(f"{path}-wal")) > 0:
            raise  # commits only the WAL holds: a full disk, worded so (`unusable`)
        return _connect(path, "immutable=1", timeout_s)
    return conn


def _connect(path: Path, query: str, timeout_s: float) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(os.fspath(path))}?{query}"
    return sqlite3.connect(
        uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout_s
    )


def _primary(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _read_only_mount(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
