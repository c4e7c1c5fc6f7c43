"""What a closed row replays: the answer its operation was given, or its failure raised again.

A retry of a known operation (the same run and operation id, the same request) gets the
recorded answer byte for byte, however many servers ago it was made; an uncertain one stays
uncertain.
"""

from __future__ import annotations

import msgspec

from jigcmd.durable.recovery import UNCERTAIN_REASON
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport
from jigcmd.journal.rows import Row
from jigcmd.protocol.commands import RunResult

__all__ = ["RecordedFailure", "replay"]

_evidence = msgspec.json.Decoder(Evidence)
_report = msgspec.json.Decoder(ResourceReport)


class RecordedFailure(msgspec.Struct, frozen=True):
    """A failure as the journal keeps it, so that a replay raises the same error."""

    code: Code
    message: str
    details: dict[str, object] | None = None


_failure = msgspec.json.Decoder(RecordedFailure)


def replay(row: Row) -> RunResult:
    """The recorded answer of a closed row: its evidence, or its failure raised again."""
    if row.state == "uncertain" or row.result is None:
        reason = row.reason or UNCERTAIN_REASON
        raise JigError(Code.UNCERTAIN, reason)
    if row.outcome == "failure":
        failure = _failure.decode(row.result)
        error = JigError(failure.code, failure.message, failure.details)
        # A run stopped by its deadline or a cancel keeps its statement.
        error.attestation = row.attestation
        raise error
    report = (
        _report.decode(row.report)
        if row.report
        else ResourceReport(
            wall_ms=0.0,
            setup_ms=0.0,
            cpu_ms=None,
            peak_memory_bytes=None,
            oom_killed=False,
            pids_limit_hit=False,
            deadline_hit=False,
        )
    )
    return RunResult(
        evidence=_evidence.decode(row.result), report=report, attestation=row.attestation
    )
