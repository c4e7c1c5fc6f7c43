"""The jarvis provider's records: one row per tool call that may run something, and the audit trail.

These are plain SQL helpers over a connection the `Journal` already holds inside a write
transaction; `Journal.jarvis_*` and `Journal.audit*` are the public entry points.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from jigcmd.journal.identity import ProcessIdentity

__all__ = [
    "JARVIS_OUTPUT_CAP_CHARS",
    "AuditRow",
    "JarvisDecision",
    "JarvisEnd",
    "JarvisRun",
    "JarvisStatus",
]

JarvisDecision = Literal["allow", "deny"]
JarvisStatus = Literal["denied", "running", "exited", "deadline", "failed", "uncertain"]
# The statuses a running jarvis run can end in.
JarvisEnd = Literal["exited", "deadline", "failed", "uncertain"]
# Stored output is capped whatever the caller passes; the truncated flag then says so.
JARVIS_OUTPUT_CAP_CHARS = 65_536

# The JSON columns hold what this module wrote: decoded to their types, not trusted blindly.
_decode_argv = msgspec.json.Decoder(tuple[str, ...]).decode
_decode_timings = msgspec.json.Decoder(dict[str, float]).decode


def _text(value: object) -> str:
    """`value` as the JSON text of a column."""
    return msgspec.json.encode(value).decode("utf-8")


class JarvisRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One jarvis tool call that was decided (and, when allowed, run)."""

    run_id: int
    tool: str
    argv: tuple[str, ...]
    cwd: str
    actor: str
    decision: JarvisDecision
    matched_rule: str | None
    reason: str
    status: JarvisStatus
    envelope_run_id: str | None
    owner_pid: int
    owner_start: int
    boot_id: str
    exit_code: int | None
    signal: str | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    timings: dict[str, float]
    created_unix_ms: int
    finished_unix_ms: int | None
    # The run's signed statement (an in-toto bundle), written with its end; None for a run
    # that did not complete (failed, uncertain) or was never signed.
    attestation: bytes | None = None
    # Why it ended so (a failure, a cancel), written with its end; None when nothing needs
    # saying, and for rows written before the journal kept it (schema version 6).
    detail: str | None = None
    # The file the run executed, the program's fully resolved path (its `argv[0]` keeps the
    # name the caller used); None for a denied call and rows before schema version 7.
    executable: str | None = None
    # The owner's PID namespace (`ProcessIdentity.pidns`); 0 on rows before schema version 8.
    owner_pidns: int = 0

    @property
    def owner(self) -> ProcessIdentity:
        """The jarvis process that ran it, as recovery asks whether it is alive."""
        return ProcessIdentity(
            pid=self.owner_pid, start=self.owner_start, boot_id=self.boot_id, pidns=self.owner_pidns
        )


class AuditRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One audited decision (append-only)."""

    seq: int
    time_unix_ms: int
    actor: str
    tool: str
    argv: tuple[str, ...]
    cwd: str
    decision: str
    matched_rule: str | None
    outcome: str


def insert_run(
    conn: sqlite3.Connection,
    *,
    now_ms: int,
    owner: ProcessIdentity,
    tool: str,
    argv: Sequence[str],
    cwd: str,
    actor: str,
    decision: JarvisDecision,
    matched_rule: str | None,
    reason: str,
    envelope_run_id: str | None,
    executable: str | None = None,
) -> int:
    """Insert a decided call: `running` when allowed, `denied` (and finished) when not."""
    status: JarvisStatus = "running" if decision == "allow" else "denied"
    cursor = conn.execute(
        "INSERT INTO jarvis_runs (tool, argv, cwd, actor, decision, matched_rule, reason,"
        " status, envelope_run_id, owner_pid, owner_start, boot_id, owner_pidns,"
        " created_unix_ms, finished_unix_ms, executable)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            tool,
            _text(list(argv)),
            cwd,
            actor,
            decision,
            matched_rule,
            reason,
            status,
            envelope_run_id,
            owner.pid,
            owner.start,
            owner.boot_id,
            owner.pidns,
            now_ms,
            None if status == "running" else now_ms,
            executable,
        ),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def finish_run(
    conn: sqlite3.Connection,
    run_id: int,
    *,
    now_ms: int,
    status: JarvisEnd,
    exit_code: int | None,
    signal: str | None,
    stdout: str,
    stderr: str,
    stdout_truncated: bool,
    stderr_truncated: bool,
    timings: Mapping[str, float],
    attestation: bytes | None = None,
    detail: str | None = None,
) -> bool:
    """Close a running row (with its statement, its detail); False when not running."""
    cursor = conn.execute(
        "UPDATE jarvis_runs SET status = ?, exit_code = ?, signal = ?, stdout = ?, stderr = ?,"
        " stdout_truncated = ?, stderr_truncated = ?, timings = ?, finished_unix_ms = ?,"
        " attestation = ?, detail = ? WHERE run_id = ? AND status = 'running'",
        (
            status,
            exit_code,
            signal,
            stdout[:JARVIS_OUTPUT_CAP_CHARS],
            stderr[:JARVIS_OUTPUT_CAP_CHARS],
            int(stdout_truncated or len(stdout) > JARVIS_OUTPUT_CAP_CHARS),
            int(stderr_truncated or len(stderr) > JARVIS_OUTPUT_CAP_CHARS),
            _text(dict(timings)),
            now_ms,
            attestation,
            detail,
            run_id,
        ),
    )
    return cursor.rowcount == 1


def run_from(row: sqlite3.Row) -> JarvisRun:
    """A `JarvisRun` from its database row."""
    return JarvisRun(
        run_id=row["run_id"],
        tool=row["tool"],
        argv=_decode_argv(row["argv"]),
        cwd=row["cwd"],
        actor=row["actor"],
        decision=row["decision"],
        matched_rule=row["matched_rule"],
        reason=row["reason"],
        status=row["status"],
        envelope_run_id=row["envelope_run_id"],
        owner_pid=row["owner_pid"],
        owner_start=row["owner_start"],
        boot_id=row["boot_id"],
        exit_code=row["exit_code"],
        signal=row["signal"],
        stdout=row["stdout"],
        stderr=row["stderr"],
        stdout_truncated=bool(row["stdout_truncated"]),
        stderr_truncated=bool(row["stderr_truncated"]),
        timings=_decode_timings(row["timings"]),
        created_unix_ms=row["created_unix_ms"],
        finished_unix_ms=row["finished_unix_ms"],
        attestation=row["attestation"],
        detail=row["detail"],
        executable=row["executable"],
        owner_pidns=row["owner_pidns"],
    )


def insert_audit(
    conn: sqlite3.Connection,
    *,
    now_ms: int,
    actor: str,
    tool: str,
    argv: Sequence[str],
    cwd: str,
    decision: str,
    matched_rule: str | None,
    outcome: str,
) -> int:
    """Append one audit row; return its sequence number."""
    cursor = conn.execute(
        "INSERT INTO audit (time_unix_ms, actor, tool, argv, cwd, decision, matched_rule,"
        " outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (now_ms, actor, tool, _text(list(argv)), cwd, decision, matched_rule, outcome),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def audit_from(row: sqlite3.Row) -> AuditRow:
    """An `AuditRow` from its database row."""
    return AuditRow(
        seq=row["seq"],
        time_unix_ms=row["time_unix_ms"],
        actor=row["actor"],
        tool=row["tool"],
        argv=_decode_argv(row["argv"]),
        cwd=row["cwd"],
        decision=row["decision"],
        matched_rule=row["matched_rule"],
        outcome=row["outcome"],
    )
