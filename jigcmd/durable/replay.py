"""What a closed row replays: the answer its operation was given, or its failure raised again.

A retry of a known operation (the same run and operation id, the same request) gets the
recorded answer byte for byte, however many servers ago it was made; an uncertain one stays
uncertain. A test command's answer carries its per-test report, so its replay does too.
"""

from __future__ import annotations

import msgspec

from jigcmd.durable.recovery import UNCERTAIN_REASON
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport
from jigcmd.journal.rows import Row
from jigcmd.protocol.commands import OutputEnds, RunResult, TestResults

__all__ = [
    "UNRECORDED_REPORT",
    "RecordedFailure",
    "RecordedTests",
    "recorded_tests",
    "replay",
    "with_tests",
]

_evidence = msgspec.json.Decoder(Evidence)
_report = msgspec.json.Decoder(ResourceReport)


class RecordedFailure(msgspec.Struct, frozen=True):
    """A failure as the journal keeps it, so that a replay raises the same error."""

    code: Code
    message: str
    details: dict[str, object] | None = None


_failure = msgspec.json.Decoder(RecordedFailure)


class RecordedTests(msgspec.Struct, frozen=True):
    """A test report as the journal keeps it: the runner's bytes as read, or why there are none.

    The bytes, not their parse: the same parse of the same bytes gives the same results.
    Also, for any command, each stream's end past its cap and the call's notes, which an MCP
    answer shows.
    """

    report: bytes | None = None
    problem: str = ""
    # The end of stderr past its cap, where the runner's footer is (`TestResults`).
    stderr_tail: str = ""
    # False: a record of the ends alone (no report was asked for).
    tested: bool = True
    # Each stream past its cap (`RunResult.ends`), when one was: a replay shows the same.
    ends: OutputEnds | None = None
    # The call's notes (`RunResult.notes`): a task read back by another server shows them too.
    notes: tuple[str, ...] = ()


_tests = msgspec.json.Decoder(RecordedTests)
# A row that kept none (an older jigcmd's, or one without a report, ends or notes).
_NOTHING_KEPT = RecordedTests(tested=False)
_encoder = msgspec.json.Encoder()
# Why a test command's replay has no report (`with_tests`).
UNRECORDED_REPORT = "not in the journal (an older jigcmd recorded the run, or recovery closed it)"


def recorded_tests(
    tests: TestResults | None, ends: OutputEnds | None = None, notes: tuple[str, ...] = ()
) -> bytes | None:
    """The journal's record of a run's test report (`Journal.finish(tests=…)`), of its
    streams past their cap and of its call's notes; None if none of them."""
    cut = (
        ends
        if ends is not None and (ends.stdout.dropped_bytes or ends.stderr.dropped_bytes)
        else None
    )
    if tests is None:
        if cut is None and not notes:
            return None
        return _encoder.encode(RecordedTests(tested=False, ends=cut, notes=notes))
    return _encoder.encode(
        RecordedTests(
            report=tests.raw,
            problem=tests.problem,
            stderr_tail=tests.stderr_tail,
            ends=cut,
            notes=notes,
        )
    )


def _kept(recorded: bytes | None) -> RecordedTests:
    """What the journal kept beside a row's evidence, decoded once; nothing if not kept."""
    return _NOTHING_KEPT if recorded is None else _tests.decode(recorded)


def with_tests(result: RunResult) -> RunResult:
    """A test command's result for a front that shows its tests: a report, or why none.

    Only a replay can lack one: of a row written before the journal kept reports, or
    closed by recovery, which never read it. It is said, never left out (`tests.problem`).
    """
    if result.tests is not None or result.evidence.invocation[1:2] != ["test"]:
        return result
    return msgspec.structs.replace(
        result, tests=TestResults(report=None, problem=UNRECORDED_REPORT)
    )


def replay(row: Row) -> RunResult:
    """The recorded answer of a closed row: its evidence, or its failure raised again.

    A pruned row (`jigcmd prune`) answers its tombstone's refusal, whatever it ended with.
    """
    if row.pruned and row.result is not None:
        pruned = _failure.decode(row.result)
        raise JigError(pruned.code, pruned.message, pruned.details, recorded=True)
    if row.state == "uncertain" or row.result is None:
        reason = row.reason or UNCERTAIN_REASON
        uncertain = JigError(Code.UNCERTAIN, reason, recorded=True)
        uncertain.ended_unix_ms = row.finished_unix_ms
        raise uncertain
    if row.outcome == "failure":
        failure = _failure.decode(row.result)
        error = JigError(failure.code, failure.message, failure.details, recorded=True)
        # A run stopped by its deadline or a cancel keeps its statement and its tests.
        error.attestation = row.attestation
        error.ended_unix_ms = row.finished_unix_ms
        kept = _kept(row.tests)
        error.tests = _stopped_tests(kept, failure.details)
        error.ends, error.notes = kept.ends, kept.notes
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
    evidence = _evidence.decode(row.result)
    kept = _kept(row.tests)
    return RunResult(
        evidence=evidence,
        report=report,
        tests=_tests_of(kept, evidence, oom_killed=report.oom_killed),
        attestation=row.attestation,
        ended_unix_ms=row.finished_unix_ms,
        ends=kept.ends,
        notes=kept.notes,
    )


def _tests_of(
    kept: RecordedTests, evidence: Evidence, *, oom_killed: bool = False
) -> TestResults | None:
    """The test results the journal kept of a run with this evidence; None if none."""
    if not kept.tested:
        return None
    return TestResults.read(
        kept.report,
        kept.problem,
        evidence=evidence,
        stderr_tail=kept.stderr_tail,
        oom_killed=oom_killed,
    )


def _stopped_tests(kept: RecordedTests, details: dict[str, object] | None) -> TestResults | None:
    """A stopped test command's results, read as its first answer read them; None if none.

    A test command's stop recorded before the journal kept them says so (`with_tests`).
    """
    collected = (details or {}).get("command")
    try:
        # A stop's details hold its collected evidence; any other failure has none.
        evidence = msgspec.convert(collected, Evidence)
    except msgspec.ValidationError:
        return None
    if not kept.tested:
        if evidence.invocation[1:2] != ["test"]:
            return None
        return TestResults(report=None, problem=UNRECORDED_REPORT)
    return _tests_of(kept, evidence)
