"""The journal's one SQLite connection and its discipline: durable writes, reads and syncs.

Every write runs in its own `BEGIN IMMEDIATE` transaction and has been committed durably
before `write` returns, so a row written before dispatch survives a SIGKILL or a power
cut at any later instant. The commit itself runs at `synchronous=NORMAL`: its frames reach
the WAL file and SQLite's write lock is let go at once; then the WAL file is fdatasynced.
Those are the frames `synchronous=FULL` would have synced before letting the lock go, now
without holding every other session's write behind the disk's flush (docs/performance.md,
the tenth round of #26). A commit is durable once the WAL holds it: recovery replays each
whole, checksummed transaction in it, and a checkpoint syncs the WAL before it copies one
into the database.

One `Database` holds one connection. It may be called from any thread (calls are
serialised by a lock; the server calls it through `anyio.to_thread`), but never from a
forked child: a child opens its own. What the rows mean is `jigcmd.journal.store`'s.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

from jigcmd.journal import inplace, writelock
from jigcmd.journal.aiosync import AioSync, PendingSync
from jigcmd.journal.failures import JournalUnusable, unusable
from jigcmd.journal.marker import Marker
from jigcmd.journal.readonly import connect_read_only
from jigcmd.journal.schema import check_readable, migrate
from jigcmd.journal.statefiles import directory_fd
from jigcmd.journal.walfile import WalFile, abandon
from jigcmd.journal.writelock import WouldWait

__all__ = ["DB_NAME", "Database", "JournalError"]

DB_NAME = "journal.sqlite3"
# Every table a journal must have (a database without one is damaged, not new).
_TABLES = ("operations", "jarvis_runs", "audit", "waiters")
# How long a writer waits for another process's write transaction before failing.
_BUSY_TIMEOUT_MS = 10_000
# How long a non-waiting write waits for this process's own lock. Its holder is one of this
# process's worker threads (a read, a retried close), mostly done sooner than a thread hop
# costs (docs/performance.md); a longer holder, or another process's transaction, is not
# waited for.
_OWN_LOCK_WAIT_S = 0.0005
# SQLite's page cache per connection, in KiB (its default 2000 filled as the journal grew
# and stayed in a long-lived server's image; docs/performance.md, "The server's idle image").
_CACHE_KIB = 256


class JournalError(Exception):
    """Raised when the journal is used wrongly (closed, or inherited across fork)."""


def _rollback(conn: sqlite3.Connection) -> None:
    """End a failed transaction, keeping the failure that ended it as the one raised.

    SQLite may have rolled back already (a full disk during a statement or the COMMIT):
    a second ROLLBACK would fail with "cannot rollback" and hide the real cause.
    """
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _check_tables(conn: sqlite3.Connection) -> None:
    """Refuse a database at the current version that lacks one of the journal's tables."""
    present = {
        name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    for name in _TABLES:
        if name not in present:
            raise sqlite3.DatabaseError(f"the journal's table {name!r} is missing")


def _close(
    conn: sqlite3.Connection,
    marker: Marker | None,
    *,
    owner_pid: int,
    path: Path,
    file_id: tuple[int, int],
    wal: WalFile | None,
) -> Exception | None:
    """Close `conn` in the process that opened it; mark the journal clean if it was the last.

    Never raises (it also runs at interpreter exit): what kept the close from completing (the
    state directory gone or unreadable, the WAL disowned) is returned, for `Database.close`.
    """
    if os.getpid() != owner_pid:
        return None  # a forked child never closes (or checkpoints) its parent's connection
    if wal is not None and wal.disowned:
        abandon(conn)
        return wal.removed()
    try:
        if marker is None:
            conn.close()
            return None
        with marker.locked():
            # Checked under the lock, before SQLite's last close may remove the WAL.
            gone = inplace.gone(path, file_id)
            conn.close()
            if gone is None:
                marker.closed()
            return gone
    except (OSError, sqlite3.Error) as exc:
        # Before the close: a journal moved away is found by the descriptor SQLite holds.
        gone = inplace.gone(path, file_id)
        with contextlib.suppress(sqlite3.Error):
            conn.close()
        return gone or exc


def _sync_error(error: int) -> OSError:
    """A sync through AIO that the kernel failed with `error`."""
    return OSError(error, f"syncing the journal: {os.strerror(error)}")


def _wal(conn: sqlite3.Connection, path: Path) -> None:
    """Put the database in WAL mode (it stays so); retry while another opener holds it.

    Switching a new database to WAL needs an exclusive lock, and SQLite answers "database is
    locked" at once, without its busy handler, when another process opens the same new
    database at that moment (seen with a server and a supervisor starting together).
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if mode != "wal":
                (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            break
        except sqlite3.OperationalError as exc:
            if not writelock.is_busy(exc):
                raise
            if time.monotonic() >= deadline:
                raise JournalError(f"{path}: still locked after {_BUSY_TIMEOUT_MS} ms") from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
    if mode != "wal":
        raise JournalError(f"{path}: the journal needs WAL mode, sqlite gave {mode!r}")


class Database:
    """One state directory's journal file: its connection, transactions and syncs."""

    def __init__(self, conn: sqlite3.Connection, path: Path, marker: Marker | None = None) -> None:
        """Wrap an open, migrated connection (use `Database.open`)."""
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.Lock()
        # The connection's busy timeout now, so that it is set only when the next statement
        # needs another (see `write`).
        self._busy_ms = _BUSY_TIMEOUT_MS
        self._wal_path = f"{path}-wal"
        # Set when a sync failed: what is in the WAL is no longer known to be on disk.
        self._unsynced: OSError | None = None
        # Syncs that do not wait (`sync_soon`): made at the first or by `prepare_syncs`, None
        # where there are none.
        self._aio: AioSync | None = None
        self._aio_tried = False
        self._pid = os.getpid()
        self._file = inplace.file_id(path)
        self._wal = None if marker is None else WalFile(Path(self._wal_path))
        # Also at interpreter exit: SQLite's last close removes the WAL, and only a close
        # that marks the journal clean keeps that from looking like a lost WAL next time.
        self._closer = weakref.finalize(
            self,
            _close,
            conn,
            marker,
            owner_pid=self._pid,
            path=path,
            file_id=self._file,
            wal=self._wal,
        )
        self.path = path

    @classmethod
    def open(cls, state_dir: Path) -> Database:
        """Open (creating and migrating if needed) the journal in a prepared state directory.

        Raises `JournalUnusable` (`JournalLost` among them) naming the file, the cause and
        the fix when it cannot: a full disk, a read-only directory, a damaged database.
        """
        path = state_dir / DB_NAME
        try:
            return cls._open(state_dir, path)
        except JournalUnusable:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise unusable(path, exc) from exc

    @classmethod
    def _open(cls, state_dir: Path, path: Path) -> Database:
        marker = Marker(state_dir, DB_NAME)
        with marker.locked(), contextlib.ExitStack() as probing:
            # Before SQLite looks: a lost or corrupt WAL must be refused, not silently dropped;
            # held until the writer is checked too, so that its refusal changes no file.
            if marker.check_before_open():
                probing.enter_context(marker.probed(timeout_s=_BUSY_TIMEOUT_MS / 1000))
            _create_private(state_dir)
            conn = sqlite3.connect(
                path,
                isolation_level=None,
                check_same_thread=False,
                timeout=_BUSY_TIMEOUT_MS / 1000,
            )
            try:
                _check_anchored(state_dir, path)
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS:d}")
                _wal(conn, path)
                # Commits reach the WAL unsynced; each durable write syncs it (`_sync_wal`).
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB:d}")
                migrate(conn)
                _check_tables(conn)
                marker.opened()
            except BaseException:
                conn.close()
                raise
        # The new database and WAL file names must survive a power cut too.
        os.fsync(directory_fd(state_dir))
        return cls(conn, path, marker)

    @classmethod
    def open_read_only(cls, state_dir: Path) -> Database:
        """Open the journal in `state_dir` to read it only: nothing migrated, marked or made.

        Checked as `open` checks it (a lost WAL, a missing table), on a read-only mount too
        (`jigcmd.journal.readonly`). Raises `JournalUnusable` as `open` does, and `SchemaError`
        for a schema version other than this jigcmd's.
        """
        path = state_dir / DB_NAME
        try:
            return cls._open_read_only(state_dir, path)
        except JournalUnusable:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise unusable(path, exc) from exc

    @classmethod
    def _open_read_only(cls, state_dir: Path, path: Path) -> Database:
        marker = Marker(state_dir, DB_NAME)
        with marker.locked():
            held_one = marker.check_before_open()
            conn = connect_read_only(path, timeout_s=_BUSY_TIMEOUT_MS / 1000)
            try:
                _check_anchored(state_dir, path)
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB:d}")
                (version,) = conn.execute("PRAGMA user_version").fetchone()
                if held_one:
                    marker.check_schema(version)
                check_readable(version)
                _check_tables(conn)
            except BaseException:
                conn.close()
                raise
        return cls(conn, path)

    def close(self) -> None:
        """Close the connection (idempotent); the last one out marks the journal clean.

        Raises `JournalUnusable` (after closing) when the journal could not be closed as it
        was opened: its state directory was removed, replaced or became unreadable.
        """
        with self._lock:
            if self._aio is not None:
                self._aio.close()
                self._aio = None
            failure = self._closer()
            self._conn = None
        if failure is not None:
            raise unusable(self.path, failure) from failure

    def lost(self) -> JournalUnusable | None:
        """Why the journal file, or the WAL this writer commits to, is no longer the one opened
        (its state directory removed or replaced, the WAL removed); None while both are."""
        gone = inplace.gone(self.path, self._file)
        if gone is None and self._wal is not None:
            gone = self._wal.removed()
        return None if gone is None else unusable(self.path, gone)

    def settings(self) -> dict[str, int | str]:
        """The durability settings in force (for tests and `jigcmd doctor`)."""
        with self.read() as conn:
            return {
                name: conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "user_version", "busy_timeout")
            }

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads, under this journal's lock."""
        with self._lock:
            conn = self._connection()
            self._busy(conn, _BUSY_TIMEOUT_MS)
            yield conn

    # A statement of its own: set only when it changes. A write leaves the busy timeout at
    # zero (it waits in `writelock`'s steps); a read sets its own first.
    def _busy(self, conn: sqlite3.Connection, ms: int) -> None:
        if self._busy_ms != ms:
            conn.execute(f"PRAGMA busy_timeout = {ms:d}")
            self._busy_ms = ms

    def _sync_wal(self) -> None:
        """fdatasync the WAL file: every commit in it so far is on disk when this returns.

        Raises OSError when it cannot. The write then fails (its commit is in the WAL, seen by
        other connections, but not known to be on disk, so nothing may be dispatched on it),
        and so does every later write of this `Database`: after a failed sync the kernel may
        have dropped the pages it could not write, so no later sync would prove them.
        """
        try:
            # Opened by name each time (a few µs): a descriptor kept open would go on syncing
            # the old file if the WAL were ever made anew, and prove nothing.
            fd = os.open(self._wal_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self._unsynced = exc
            raise

    def sync_soon(self) -> PendingSync | None:
        """Start syncing the WAL (every commit in it so far) without waiting for the disk.

        Returns the sync in flight: `synced` tells when it is done. Returns None when the
        WAL was synced here instead, as a durable write syncs it (no AIO on this kernel, or
        none for this file system). Raises OSError as a durable write does when an earlier
        sync failed or this one cannot start, and every later write then fails too.
        """
        with self._lock:
            self._refuse_unsynced()
            aio = self._aio_context()
            if aio is not None:
                try:
                    fd = os.open(self._wal_path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError as exc:
                    self._unsynced = exc
                    raise
                try:
                    return aio.submit(fd)
                except OSError as exc:
                    os.close(fd)
                    if exc.errno != errno.EAGAIN:
                        # This file system cannot, or a filter refuses: in place from now on.
                        self._aio = None
                        aio.close()
            self._sync_wal()
            return None

    def synced(self, pending: PendingSync) -> bool:
        """Whether `pending` (from `sync_soon`) is on disk; False while it is in flight.

        Raises OSError when it failed; every later write then fails too.
        """
        if not pending.done():
            return False
        if pending.result:
            raise _sync_error(pending.result)
        return True

    def prepare_syncs(self) -> bool:
        """Make the AIO context `sync_soon` uses now, not at the first sync; False if none."""
        # fs.aio-max-nr is one count for the whole host: a context made at the start is not
        # lost to another process that takes the rest of it later.
        with self._lock:
            return self._aio_context() is not None

    def _aio_context(self) -> AioSync | None:
        if not self._aio_tried:
            self._aio_tried = True
            self._aio = AioSync.open(self._sync_failed)
        return self._aio

    def _sync_failed(self, error: int) -> None:
        if self._unsynced is None:
            self._unsynced = _sync_error(error)

    def _refuse_unsynced(self) -> None:
        failed = self._unsynced
        if failed is not None:
            raise OSError(
                failed.errno,
                f"{failed.strerror or failed} (an earlier write to the journal could not be "
                "synced to disk; this process takes no more writes to it)",
            )

    @contextlib.contextmanager
    def write(self, *, durable: bool = True, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed (and with `durable`, synced) when the block ends."""
        # wait=False: raise WouldWait instead of waiting for another process's write
        # transaction, or for this journal's lock beyond `_OWN_LOCK_WAIT_S`
        # (`Journal.begin_now`).
        # A waiting write waits in `writelock`'s fine steps, never in SQLite's busy handler.
        # durable=False: no sync of its own; the next durable write's sync takes it along.
        if not self._lock.acquire(timeout=-1 if wait else _OWN_LOCK_WAIT_S):
            raise WouldWait
        try:
            conn = self._connection()
            if self._aio is not None and self._aio.in_flight():
                self._aio.collect()  # a failed one, nobody waiting for it, refuses this write
            self._refuse_unsynced()
            gone = inplace.gone(self.path, self._file)
            if gone is not None:
                raise gone
            self._busy(conn, 0)
            writelock.begin_immediate(conn, timeout_s=_BUSY_TIMEOUT_MS / 1000 if wait else None)
            try:
                yield conn
                if self._wal is not None:
                    self._wal.check_uncommitted()
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            if self._wal is not None:
                self._wal.check_committed()
            if durable:
                self._sync_wal()
        finally:
            self._lock.release()

    def _connection(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:
            raise JournalError("a journal cannot be used across fork; open one in the child")
        if self._conn is None:
            raise JournalError("the journal is closed")
        return self._conn


def _check_anchored(state_dir: Path, path: Path) -> None:
    """Refuse a journal `path` that is not the plain file `DB_NAME` of the held state directory.

    SQLite opens a database by path only; it cannot be given a directory descriptor. Nor
    would `/proc/self/fd/<dir fd>/journal.sqlite3` help: SQLite resolves a database path's
    links itself (to keep its -wal and -shm beside the real file), so it would open the same
    file by its real path. So the path is kept and checked once opened: the file found by
    it must be the one found through the state directory's held descriptor with no link
    followed (`jigcmd.journal.statefiles`). Every component of the path was checked at start
    (only root or this user can change it), so this is a second fence, not the first.
    """
    through = os.stat(DB_NAME, dir_fd=directory_fd(state_dir), follow_symlinks=False)
    named = os.stat(path)
    if (through.st_dev, through.st_ino) != (named.st_dev, named.st_ino):
        raise OSError(
            errno.ELOOP,
            f"{path} is not the journal file of the state directory checked at start (a "
            "symbolic link, or the directory replaced since); move the whole state "
            "directory instead and pass --state-dir with its new path",
        )


def _create_private(state_dir: Path) -> None:
    """Create the database file 0600 (never by SQLite under some umask) if it is missing.

    Only a file made here is opened and closed: POSIX record locks belong to a process and a
    file, so closing any descriptor of a database this process has open elsewhere would drop
    that connection's SQLite locks (and let another process's close delete the WAL under it).
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileExistsError):
        os.close(os.open(DB_NAME, flags, 0o600, dir_fd=directory_fd(state_dir)))
