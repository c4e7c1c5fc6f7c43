"""What a run's end becomes: the contract's evidence, its test results, its signed statement."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, lru_cache, partial
from typing import Final

from jigcmd.attest.attester import Attester, RunRecord
from jigcmd.attest.statement import RunFacts, TestReport
from jigcmd.attest.testreport import read_console_report, read_junit_report
from jigcmd.clock import unix_ms
from jigcmd.command.durability import Durability
from jigcmd.envelope.api import CapturedStream, Ending, RunOutcome, enforced
from jigcmd.evidence import Evidence, ResourceReport, decode_output
from jigcmd.plan import RunPlan
from jigcmd.policy.request import ValidRequest
from jigcmd.protocol.bunconsole import command_files, no_test_ran
from jigcmd.protocol.commands import OutputEnds, StreamEnd, TestResults

__all__ = ["EvidenceOf", "Sign", "evidence_of", "output_ends", "signer", "tests_of"]

# Said of a report that is not there after an exit 0 (`tests_of`).
# An undecodable byte, as "surrogateescape" decodes it.
_INVALID_BYTE: Final = re.compile("[\udc80-\udcff]")
_ENDED_BEFORE_ITS_REPORT: Final = (
    ": the runner ended before writing it, so exit code 0 does not mean the tests passed"
)
# Said instead when Bun's console says no test ran: it writes no report then. The console is
# the candidate's to write (a fake footer, then `process.exit(0)`), so the warning stays.
_NO_TEST_RAN: Final = (
    ": its console says no test ran ({ran}), and Bun writes no report then; exit code 0 does "
    "not mean the tests passed"
)

# Said of a report that is not there after a stop (`tests_of`): Bun writes it at its end.
_STOPPED_BEFORE_ITS_REPORT: Final = {
    "deadline": ": the run was stopped at its deadline before the runner wrote it",
    "cancelled": ": the run was cancelled before the runner wrote it",
}

# Signs one run's statement from how it ended and, once the cleanup is proved, its report.
# With the runner's JUnit report when the plan had Bun write one.
Sign = Callable[[Ending | RunOutcome, ResourceReport | None, TestResults | None], bytes]


def signer(
    valid: ValidRequest,
    plan: RunPlan,
    durability: Durability,
    operation_id: str,
    root_run: str | None,
    *,
    attester: Attester | None,
    digest: Callable[[], str],
    evidence: Callable[[Ending | RunOutcome], Evidence],
    started_unix_ms: int,
) -> Sign | None:
    """How this run's statement is signed, or None when no key is held.

    `evidence` makes the run's evidence (`EvidenceOf`, shared with the rest of the call);
    `started_unix_ms` is when its deadline started, its `startedOn` (docs/attestation.md).
    """
    if attester is None or attester.identity is None:
        # Without a lock nothing is admitted, so no run reaches here unsigned by mistake.
        return None
    return _RunSigner(
        valid,
        plan,
        durability,
        operation_id=operation_id,
        root_run=root_run or None,
        attester=attester,
        digest=digest,
        evidence=evidence,
        started_unix_ms=started_unix_ms,
    )


class _RunSigner:
    """Signs one run's statements: at its end, then with its cleanup's report (`Sign`)."""

    def __init__(
        self,
        valid: ValidRequest,
        plan: RunPlan,
        durability: Durability,
        *,
        operation_id: str,
        root_run: str | None,
        attester: Attester,
        digest: Callable[[], str],
        evidence: Callable[[Ending | RunOutcome], Evidence],
        started_unix_ms: int,
    ) -> None:
        self._kind = valid.command.kind
        self._durability = durability
        self._operation_id = operation_id
        self._root_run = root_run
        self._attester = attester
        self._digest = digest
        self._evidence = evidence
        # The instant the run's deadline runs from, before its row is begun: a deadline
        # run's `finishedOn - startedOn` is then its deadline (and the stop), not less.
        self._started = started_unix_ms
        # The enforcement facts only go into the statement: made at the first signing, not
        # on the path to the launch.
        self._enforcement = cache(partial(enforced, plan))
        # Both signings read the same console output: without a JUnit report, its test
        # names are read from it once.
        self._console = lru_cache(maxsize=1)(read_console_report)

    def __call__(
        self,
        ended: Ending | RunOutcome,
        resources: ResourceReport | None,
        tests: TestResults | None,
    ) -> bytes:
        made = self._evidence(ended)
        record = RunRecord(
            run=RunFacts(
                # The prepared envelope's, once the row is begun: not known when this is made.
                run_id=self._durability.envelope_run_id,
                caller_run=self._root_run,
                operation_id=self._operation_id,
            ),
            kind=self._kind,
            enforced=self._enforcement(),
            plan_digest=self._digest(),
            evidence=made,
            stdout=ended.stdout.data,
            stderr=ended.stderr.data,
            resources=resources,
            started_unix_ms=self._started,
            finished_unix_ms=unix_ms(),
            tests=self._tests(made, tests, ended.stderr),
        )
        return self._attester.attest(record)

    def _tests(
        self, made: Evidence, tests: TestResults | None, stderr: CapturedStream
    ) -> TestReport | None:
        if self._kind != "test":
            return None
        tail = _tail(stderr)
        junit = (
            None
            if tests is None
            else read_junit_report(tests, made.stderr.text, made.exit_code, tail)
        )
        # Why the report the plan asked for is not there: the statement says it as the
        # unsigned `tests.problem` does.
        missing = "" if tests is None else tests.problem
        return junit or self._console(
            made.stderr.text,
            made.exit_code,
            tail,
            missing,
            test_files=command_files(made.invocation),
        )


def tests_of(plan: RunPlan, outcome: RunOutcome, made: Evidence) -> TestResults | None:
    """The per-test results of a run whose plan asked for the runner's report."""
    if plan.scratch_file is None or outcome.scratch_file is None:
        return None
    scratch = outcome.scratch_file
    problem = scratch.problem
    tail = _tail(outcome.stderr)
    if problem == "missing" and outcome.stop_reason != "exited":
        problem += _STOPPED_BEFORE_ITS_REPORT[outcome.stop_reason]
    elif problem == "missing" and outcome.exit_code == 0:
        ran = no_test_ran(made.stderr.text, tail)
        # A test calling `process.exit(0)` ends Bun before its reporter writes: the exit
        # code alone then reads as a pass, after a failure as well.
        problem += _NO_TEST_RAN.format(ran=ran) if ran else _ENDED_BEFORE_ITS_REPORT
    elif problem == "missing":
        problem += _ended_without_it(outcome)
    oom = outcome.report.oom_killed
    return TestResults.read(scratch.data, problem, evidence=made, stderr_tail=tail, oom_killed=oom)


