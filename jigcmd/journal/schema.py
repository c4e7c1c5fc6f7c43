"""The journal's tables and how a database is brought to the current schema version.

The version lives in SQLite's `user_version` pragma. `migrate` applies every step above the
database's version inside one transaction, so a database is always at exactly one version;
a database written by a newer jigcmd is refused rather than guessed at.
"""

from __future__ import annotations

import contextlib
import sqlite3

__all__ = [
    "LEGACY_RUN",
    "SCHEMA_VERSION",
    "OlderSchema",
    "SchemaError",
    "check_readable",
    "migrate",
]

# Version 1: ownership rows (Project Command operations), jarvis runs, the audit trail.
_V1 = """
CREATE TABLE operations (
    operation_id      TEXT PRIMARY KEY,
    signature         TEXT NOT NULL,
    context           TEXT NOT NULL,
    created_unix_ms   INTEGER NOT NULL,
    updated_unix_ms   INTEGER NOT NULL,
    finished_unix_ms  INTEGER,
    deadline_unix_ms  INTEGER NOT NULL,
    run_id            TEXT NOT NULL UNIQUE,
    owner_pid         INTEGER NOT NULL,
    owner_start       INTEGER NOT NULL,
    boot_id           TEXT NOT NULL,
    state             TEXT NOT NULL
        CHECK (state IN ('dispatching', 'running', 'done', 'uncertain')),
    plan_digest       TEXT,
    cgroup_paths      TEXT NOT NULL DEFAULT '[]',
    netns             TEXT,
    supervisor_pid    INTEGER,
    supervisor_start  INTEGER,
    outcome           TEXT CHECK (outcome IN ('evidence', 'failure')),
    result            BLOB,
    report            BLOB,
    cleanup           TEXT CHECK (cleanup IN ('complete', 'failed')),
    problems          TEXT NOT NULL DEFAULT '',
    reason            TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX operations_open ON operations (state) WHERE state IN ('dispatching', 'running');

CREATE TABLE jarvis_runs (
    run_id            INTEGER PRIMARY KEY AUTOINCREMENT,
    tool              TEXT NOT NULL,
    argv              TEXT NOT NULL,
    cwd               TEXT NOT NULL,
    actor             TEXT NOT NULL,
    decision          TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
    matched_rule      TEXT,
    reason            TEXT NOT NULL,
    status            TEXT NOT NULL
        CHECK (status IN ('denied', 'running', 'exited', 'deadline', 'failed', 'uncertain')),
    envelope_run_id   TEXT,
    owner_pid         INTEGER NOT NULL,
    owner_start       INTEGER NOT NULL,
    boot_id           TEXT NOT NULL,
    exit_code         INTEGER,
    signal            TEXT,
    stdout            TEXT NOT NULL DEFAULT '',
    stderr            TEXT NOT NULL DEFAULT '',
    stdout_truncated  INTEGER NOT NULL DEFAULT 0,
    stderr_truncated  INTEGER NOT NULL DEFAULT 0,
    timings           TEXT NOT NULL DEFAULT '{}',
    created_unix_ms   INTEGER NOT NULL,
    finished_unix_ms  INTEGER
) STRICT;
CREATE INDEX jarvis_runs_running ON jarvis_runs (status) WHERE status = 'running';

CREATE TABLE audit (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    time_unix_ms      INTEGER NOT NULL,
    actor             TEXT NOT NULL,
    tool              TEXT NOT NULL,
    argv              TEXT NOT NULL,
    cwd               TEXT NOT NULL,
    decision          TEXT NOT NULL,
    matched_rule      TEXT,
    outcome           TEXT NOT NULL
) STRICT;
-- Append-only: the trail cannot be edited or pruned through SQL.
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""

# Version 2: operation identity belongs to a caller's run, not to the state directory: the
# key is (root_run, operation_id). Rows written before keep their records under the run ""
# (a run no server can be given), so no new run replays or conflicts with them; recovery
# still fences every open row whatever its run.
_OPERATION_COLUMNS = (
    "operation_id, signature, context, created_unix_ms, updated_unix_ms, finished_unix_ms,"
    " deadline_unix_ms, run_id, owner_pid, owner_start, boot_id, state, plan_digest,"
    " cgroup_paths, netns, supervisor_pid, supervisor_start, outcome, result, report, cleanup,"
    " problems, reason"
)
_V2 = f"""
CREATE TABLE operations_v2 (
    root_run          TEXT NOT NULL,
    operation_id      TEXT NOT NULL,
    signature         TEXT NOT NULL,
    context           TEXT NOT NULL,
    created_unix_ms   INTEGER NOT NULL,
    updated_unix_ms   INTEGER NOT NULL,
    finished_unix_ms  INTEGER,
    deadline_unix_ms  INTEGER NOT NULL,
    run_id            TEXT NOT NULL UNIQUE,
    owner_pid         INTEGER NOT NULL,
    owner_start       INTEGER NOT NULL,
    boot_id           TEXT NOT NULL,
    state             TEXT NOT NULL
        CHECK (state IN ('dispatching', 'running', 'done', 'uncertain')),
    plan_digest       TEXT,
    cgroup_paths      TEXT NOT NULL DEFAULT '[]',
    netns             TEXT,
    supervisor_pid    INTEGER,
    supervisor_start  INTEGER,
    outcome           TEXT CHECK (outcome IN ('evidence', 'failure')),
    result            BLOB,
    report            BLOB,
    cleanup           TEXT CHECK (cleanup IN ('complete', 'failed')),
    problems          TEXT NOT NULL DEFAULT '',
    reason            TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (root_run, operation_id)
) STRICT;
INSERT INTO operations_v2 (root_run, {_OPERATION_COLUMNS})
    SELECT '', {_OPERATION_COLUMNS} FROM operations;
