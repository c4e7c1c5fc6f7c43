"""The one table: each envelope failure's wire code and the words its caller is told."""

from __future__ import annotations

import msgspec
import pytest

from jigcmd.command.failures import envelope_error, stopped_error
from jigcmd.envelope.api import EnvelopeFailure, FailureKind
from jigcmd.errors import Code
from tests.protocol.fake_server import canned_evidence

UNPROVED = ("cgroup jigcmd-x still populated", "netns jigcmd-x still mounted")


@pytest.mark.parametrize(
    ("failure", "code", "message"),
    [
        pytest.param(
            EnvelopeFailure(FailureKind.ZYGOTE_NOT_STARTED, "zygote", "No such file"),
            Code.EXECUTION_FAILED,
            "envelope zygote could not start: No such file",
            id="zygote-not-started",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.ENVELOPE_UNAVAILABLE, "zygote", "cgroup: read-only"),
            Code.EXECUTION_FAILED,
            "containment envelope unavailable, nothing ran: cgroup: read-only",
            id="envelope-unavailable",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.ZYGOTE_UNREACHABLE, "launch", "Broken pipe"),
            Code.EXECUTION_FAILED,
            "envelope zygote unreachable: Broken pipe",
            id="zygote-unreachable",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.SETUP_FAILED, "cpu pin", "Invalid argument"),
            Code.EXECUTION_FAILED,
            "containment envelope incomplete, nothing ran: cpu pin: Invalid argument",
            id="setup-failed",
        ),
        pytest.param(
            EnvelopeFailure(
                FailureKind.SETUP_FAILED,
                "mounts",
                "No space left",
                cleaned_up=False,
                cleanup_problems=UNPROVED,
            ),
            Code.UNCERTAIN,
            "containment envelope incomplete, nothing ran: mounts: No space left; cleanup not "
            "confirmed: cgroup jigcmd-x still populated; netns jigcmd-x still mounted",
            id="setup-failed-cleanup-unproved",
        ),
        pytest.param(
            EnvelopeFailure(
                FailureKind.PATH_CHANGED, "cwd changed", "/srv/repo has a symlink in it now"
            ),
            Code.EXECUTION_FAILED,
            "cwd changed after the policy check: /srv/repo has a symlink in it now; nothing ran",
            id="path-changed",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.DEADLINE_BEFORE_START, "deadline", "too late"),
            Code.DEADLINE_EXCEEDED,
            "the deadline passed before the candidate started; nothing ran",
            id="deadline-before-start",
        ),
        pytest.param(
            EnvelopeFailure(
                FailureKind.DEADLINE_BEFORE_START,
                "deadline",
                "too late",
                cleaned_up=False,
                cleanup_problems=UNPROVED,
            ),
            Code.UNCERTAIN,
            "the deadline passed before the candidate started; nothing ran; cleanup not "
            "confirmed: cgroup jigcmd-x still populated; netns jigcmd-x still mounted",
            id="deadline-before-start-cleanup-unproved",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.CANCELLED_BEFORE_DISPATCH, "gate"),
            Code.CANCELLED,
            "cancelled before dispatch; nothing ran",
            id="cancelled-before-dispatch",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.INIT_LOST, "init lost", "pid 1 died"),
            Code.UNCERTAIN,
            "pid 1 died; the envelope was cleaned up",
            id="init-lost",
        ),
        pytest.param(
            EnvelopeFailure(
                FailureKind.INIT_LOST,
                "init lost",
                "pid 1 died",
                cleaned_up=False,
                cleanup_problems=UNPROVED,
            ),
            Code.UNCERTAIN,
            "pid 1 died; cleanup not confirmed: cgroup jigcmd-x still populated; "
            "netns jigcmd-x still mounted",
            id="init-lost-cleanup-unproved",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.REPORTS_STOPPED, "reports", cleaned_up=False),
            Code.UNCERTAIN,
            "the envelope supervisor stopped reporting; the run's end and cleanup are unproved",
            id="reports-stopped",
        ),
        pytest.param(
            EnvelopeFailure(
                FailureKind.CLEANUP_UNPROVED,
                "cleanup",
                cleaned_up=False,
                cleanup_problems=UNPROVED,
            ),
            Code.UNCERTAIN,
            "cleanup could not be confirmed: cgroup jigcmd-x still populated; "
            "netns jigcmd-x still mounted",
            id="cleanup-unproved",
        ),
    ],
)
def test_each_envelope_failure_has_one_code_and_the_words_callers_have_always_been_told(
    failure: EnvelopeFailure, code: Code, message: str
) -> None:
    """Every kind maps to its code; the message names the step or the cleanup left unproved."""
    error = envelope_error(failure)
    assert (error.code, error.message) == (code, message)


def test_every_failure_kind_is_in_the_table() -> None:
    """No kind falls through: each is given a code."""
    for kind in FailureKind:
        assert envelope_error(EnvelopeFailure(kind, "step", "detail")).code in Code


def test_a_run_stopped_by_its_deadline_or_a_cancel_is_a_failure_carrying_its_evidence() -> None:
    """Deadline and cancel are DEADLINE_EXCEEDED and CANCELLED with the evidence; an exit is not."""
    stopped = canned_evidence("tests", "deadline")
    deadline = stopped_error(stopped)
    cancelled = stopped_error(canned_evidence("tests", "cancelled"))
    assert deadline is not None and cancelled is not None
    assert deadline.code == Code.DEADLINE_EXCEEDED
    assert deadline.message == (
        "the command reached its deadline and its whole process tree was killed"
    )
    assert cancelled.code == Code.CANCELLED
    assert cancelled.message == "the command was cancelled and its whole process tree was killed"
    assert deadline.details == {"command": msgspec.to_builtins(stopped)}
    assert cancelled.details is not None
    assert cancelled.details["command"]["stopReason"] == "cancelled"
    assert cancelled.details["command"]["stdout"] == {"text": "1 pass\n", "truncated": False}
    assert stopped_error(canned_evidence("tests")) is None


def test_a_stop_for_the_last_waiting_callers_deadline_is_a_deadline_and_says_whose() -> None:
    """Stopped for the deadline of the last caller waiting (not its own): DEADLINE_EXCEEDED
    naming that deadline, with the evidence; before dispatch, DEADLINE_EXCEEDED, nothing ran."""
    stopped = stopped_error(canned_evidence("tests", "deadline"), waiters_deadline=True)
    assert stopped is not None and stopped.code == Code.DEADLINE_EXCEEDED
    assert stopped.message == (
        "the command was stopped at the deadline of the last caller waiting for it (earlier "
        "than its own) and its whole process tree was killed"
    )
    assert stopped.details is not None
    assert stopped.details["command"]["stopReason"] == "deadline"
    kind = FailureKind.CANCELLED_BEFORE_DISPATCH
    early = envelope_error(EnvelopeFailure(kind, "gate", ""), deadline_stop=True)
    assert early.code == Code.DEADLINE_EXCEEDED
    assert early.message.endswith("passed before dispatch; nothing ran")
    assert envelope_error(EnvelopeFailure(kind, "gate", "")).code == Code.CANCELLED