def _ended_without_it(outcome: RunOutcome) -> str:
    """How a runner that ended by itself, not with exit 0, ended before writing its report:
    a test calling `process.exit(2)`, a file that failed to load, a kill."""
    if outcome.signal is None:
        return f": the runner exited with code {outcome.exit_code} without writing it"
    if outcome.report.oom_killed and outcome.signal == "SIGKILL":
        return ": the runner was killed at the envelope's memory limit before writing it"
    return f": the runner was killed by {outcome.signal} before writing it"


def output_ends(outcome: RunOutcome) -> OutputEnds:
    """Each stream's end past the cap, as the envelope kept it: how much was not kept, and
    the last bytes (those after the kept text only, when the tail reaches back into it)."""
    return OutputEnds(stdout=_end(outcome.stdout), stderr=_end(outcome.stderr))


def _end(stream: CapturedStream) -> StreamEnd:
    tail = stream.tail[-stream.dropped :] if stream.dropped else b""
    # One U+FFFD per invalid byte (not one per invalid sequence, as "replace" gives): the
    # view counts the bytes a cut end shows from its text (`mcp_view._ended`).
    text = _INVALID_BYTE.sub("\ufffd", tail.decode("utf-8", errors="surrogateescape"))
    return StreamEnd(dropped_bytes=stream.dropped, tail=text, tail_bytes=len(tail))


def _tail(stderr: CapturedStream) -> str:
    """The end of stderr past its cap, as text ("" when the retained text is all of it)."""
    return stderr.tail.decode("utf-8", errors="replace")


class EvidenceOf:
    """One call's evidence from how its run ended, made once for the same ending.

    A run's end and its outcome (once the cleanup is proved) carry the same output: the
    journal's record, the two signed statements and the answer all use one `Evidence`.
    """

    def __init__(self, valid: ValidRequest) -> None:
        self._valid = valid
        self._made: tuple[tuple[object, ...], Evidence] | None = None

    def __call__(self, outcome: RunOutcome | Ending) -> Evidence:
        key = (
            outcome.stdout,
            outcome.stderr,
            outcome.exit_code,
            outcome.signal,
            outcome.stop_reason,
        )
        made = self._made
        if made is not None and made[0] == key:
            return made[1]
        evidence = evidence_of(self._valid, outcome)
        self._made = (key, evidence)
        return evidence


def evidence_of(valid: ValidRequest, outcome: RunOutcome | Ending) -> Evidence:
    """The contract's ten fields, from a validated request and how its run ended."""
    return Evidence(
        candidate_digest=valid.candidate_digest,
        command=valid.command.name,
        invocation=valid.invocation,
        stdin_digest=valid.stdin_digest,
        stdout=decode_output(outcome.stdout.data, outcome.stdout.truncated),
        stderr=decode_output(outcome.stderr.data, outcome.stderr.truncated),
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        stop_reason=outcome.stop_reason,
        # The only value: evidence reaches a caller once the cleanup is proved, else a failure.
        cleanup="complete",
    )
