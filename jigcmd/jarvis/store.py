"""What jarvis stores about runs and decisions: the journal's jarvis API, as a protocol.

`jigcmd.journal.Journal` satisfies `RunStore` as it is (durable SQLite); `MemoryStore` keeps
the same records in the process for tests and benchmarks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import msgspec

from jigcmd.journal.jarvis import (
    JARVIS_OUTPUT_CAP_CHARS,
    AuditRow,
    JarvisDecision,
    JarvisEnd,
    JarvisRun,
)

__all__ = ["AuditRow", "JarvisRun", "MemoryStore", "RunStore"]


class RunStore(Protocol):
    """Durable run records and the append-only audit trail. Calls may block briefly (fsync)."""

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
        """Record a decided call before anything runs; return its run_id."""
        ...

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
    ) -> bool:
        """Close a running run; False when it was not running."""
        ...

    def jarvis_get(self, run_id: int) -> JarvisRun | None:
        """One run by id, or None."""
        ...

    def jarvis_running(self) -> list[JarvisRun]:
        """Every run still recorded as running."""
        ...

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
        """Append one audit row; return its sequence number."""
        ...

    def audit_rows(self, limit: int = 100) -> list[AuditRow]:
        """The newest `limit` rows, newest first."""
        ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MemoryStore:
    """A `RunStore` that lives and dies with the process."""

    def __init__(self) -> None:
        self._runs: dict[int, JarvisRun] = {}
        self._audit: list[AuditRow] = []

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
        """See `RunStore.jarvis_begin`."""
        run_id = len(self._runs) + 1
        now = _now_ms()
        running = decision == "allow"
        self._runs[run_id] = JarvisRun(
            run_id=run_id,
            tool=tool,
            argv=tuple(argv),
            cwd=cwd,
            actor=actor,
            decision=decision,
            matched_rule=matched_rule,
            reason=reason,
            status="running" if running else "denied",
            envelope_run_id=envelope_run_id,
            owner_pid=0,
            owner_start=0,
            boot_id="",
            exit_code=None,
            signal=None,
            stdout="",
            stderr="",
            stdout_truncated=False,
            stderr_truncated=False,
            timings={},
            created_unix_ms=now,
            finished_unix_ms=None if running else now,
        )
        return run_id

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
    ) -> bool:
        """See `RunStore.jarvis_finish`."""
        current = self._runs.get(run_id)
        if current is None or current.status != "running":
            return False
        cap = JARVIS_OUTPUT_CAP_CHARS
        self._runs[run_id] = msgspec.structs.replace(
            current,
            status=status,
            exit_code=exit_code,
            signal=signal,
            stdout=stdout[:cap],
            stderr=stderr[:cap],
            stdout_truncated=stdout_truncated or len(stdout) > cap,
            stderr_truncated=stderr_truncated or len(stderr) > cap,
            timings=dict(timings or {}),
            finished_unix_ms=_now_ms(),
        )
        return True

    def jarvis_get(self, run_id: int) -> JarvisRun | None:
        """See `RunStore.jarvis_get`."""
        return self._runs.get(run_id)

    def jarvis_running(self) -> list[JarvisRun]:
        """See `RunStore.jarvis_running`."""
        return [run for run in self._runs.values() if run.status == "running"]

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
        """See `RunStore.audit`."""
        seq = len(self._audit) + 1
        self._audit.append(
            AuditRow(
                seq=seq,
                time_unix_ms=_now_ms(),
                actor=actor,
                tool=tool,
                argv=tuple(argv),
                cwd=cwd,
                decision=decision,
                matched_rule=matched_rule,
                outcome=outcome,
            )
        )
        return seq

    def audit_rows(self, limit: int = 100) -> list[AuditRow]:
        """See `RunStore.audit_rows`."""
        return list(reversed(self._audit[-limit:])) if limit > 0 else []
