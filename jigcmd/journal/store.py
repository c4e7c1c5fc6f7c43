"""The ownership journal: the rows of one state directory that outlive every process.

An operation is keyed by its caller's run and its operation id: identity holds within one
run (across servers and restarts given the same run id), never across runs. Every write is
its own durable transaction (`jigcmd.journal.database`); the jarvis provider's runs and its
audit trail live beside the operations (`jigcmd.journal.jarvisrecords`), and so do the joins
of operations that other processes wait for (`jigcmd.journal.waiters`, unsynced: they name
live processes only).

Ownership row life: `dispatching` (written before dispatch) → `running` (the envelope
serving it is recorded: supervisor, cgroups, netns; a prepared envelope, known before the
launch, is recorded by `begin` itself, so such a row is `running` from its first commit,
before the candidate may start) → `done` (result recorded, cleanup
confirmed) or `uncertain` (no proved result, or cleanup unconfirmed). Closed rows never
reopen; `uncertain` is forever. Envelopes that exist but serve no row yet are known from
their own registry (`jigcmd.journal.envelopes`).
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import msgspec

from jigcmd.clock import unix_ms
from jigcmd.journal import identity, liveness
from jigcmd.journal.aiosync import PendingSync
from jigcmd.journal.database import DB_NAME, Database, JournalError
from jigcmd.journal.failures import JournalLost, JournalUnusable
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.jarvisrecords import JarvisRecords
from jigcmd.journal.rows import OPEN_STATES, Begin, NewRow, Outcome, Row, State, row_from
from jigcmd.journal.statefiles import StateDirError
from jigcmd.journal.waiters import Waiters
from jigcmd.journal.writelock import WouldWait

__all__ = ["DB_NAME", "Journal", "JournalError", "JournalLost", "JournalUnusable"]

# One operation row by its key: its caller's run and its operation id.
_SELECT_ROW = "SELECT * FROM operations WHERE root_run = ? AND operation_id = ?"


class Journal(JarvisRecords, Waiters):
    """The ownership journal, its other processes' waiters and the jarvis records of one
    state directory."""

    def __init__(self, db: Database) -> None:
        """Rows over an open, migrated database (use `Journal.open`)."""
        self._db = db
        self._me = identity.current()
        self.path = db.path
        # This process's liveness lock, held while the journal is open for writing.
        self._liveness: liveness.Key | None = None

    @classmethod
    def open(cls, state_dir: Path) -> Journal:
        """Open (creating and migrating if needed) the journal in a prepared state directory.

        Raises `JournalUnusable` (`JournalLost` among them) naming the file, the cause and
        the fix when it cannot: a full disk, a read-only directory, a damaged database.
        """
        db = Database.open(state_dir)
        try:
            # Before any row can name this process as its owner, until the journal is closed
            # (`jigcmd.journal.liveness`): a front closes it once nothing of it runs.
            held = liveness.hold(state_dir)
        except OSError as exc:
            db.close()
            where = exc.filename or state_dir / liveness.DIRECTORY
            fix = f"check {state_dir} (permissions, disk, mounts), or pass another --state-dir"
            if exc.errno == errno.ENOSPC:
                fix = (
                    f"free space or inodes (`df -i {state_dir}`) on the filesystem holding it, "
                    "then try again; nothing recorded was lost, so keep the journal"
                )
            raise JournalUnusable(
                db.path,
                f"cannot hold this process's liveness lock {where}: {exc.strerror or exc}",
                fix,
            ) from exc
        except StateDirError as exc:
            # `live` is not a directory of ours that no one else writes.
            db.close()
            raise JournalUnusable(
                db.path,
                f"cannot hold this process's liveness lock in "
                f"{state_dir / liveness.DIRECTORY}: {exc.reason}",
                exc.fix or f"check {state_dir}, or pass another --state-dir",
            ) from exc
        journal = cls(db)
        journal._liveness = held
        return journal

    @classmethod
    def open_read_only(cls, state_dir: Path) -> Journal:
        """Open the journal to read it only, on a read-only mount too; it changes nothing.

        Raises `JournalUnusable` as `open` does, and `SchemaError` for another schema version.
        """
        return cls(Database.open_read_only(state_dir))

    def close(self) -> None:
        """Close the connection (idempotent); the last one out marks the journal clean.

        Raises `JournalUnusable` (after closing) when the journal could not be closed as it
        was opened: its state directory was removed, replaced or became unreadable.
        """
        held, self._liveness = self._liveness, None
        try:
            self._db.close()
        finally:
            if held is not None:
                liveness.release(held)

    def lost(self) -> JournalUnusable | None:
        """Why the journal file is gone (its state directory removed or replaced), as `close`
        would raise it; None while it is in place. SQLite itself would go on reading and
        writing the unlinked file without a word."""
        return self._db.lost()

    def settings(self) -> dict[str, int | str]:
        """The durability settings in force (for tests and `jigcmd doctor`)."""
        return self._db.settings()

    def prepare_syncs(self) -> bool:
        """Make the context of `sync_soon`'s syncs now; False where there is none (`Database`)."""
        return self._db.prepare_syncs()

    def sync_soon(self) -> PendingSync | None:
        """Start syncing every commit so far without waiting for the disk (`Database`)."""
        return self._db.sync_soon()

    def synced(self, pending: PendingSync) -> bool:
        """Whether `pending` is on disk; raises OSError when it failed (`Database`)."""
        return self._db.synced(pending)

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Project Command operations ----------------------------------------------------

    def begin(self, new: NewRow) -> Begin:
        """Insert `new` for a new operation id, or return the row that holds the id."""
        with self._db.write() as conn:
            return self._insert(conn, new)

    def begin_now(self, new: NewRow) -> Begin | None:
        """`begin`, or None (nothing written) when it would have to wait for another writer.

        For a caller on an event loop: the uncontended case (one server, the usual one) is a
        quick local commit, done without a thread hop; so is one that finds one of this
        process's worker threads finishing a write (waited out for a moment, `Database.write`);
        a contended one returns None at once, for the caller to try again later or to wait with
        `begin` in a worker thread (`jigcmd.durable.pathwrite`).
        """
        try:
            with self._db.write(wait=False) as conn:
                return self._insert(conn, new)
        except WouldWait:
            return None

    def _insert(self, conn: sqlite3.Connection, new: NewRow) -> Begin:
        # One statement in the usual case (a new operation id): the insert returns the row
        # it wrote; only a key already taken is read back (`_SELECT_ROW`). A reused run id
        # is still refused (only the key's conflict is taken as "known").
        now = unix_ms()
        supervisor = new.supervisor
        inserted = conn.execute(
            "INSERT INTO operations (root_run, operation_id, signature, context,"
            " created_unix_ms, updated_unix_ms, deadline_unix_ms, run_id, owner_pid,"
            " owner_start, boot_id, owner_pidns, state, supervisor_pid, supervisor_start,"
            " supervisor_pidns, cgroup_paths, plan_digest, trace)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
                self._me.pidns,
                "dispatching" if supervisor is None else "running",
                None if supervisor is None else supervisor.pid,
                None if supervisor is None else supervisor.start,
                0 if supervisor is None else supervisor.pidns,
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
        with self._db.write() as conn:
            cursor = conn.execute(
                "UPDATE operations SET state = 'running', supervisor_pid = ?,"
                " supervisor_start = ?, supervisor_pidns = ?, cgroup_paths = ?, netns = ?,"
                " plan_digest = COALESCE(?, plan_digest),"
                " updated_unix_ms = ? WHERE root_run = ? AND operation_id = ? AND state IN (?, ?)",
                (
                    supervisor.pid,
                    supervisor.start,
                    supervisor.pidns,
                    msgspec.json.encode(list(cgroup_paths)).decode("utf-8"),
                    netns,
                    plan_digest,
                    unix_ms(),
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
            with self._db.write(durable=durable, wait=wait) as conn:
                cursor = conn.execute(
                    "UPDATE operations SET outcome = ?, result = ?, attestation = ?,"
                    " updated_unix_ms = ?"
                    " WHERE root_run = ? AND operation_id = ? AND state IN (?, ?)",
                    (outcome, result, attestation, unix_ms(), root_run, operation_id, *OPEN_STATES),
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
        tests: bytes | None = None,
        wait: bool = True,
        ended_unix_ms: int | None = None,
    ) -> bool | None:
        """Close an open row with its result: `done`, or `uncertain` when cleanup is unconfirmed.

        `result` must be the exact bytes answered to the caller: replay returns them verbatim,
        and `attestation` (the run's signed statement) with them. None keeps the one the row
        has; an `uncertain` row keeps none. `tests`: the test report the answer carried.
        False (and nothing written) when the row was already closed: the first close wins.
        `durable=False` skips the fsync; only for a row whose result `record_result` already
        made durable (a lost close is re-derived by `close_lost`). `wait=False`: None (nothing
        written) when it would have to wait for another writer, as `begin_now`.
        `ended_unix_ms`: when it ended, as its answer says (else now).
        """
        state: State = "done" if cleanup_complete else "uncertain"
        try:
            with self._db.write(durable=durable, wait=wait) as conn:
                now = ended_unix_ms or unix_ms()
                cursor = conn.execute(
                    "UPDATE operations SET state = ?, outcome = ?, result = ?, report = ?,"
                    " attestation = CASE WHEN ? = 'done' THEN COALESCE(?, attestation) END,"
                    " tests = ?, cleanup = ?, problems = ?, reason = ?, updated_unix_ms = ?,"
                    " finished_unix_ms = ?"
                    " WHERE root_run = ? AND operation_id = ? AND state IN (?, ?)",
                    (
                        state,
                        outcome,
                        result,
                        report,
                        state,
                        attestation,
                        tests,
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
        ended_unix_ms: int | None = None,
    ) -> bool:
        """Close an open row as `uncertain` (ended at `ended_unix_ms`, else now); False (nothing
        written) when it was already closed."""
        return self._close_open(
            operation_id,
            root_run=root_run,
            reason=reason,
            cleanup_complete=cleanup_complete,
            problems=problems,
            done_with_evidence=False,
            ended_unix_ms=ended_unix_ms,
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
        ended_unix_ms: int | None = None,
    ) -> bool:
        with self._db.write() as conn:
            now = ended_unix_ms or unix_ms()
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
        """Update the cleanup outcome of a closed row (recovery re-checking it); False if open.

        The row's reason is left as it is: it is the words its answer had, which a replay
        repeats byte for byte; `cleanup` is the latest proof (docs/operations.md).
        """
        with self._db.write() as conn:
            cursor = conn.execute(
                "UPDATE operations SET cleanup = ?, problems = ?, updated_unix_ms = ?"
                " WHERE root_run = ? AND operation_id = ? AND state IN ('done', 'uncertain')",
                (
                    "complete" if complete else "failed",
                    problems,
                    unix_ms(),
                    root_run,
                    operation_id,
                ),
            )
            return cursor.rowcount == 1

    def get(self, operation_id: str, *, root_run: str) -> Row | None:
        """The row of `operation_id` in the caller's run `root_run`, or None."""
        with self._db.read() as conn:
            found = conn.execute(_SELECT_ROW, (root_run, operation_id)).fetchone()
        return None if found is None else row_from(found)

    def by_run_id(self, run_id: str) -> Row | None:
        """The row whose envelope is `run_id` (cgroup job `jigcmd-<run_id>`), or None."""
        with self._db.read() as conn:
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
        with self._db.read() as conn:
            found = conn.execute(
                f"SELECT * FROM operations WHERE {where} ORDER BY created_unix_ms, operation_id"  # noqa: S608 - our own constant clauses
            ).fetchall()
        return [row_from(r) for r in found]
