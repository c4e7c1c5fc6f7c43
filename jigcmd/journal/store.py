"""The ownership journal: a SQLite database in the state directory that outlives every process.

Every write runs in its own `BEGIN IMMEDIATE` transaction and has been committed durably
before the method returns, so a row written before dispatch survives a SIGKILL or a power
cut at any later instant. The commit itself runs at `synchronous=NORMAL`: its frames reach
the WAL file and SQLite's write lock is let go at once; then the WAL file is fdatasynced.
Those are the frames `synchronous=FULL` would have synced before letting the lock go, now
without holding every other session's write behind the disk's flush (docs/performance.md,
the tenth round of #26). A commit is durable once the WAL holds it: recovery replays each
whole, checksummed transaction in it, and a checkpoint syncs the WAL before it copies one
into the database.

One `Journal` holds one connection. It may be called from any thread (calls are
serialised by a lock; the server calls it through `anyio.to_thread`), but never from a
forked child: a child (the supervisor) opens its own `Journal`. An operation is keyed by
its caller's run and its operation id: identity holds within one run (across servers and
restarts given the same run id), never across runs.

Ownership row life: `dispatching` (written before dispatch) → `running` (the envelope
serving it is recorded: supervisor, cgroups, netns; a prepared envelope, known before the
launch, is recorded by `begin` itself, so such a row is `running` from its first commit,
before the candidate may start) → `done` (result recorded, cleanup
confirmed) or `uncertain` (no proved result, or cleanup unconfirmed). Closed rows never
reopen; `uncertain` is forever. Envelopes that exist but serve no row yet are known from
their own registry (`jigcmd.journal.envelopes`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import msgspec

from jigcmd.journal import identity, toolruns, writelock
from jigcmd.journal.aiosync import AioSync, PendingSync
from jigcmd.journal.failures import JournalLost, JournalUnusable, unusable
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.marker import Marker
from jigcmd.journal.rows import OPEN_STATES, Begin, NewRow, Outcome, Row, State, row_from
from jigcmd.journal.schema import migrate
from jigcmd.journal.toolruns import AuditRow, JarvisDecision, JarvisEnd, JarvisRun
from jigcmd.journal.writelock import WouldWait

__all__ = ["DB_NAME", "Journal", "JournalError", "JournalLost", "JournalUnusable"]

DB_NAME = "journal.sqlite3"
# Every table a journal must have (a database without one is damaged, not new).
_TABLES = ("operations", "jarvis_runs", "audit")
# One operation row by its key: its caller's run and its operation id.
_SELECT_ROW = "SELECT * FROM operations WHERE root_run = ? AND operation_id = ?"
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
    owner_pid: int,
    path: Path,
    file_id: tuple[int, int],
) -> Exception | None:
    """Close `conn` in the process that opened it; mark the journal clean if it was the last.

    Never raises (it also runs at interpreter exit): what kept the close from completing (the
    state directory gone or unreadable) is returned, for `Journal.close` to report.
    """
    if os.getpid() != owner_pid:
        return None  # a forked child never closes (or checkpoints) its parent's connection
    try:
        if marker is None:
            conn.close()
            return None
        with marker.locked():
            # Checked under the lock, before SQLite's last close may remove the WAL.
            gone = _gone(path, file_id)
            conn.close()
            if gone is None:
                marker.closed()
            return gone
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
        return _gone(path, file_id) or exc


def _file_id(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_dev, info.st_ino


def _gone(path: Path, file_id: tuple[int, int]) -> OSError | None:
    """Why `path` is no longer the journal file opened as `file_id`, or None while it is.

    SQLite goes on writing to an unlinked file without a word: a journal whose state
    directory was removed (or replaced) would record operations nobody can ever read.
    """
    try:
        if _file_id(path) == file_id:
            return None
    except FileNotFoundError:
        pass
    return FileNotFoundError(
        errno.ENOENT,
        f"the journal file was removed while in use (its state directory {path.parent} "
        "was deleted or replaced)",
    )


def _sync_error(error: int) -> OSError:
    """A sync through AIO that the kernel failed with `error`."""
    return OSError(error, f"syncing the journal: {os.strerror(error)}")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


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


class Journal:
    """The ownership journal and the jarvis records of one state directory."""

    def __init__(self, conn: sqlite3.Connection, path: Path, marker: Marker | None = None) -> None:
        """Wrap an open, migrated connection (use `Journal.open`)."""
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.Lock()
        # The connection's busy timeout now, so that it is set only when the next statement
        # needs another (see `_write`).
        self._busy_ms = _BUSY_TIMEOUT_MS
        self._wal_path = f"{path}-wal"
        # Set when a sync failed: what is in the WAL is no longer known to be on disk.
        self._unsynced: OSError | None = None
        # Syncs that do not wait (`sync_soon`): made at the first, None where there are none.
        self._aio: AioSync | None = None
        self._aio_tried = False
        self._pid = os.getpid()
        self._file = _file_id(path)
        # Also at interpreter exit: SQLite's last close removes the WAL, and only a close
        # that marks the journal clean keeps that from looking like a lost WAL next time.
        self._closer = weakref.finalize(self, _close, conn, marker, self._pid, path, self._file)
        self._me = identity.current()
        self.path = path

    @classmethod
    def open(cls, state_dir: Path) -> Journal:
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
    def _open(cls, state_dir: Path, path: Path) -> Journal:
        marker = Marker(state_dir, DB_NAME)
        with marker.locked():
            # Before SQLite looks: a lost or corrupt WAL must be refused, not silently dropped.
            held_one = marker.check_before_open()
            # Created 0600 by us, never by sqlite under some umask.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
            conn = sqlite3.connect(
                path,
                isolation_level=None,
                check_same_thread=False,
                timeout=_BUSY_TIMEOUT_MS / 1000,
            )
            try:
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS:d}")
                _wal(conn, path)
                # Commits reach the WAL unsynced; each durable write syncs it (`_sync_wal`).
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB:d}")
                if held_one:
                    (version,) = conn.execute("PRAGMA user_version").fetchone()
                    marker.check_schema(version)
                migrate(conn)
                _check_tables(conn)
                marker.opened()
            except BaseException:
                conn.close()
                raise
        # The new database and WAL file names must survive a power cut too.
        dir_fd = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return cls(conn, path, marker)

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

    def settings(self) -> dict[str, int | str]:
        """The durability settings in force (for tests and `jigcmd doctor`)."""
        with self._read() as conn:
            return {
                name: conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "user_version", "busy_timeout")
            }

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connection discipline ---------------------------------------------------------

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
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
        and so does every later write of this `Journal`: after a failed sync the kernel may
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
    def _write(self, *, durable: bool = True, wait: bool = True) -> Iterator[sqlite3.Connection]:
        # wait=False: raise WouldWait instead of waiting for another process's write
        # transaction, or for this journal's lock beyond `_OWN_LOCK_WAIT_S` (see `begin_now`).
        # A waiting write waits in `writelock`'s fine steps, never in SQLite's busy handler.
        # durable=False: no sync of its own; the next durable write's sync takes it along.
        if not self._lock.acquire(timeout=-1 if wait else _OWN_LOCK_WAIT_S):
            raise WouldWait
        try:
            conn = self._connection()
            if self._aio is not None and self._aio.in_flight():
                self._aio.collect()  # a failed one, nobody waiting for it, refuses this write
            self._refuse_unsynced()
            gone = _gone(self.path, self._file)
            if gone is not None:
                raise gone
            self._busy(conn, 0)
            writelock.begin_immediate(conn, timeout_s=_BUSY_TIMEOUT_MS / 1000 if wait else None)
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            if durable:
                self._sync_wal()
        finally:
            self._lock.release()

    def _connection(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:
            raise JournalError("a Journal cannot be used across fork; open one in the child")
        if self._conn is None:
            raise JournalError("the journal is closed")
        return self._conn

    # -- Project Command operations ----------------------------------------------------

    def begin(self, new: NewRow) -> Begin:
        """Insert `new` for a new operation id, or return the row that holds the id."""
        with self._write() as conn:
            return self._insert(conn, new)

    def begin_now(self, new: NewRow) -> Begin | None:
        """`begin`, or None (nothing written) when it would have to wait for another writer.

        For a caller on an event loop: the uncontended case (one server, the usual one) is a
        quick local commit, done without a thread hop; so is one that finds one of this
        process's worker threads finishing a write (waited out for at most
        `_OWN_LOCK_WAIT_S`); a contended one returns None at once, for the caller to try
        again later or to wait with `begin` in a worker thread (`jigcmd.durable.pathwrite`).
        """
        try:
            with self._write(wait=False) as conn:
                return self._insert(conn, new)
        except WouldWait:
            return None

    def _insert(self, conn: sqlite3.Connection, new: NewRow) -> Begin:
        # One statement in the usual case (a new operation id): the insert returns the row
        # it wrote; only a key already taken is read back (`_SELECT_ROW`). A reused run id
        # is still refused (only the key's conflict is taken as "known").
        now = _now_ms()
        supervisor = new.supervisor
        inserted = conn.execute(
            "INSERT INTO operations (root_run, operation_id, signature, context,"
            " created_unix_ms, updated_unix_ms, deadline_unix_ms, run_id, owner_pid,"
            " owner_start, boot_id, state, supervisor_pid, supervisor_start, cgroup_paths,"
            " plan_digest, trace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (root_run, operation_id) DO NOTHING RETURNING *",
            (
                new.root_run,
                new.operation_id,
                new.signature,
                new.context,
                now,
                now,
                new.deadline_unix_ms,
                new.run_id,
                self._me.pid,
                self._me.start,
                self._me.boot_id,
                "dispatching" if supervisor is None else "running",
                None if supervisor is None else supervisor.pid,
                None if supervisor is None else supervisor.start,
                msgspec.json.encode(list(new.cgroup_paths)).decode("utf-8"),
                new.plan_digest,
                new.trace,
            ),
        ).fetchall()
        if inserted:
            return Begin(row=row_from(inserted[0]), created=True)
        found = conn.execute(_SELECT_ROW, (new.root_run, new.operation_id)).fetchone()
        return Begin(row=row_from(found), created=False)

    def record_envelope(
        self,
        operation_id: str,
        *,
        root_run: str,
        supervisor: ProcessIdentity,
        cgroup_paths: Sequence[str],
        netns: str,
        plan_digest: str | None = None,
    ) -> bool:
        """Record the envelope's identity on an open row (→ `running`); False if it is closed.

        `plan_digest` None keeps the digest the row was begun with.
        """
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE operations SET state = 'running', supervisor_pid = ?,"
                " supervisor_start = ?, cgroup_paths = ?, netns = ?,"
                " plan_digest = COALESCE(?, plan_digest),"
                " updated_unix_ms = ? WHERE root_run = ? AND operation_id = ? AND state IN (?, ?)",
                (
                    supervisor.pid,
                    supervisor.start,
                    msgspec.json.encode(list(cgroup_paths)).decode("utf-8"),
                    netns,
                    plan_digest,
                    _now_ms(),
                    root_run,
                    operation_id,
                    *OPEN_STATES,
                ),
            )
            return cursor.rowcount == 1

    def record_result(
        self,
        operation_id: str,
        *,
        root_run: str,
        outcome: Outcome,
        result: bytes,
        attestation: bytes | None = None,
        durable: bool = True,
        wait: bool = True,
    ) -> bool | None:
        """Store a run's result and its attestation on its still-open row (cleanup pending).

        False if closed. `durable=False` commits without a sync: the caller then syncs with
        `sync_soon` before anything relies on it. `wait=False`: None (nothing written) when
        it would have to wait for another writer, as `begin_now`.
        """
        try:
            with self._write(durable=durable, wait=wait) as conn:
                cursor = conn.execute(
                    "UPDATE operations SET outcome = ?, result = ?, attestation = ?,"
                    " updated_unix_ms = ?"
                    " WHERE root_run = ? AND operation_id = ? AND state IN (?, ?)",
                    (outcome, result, attestation, _now_ms(), root_run, operation_id, *OPEN_STATES),
                )
                return cursor.rowcount == 1
        except WouldWait:
            return None

    def finish(
        self,
        operation_id: str,
        *,
        root_run: str,
        outcome: Outcome,
        result: bytes,
        report: bytes | None,
        cleanup_complete: bool,
        problems: str = "",
        durable: bool = True,
        attestation: bytes | None = None,
        wait: bool = True,
    ) -> bool | None:
        """Close an open row with its result: `done`, or `uncertain` when cleanup is unconfirmed.

        `result` must be the exact bytes answered to the caller: replay returns them verbatim,
        and `attestation` (the run's signed statement) with them. None keeps the one the row
        has; an `uncertain` row keeps none.
        False (and nothing written) when the row was already closed: the first close wins.
        `durable=False` skips the fsync; only for a row whose result `record_result` already
        made durable (a lost close is re-derived by `close_lost`). `wait=False`: None (nothing
        written) when it would have to wait for another writer, as `begin_now`.
        """
        state: State = "done" if cleanup_complete else "uncertain"
        try:
            with self._write(durable=durable, wait=wait) as conn:
                now = _now_ms()
                cursor = conn.execute(
                    "UPDATE operations SET state = ?, outcome = ?, result = ?, report = ?,"
                    " attestation = CASE WHEN ? = 'done' THEN COALESCE(?, attestation) END,"
                    " cleanup = ?, problems = ?, reason = ?, updated_unix_ms = ?,"
                    " finished_unix_ms = ?"
                    " WHERE root_run = ? AND operation_id = ? AND state IN (?, ?)",
                    (
                        state,
                        outcome,
                        result,
                        report,
                        state,
                        attestation,
                        "complete" if cleanup_complete else "failed",
                        problems,
                        "" if cleanup_complete else "the run's cleanup could not be confirmed",
                        now,
                        now,
                        root_run,
                        operation_id,
                        *OPEN_STATES,
                    ),
                )
                return cursor.rowcount == 1
        except WouldWait:
            return None

    def mark_uncertain(
        self,
        operation_id: str,
        *,
        root_run: str,
        reason: str,
        cleanup_complete: bool,
        problems: str = "",
    ) -> bool:
        """Close an open row as `uncertain`; False (nothing written) when it was already closed."""
        return self._close_open(
            operation_id,
            root_run=root_run,
            reason=reason,
            cleanup_complete=cleanup_complete,
            problems=problems,
            done_with_evidence=False,
        )

    def close_lost(
        self,
        operation_id: str,
        *,
        root_run: str,
        reason: str,
        cleanup_complete: bool,
        problems: str = "",
    ) -> bool:
        """Close an open row whose server is gone, with the cleanup someone else proved.

        `done` when the run's evidence was recorded before the server went (its result is
        replayed as is) and the cleanup is proved; otherwise `uncertain` with `reason`.
        False (nothing written) when the row was already closed.
        """
        return self._close_open(
            operation_id,
            root_run=root_run,
            reason=reason,
            cleanup_complete=cleanup_complete,
            problems=problems,
            done_with_evidence=cleanup_complete,
        )

    def _close_open(
        self,
        operation_id: str,
        *,
        root_run: str,
        reason: str,
        cleanup_complete: bool,
        problems: str,
        done_with_evidence: bool,
    ) -> bool:
        with self._write() as conn:
            now = _now_ms()
            cursor = conn.execute(
                "UPDATE operations SET"
                " state = CASE WHEN ? AND outcome = 'evidence' THEN 'done' ELSE 'uncertain' END,"
                " reason = CASE WHEN ? AND outcome = 'evidence' THEN '' ELSE ? END,"
                # An uncertain row keeps no statement: nobody saw that run's end proved.
                " attestation = CASE WHEN ? AND outcome = 'evidence' THEN attestation END,"
                " cleanup = ?, problems = ?, updated_unix_ms = ?, finished_unix_ms = ?"
                " WHERE root_run = ? AND operation_id = ? AND state IN (?, ?)",
                (
                    done_with_evidence,
                    done_with_evidence,
                    reason,
                    done_with_evidence,
                    "complete" if cleanup_complete else "failed",
                    problems,
                    now,
                    now,
                    root_run,
                    operation_id,
                    *OPEN_STATES,
                ),
            )
            return cursor.rowcount == 1

    def record_cleanup(
        self, operation_id: str, *, root_run: str, complete: bool, problems: str = ""
    ) -> bool:
        """Update the cleanup outcome of a closed row (recovery re-checking it); False if open."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE operations SET cleanup = ?, problems = ?, updated_unix_ms = ?"
                " WHERE root_run = ? AND operation_id = ? AND state IN ('done', 'uncertain')",
                (
                    "complete" if complete else "failed",
                    problems,
                    _now_ms(),
                    root_run,
                    operation_id,
                ),
            )
            return cursor.rowcount == 1

    def get(self, operation_id: str, *, root_run: str) -> Row | None:
        """The row of `operation_id` in the caller's run `root_run`, or None."""
        with self._read() as conn:
            found = conn.execute(_SELECT_ROW, (root_run, operation_id)).fetchone()
        return None if found is None else row_from(found)

    def by_run_id(self, run_id: str) -> Row | None:
        """The row whose envelope is `run_id` (cgroup job `jigcmd-<run_id>`), or None."""
        with self._read() as conn:
            found = conn.execute("SELECT * FROM operations WHERE run_id = ?", (run_id,)).fetchone()
        return None if found is None else row_from(found)

    def rows(self) -> list[Row]:
        """Every ownership row, oldest first."""
        return self._rows("1 = 1")

    def open_rows(self) -> list[Row]:
        """Every row still `dispatching` or `running`, oldest first."""
        return self._rows("state IN ('dispatching', 'running')")

    def cleanup_failures(self) -> list[Row]:
        """Every closed row whose cleanup was not confirmed (for `jigcmd doctor`), oldest first."""
        return self._rows("cleanup = 'failed'")

    def _rows(self, where: str) -> list[Row]:
        with self._read() as conn:
            found = conn.execute(
                f"SELECT * FROM operations WHERE {where} ORDER BY created_unix_ms, operation_id"  # noqa: S608 - our own constant clauses
            ).fetchall()
        return [row_from(r) for r in found]

    # -- jarvis runs and the audit trail ------------------------------------------------

    def jarvis_begin(
        self,
        *,
        tool: str,
        argv: Sequence[str],
        cwd: str,
        actor: str,
        decision: JarvisDecision,
        matched_rule: str | None,
        reason: str,
        envelope_run_id: str | None = None,
    ) -> int:
        """Record a decided call before anything runs (`running` or `denied`); return its id."""
        with self._write() as conn:
            return toolruns.insert_run(
                conn,
                now_ms=_now_ms(),
                owner=(self._me.pid, self._me.start, self._me.boot_id),
                tool=tool,
                argv=argv,
                cwd=cwd,
                actor=actor,
                decision=decision,
                matched_rule=matched_rule,
                reason=reason,
                envelope_run_id=envelope_run_id,
            )

    def jarvis_finish(
        self,
        run_id: int,
        *,
        status: JarvisEnd,
        exit_code: int | None = None,
        signal: str | None = None,
        stdout: str = "",
        stderr: str = "",
        stdout_truncated: bool = False,
        stderr_truncated: bool = False,
        timings: Mapping[str, float] | None = None,
        attestation: bytes | None = None,
    ) -> bool:
        """Close a running jarvis run (with its statement); False when it was not running."""
        with self._write() as conn:
            return toolruns.finish_run(
                conn,
                run_id,
                now_ms=_now_ms(),
                status=status,
                exit_code=exit_code,
                signal=signal,
                stdout=stdout,
                stderr=stderr,
                stdout_truncated=stdout_truncated,
                stderr_truncated=stderr_truncated,
                timings=timings or {},
                attestation=attestation,
            )

    def jarvis_get(self, run_id: int) -> JarvisRun | None:
        """One jarvis run by id, or None."""
        with self._read() as conn:
            found = conn.execute("SELECT * FROM jarvis_runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if found is None else toolruns.run_from(found)

    def jarvis_running(self) -> list[JarvisRun]:
        """Every jarvis run still `running`, oldest first."""
        with self._read() as conn:
            found = conn.execute(
                "SELECT * FROM jarvis_runs WHERE status = 'running' ORDER BY run_id"
            ).fetchall()
        return [toolruns.run_from(r) for r in found]

    def audit(
        self,
        *,
        actor: str,
        tool: str,
        argv: Sequence[str],
        cwd: str,
        decision: str,
        matched_rule: str | None,
        outcome: str,
    ) -> int:
        """Append one decision to the audit trail, durably; its sequence number."""
        with self._write() as conn:
            return toolruns.insert_audit(
                conn,
                now_ms=_now_ms(),
                actor=actor,
                tool=tool,
                argv=argv,
                cwd=cwd,
                decision=decision,
                matched_rule=matched_rule,
                outcome=outcome,
            )

    def audit_rows(self, limit: int = 100) -> list[AuditRow]:
        """The newest `limit` audit rows, newest first."""
        with self._read() as conn:
            found = conn.execute(
                "SELECT * FROM audit ORDER BY seq DESC LIMIT ?", (limit,)
            ).fetchall()
        return [toolruns.audit_from(r) for r in found]
