"""What a jarvis answer and a run's journal row say: a decision, a recorded run, an ended run."""

from __future__ import annotations

from typing import Any

from jigcmd.attest.dsse import attestation_fields
from jigcmd.envelope.api import EnvelopeFailure, FailureKind, RunOutcome
from jigcmd.evidence import decode_output
from jigcmd.jarvis.policy import Decision
from jigcmd.journal.toolruns import JarvisRun

__all__ = ["decision_fields", "end_fields", "executes", "failure_status", "record_fields"]


def record_fields(record: JarvisRun) -> dict[str, Any]:
    """A recorded run as `run.create` and `run.read` answer it."""
    return {
        "run_id": record.run_id,
        "status": record.status,
        "exit_code": record.exit_code,
        "signal": record.signal,
        "stdout": {"text": record.stdout, "truncated": record.stdout_truncated},
        "stderr": {"text": record.stderr, "truncated": record.stderr_truncated},
        "detail": record.detail,
        # The file the run executes, the program's resolved path (`argv[0]` keeps its name);
        # None for a run recorded before the journal kept it.
        "executable": record.executable,
        # The signed statement of a completed run (`jigcmd verify` checks it).
        "attestation": (
            None if record.attestation is None else attestation_fields(record.attestation)
        ),
    }


def decision_fields(decision: Decision) -> dict[str, Any]:
    """The policy's decision, as every answer carries it."""
    return {
        "decision": decision.decision,
        "reason": decision.reason,
        "matched_rule": decision.matched_rule,
    }


# The envelope failures after which nothing ran and nothing is left: the run `failed` (a
# deadline that passed before the program could start among them: its detail says so).
# Every other (a cleanup unproved, pid 1 lost, the reports stopped, a cancel that came
# first) leaves it `uncertain`.
_FAILED = frozenset(
    {
        FailureKind.ZYGOTE_NOT_STARTED,
        FailureKind.ENVELOPE_UNAVAILABLE,
        FailureKind.ZYGOTE_UNREACHABLE,
        FailureKind.SETUP_FAILED,
        FailureKind.PATH_CHANGED,
        FailureKind.DEADLINE_BEFORE_START,
    }
)


def failure_status(failure: EnvelopeFailure) -> str:
    """The journal status of a run the envelope failed: `failed` or `uncertain`."""
    return "failed" if failure.kind in _FAILED and failure.cleaned_up else "uncertain"


def end_fields(outcome: RunOutcome) -> dict[str, Any]:
    """An ended run's row: its status, exit, output, timings, and a cancel's detail."""
    stdout = decode_output(outcome.stdout.data, outcome.stdout.truncated)
    stderr = decode_output(outcome.stderr.data, outcome.stderr.truncated)
    status: str = outcome.stop_reason
    detail = None
    if status == "cancelled":
        # The journal has no `cancelled` status; only a server shutdown cancels a run.
        detail = "cancelled: the server shut down"
        status = "failed"
    return {
        "status": status,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "stdout": stdout.text,
        "stderr": stderr.text,
        "stdout_truncated": stdout.truncated,
        "stderr_truncated": stderr.truncated,
        "timings": {"wall_ms": outcome.report.wall_ms, "setup_ms": outcome.report.setup_ms},
        "detail": detail,
    }


def executes(decision: Decision) -> str:
    """What an allowed call executes, resolved, for its audit row: the file the rules matched
    (a symlink's target, not the link) in the resolved cwd, neither of them followed again."""
    if decision.decision != "allow":
        return ""
    where = f" in {decision.cwd}" if decision.cwd is not None else ""
    return f" (executes {decision.executable}{where})"
