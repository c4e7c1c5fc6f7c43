"""The jarvis provider's records in the journal: its runs and its append-only audit trail.

A base of `store.Journal`: the same database and the same owner identity, rows in their own
tables (`toolruns.py` has the SQL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jigcmd.clock import unix_ms
from jigcmd.journal import toolruns
from jigcmd.journal.database import Database
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.toolruns import AuditRow, JarvisDecision, JarvisEnd, JarvisRun

__all__ = ["JarvisRecords"]


class JarvisRecords:
    """jarvis's runs and audit rows, over the journal's database."""

    _db: Database
    _me: ProcessIdentity

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
        executable: str | None = None,
    ) -> int:
        """Record a decided call before anything runs (`running` or `denied`); return its id.

        `executable`: the file an allowed call executes, as the policy resolved it.
        """
        with self._db.write() as conn:
            return toolruns.insert_run(
                conn,
                now_ms=unix_ms(),
                owner=self._me,
                tool=tool,
                argv=argv,
                cwd=cwd,
                actor=actor,
                decision=decision,
                matched_rule=matched_rule,
                reason=reason,
                envelope_run_id=envelope_run_id,
                executable=executable,
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
        detail: str | None = None,
    ) -> bool:
        """Close a running jarvis run (statement, detail); False when it was not running."""
        with self._db.write() as conn:
            return toolruns.finish_run(
                conn,
                run_id,
                now_ms=unix_ms(),
                status=status,
                exit_code=exit_code,
                signal=signal,
                stdout=stdout,
                stderr=stderr,
                stdout_truncated=stdout_truncated,
                stderr_truncated=stderr_truncated,
                timings=timings or {},
                attestation=attestation,
                detail=detail,
            )

    def jarvis_get(self, run_id: int) -> JarvisRun | None:
        """One jarvis run by id, or None."""
        with self._db.read() as conn:
            found = conn.execute("SELECT * FROM jarvis_runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if found is None else toolruns.run_from(found)

    def jarvis_running(self) -> list[JarvisRun]:
        """Every jarvis run still `running`, oldest first."""
        with self._db.read() as conn:
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
        with self._db.write() as conn:
            return toolruns.insert_audit(
                conn,
                now_ms=unix_ms(),
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
        with self._db.read() as conn:
            found = conn.execute(
                "SELECT * FROM audit ORDER BY seq DESC LIMIT ?", (limit,)
            ).fetchall()
        return [toolruns.audit_from(r) for r in found]