DROP TABLE operations;
ALTER TABLE operations_v2 RENAME TO operations;
CREATE INDEX operations_open ON operations (state) WHERE state IN ('dispatching', 'running');
"""  # noqa: S608 - our own constant column list

# Version 3: each completed run's signed attestation (an in-toto bundle of DSSE envelopes),
# written with its result; jarvis runs keep theirs beside their end.
_V3 = """
ALTER TABLE operations ADD COLUMN attestation BLOB;
ALTER TABLE jarvis_runs ADD COLUMN attestation BLOB;
"""

# Version 4: the caller's W3C trace context (`traceparent`, `tracestate` as JSON) kept with
# the operation it started.
_V4 = """
ALTER TABLE operations ADD COLUMN trace TEXT;
"""

# Version 5: a test command's per-test report as the answer carried it (the runner's JUnit
# bytes, or why there are none), so that a replay carries it too. Older rows have none.
_V5 = """
ALTER TABLE operations ADD COLUMN tests BLOB;
"""

# Version 6: why a jarvis run ended as it did (`cancelled: the server shut down`, the
# envelope's failure), for `jarvis.run.get` after a restart too; NULL for rows before it.
_V6 = """
ALTER TABLE jarvis_runs ADD COLUMN detail TEXT;
"""

# Version 7: the file a jarvis run executed, as the policy resolved it (its `argv[0]` keeps
# the name the caller used), for `jarvis.run.get`; NULL for a denied call and older rows.
_V7 = """
ALTER TABLE jarvis_runs ADD COLUMN executable TEXT;
"""

# Version 8: the PID namespace (the inode of its `/proc/self/ns/pid`) of each recorded owner
# and supervisor, so that jigcmd processes of several namespaces sharing the state directory
# do not take each other's pids for their own (`jigcmd.journal.liveness`); 0 on older rows,
# read as the reader's own namespace, as they always were.
_V8 = """
ALTER TABLE operations ADD COLUMN owner_pidns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN supervisor_pidns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jarvis_runs ADD COLUMN owner_pidns INTEGER NOT NULL DEFAULT 0;
"""

# Version 9: the waiters other processes have on an operation running elsewhere (a `serve`
# joining it on the same state directory, with the same run id): one row per join, named by
# the joining process's identity (its liveness is judged as an owner's is,
# `jigcmd.journal.liveness`), so that the process running it stops it only once no live
# waiter remains anywhere (`jigcmd.journal.waiters`).
_V9 = """
CREATE TABLE waiters (
    root_run          TEXT NOT NULL,
    operation_id      TEXT NOT NULL,
    join_id           TEXT NOT NULL,
    pid               INTEGER NOT NULL,
    start             INTEGER NOT NULL,
    boot_id           TEXT NOT NULL,
    pidns             INTEGER NOT NULL,
    created_unix_ms   INTEGER NOT NULL,
    PRIMARY KEY (root_run, operation_id, join_id)
) STRICT;
"""

_STEPS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9)
# The run of every operation recorded before operation identity belonged to runs.
LEGACY_RUN = ""
SCHEMA_VERSION = len(_STEPS)


class SchemaError(Exception):
    """Raised when a journal's schema is one this jigcmd cannot use (newer; older, to read)."""


class OlderSchema(SchemaError):
    """Raised when a verb that only reads meets a journal a writer would migrate first."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"the journal is at schema version {version}, older than this jigcmd reads "
            f"({SCHEMA_VERSION}), and a verb that only reads it (runs, attest, doctor, "
            "jarvis-audit, prune --dry-run) changes nothing; fix: bring it up to date once with "
            "`jigcmd recover --state-dir` this directory (which prunes nothing; `jigcmd prune` "
            "without --dry-run also does, as it prunes), then read it again"
        )
        self.version = version


def _newer(version: int) -> SchemaError:
    return SchemaError(
        f"the journal is at schema version {version}, newer than this jigcmd "
        f"understands ({SCHEMA_VERSION}); use a newer jigcmd or another --state-dir"
    )


def check_readable(version: int) -> None:
    """Refuse to read a journal at another version than this jigcmd's: reading never migrates."""
    if version > SCHEMA_VERSION:
        raise _newer(version)
    if version < SCHEMA_VERSION:
        raise OlderSchema(version)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to `SCHEMA_VERSION` in one transaction; return the version it had."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise _newer(version)
        for step in _STEPS[version:]:
            for statement in _statements(step):
                conn.execute(statement)
        if version != SCHEMA_VERSION:
            # PRAGMA takes no parameters; the value is our own integer constant.
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        # Nothing written at the current version: a start refused later changes no file.
        conn.execute("COMMIT")
    except BaseException:
        # SQLite may have rolled back already (a full disk): keep the real cause.
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return int(version)


def _statements(script: str) -> list[str]:
    # executescript() would commit our transaction; split on complete statements instead.
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return statements
