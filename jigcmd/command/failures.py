"""The one place a failure of the envelope, or a stopped run, is given a wire code and words.

The envelope raises `EnvelopeFailure` saying what happened; the service and the fronts
that answer callers turn it into a `JigError` here, and nowhere else.
"""

from __future__ import annotations

import logging
from typing import Any, Final, assert_never

import msgspec

from jigcmd.envelope.api import EnvelopeFailure, FailureKind
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport
from jigcmd.protocol.commands import OutputEnds

__all__ = [
    "INTERNAL_ERROR",
    "StoppedRun",
    "before_dispatch",
    "envelope_error",
    "internal_error",
    "stopped_error",
    "unread_end",
]

logger = logging.getLogger(__name__)

# What a caller is told of a bug in the command service: it never names the bug.
INTERNAL_ERROR: Final = "internal error in the command service; the outcome is unknown"


class StoppedRun(JigError):
    """Raised when a run was stopped by its deadline or a cancel; `report` is what the
    envelope measured (its `details.command` is the collected evidence)."""

    def __init__(
        self, code: Code, message: str, details: dict[str, Any], report: ResourceReport | None
    ) -> None:
        super().__init__(code, message, details)
        self.report = report
        # Each stream past the cap (`jigcmd run` shows it), once the run's end is read.
        self.ends: OutputEnds | None = None


def before_dispatch(*, deadline: bool) -> JigError:
    """A stop asked before the candidate was let start: a cancel, or with `deadline` the
    deadline of the last caller waiting for it (`CancelSignal.deadline_passed`)."""
    if deadline:
        return JigError(
            Code.DEADLINE_EXCEEDED,
            "the deadline of the last caller waiting for it passed before dispatch; nothing ran",
        )
    return JigError(Code.CANCELLED, "cancelled before dispatch; nothing ran")


def envelope_error(failure: EnvelopeFailure, *, deadline_stop: bool = False) -> JigError:
    """The code and message a caller is told for `failure`; `deadline_stop`: the stop asked
    was for the deadline of the last caller waiting, not a cancel."""
    detail, problems = failure.detail, "; ".join(failure.cleanup_problems)
    match failure.kind:
        case FailureKind.ZYGOTE_NOT_STARTED:
            return JigError(
                Code.EXECUTION_FAILED, _advised(f"envelope zygote could not start: {detail}")
            )
        case FailureKind.ENVELOPE_UNAVAILABLE:
            return JigError(
                Code.EXECUTION_FAILED,
                _advised(f"containment envelope unavailable, nothing ran: {detail}"),
            )
        case FailureKind.ZYGOTE_UNREACHABLE:
            return JigError(Code.EXECUTION_FAILED, f"envelope zygote unreachable: {detail}")
        case FailureKind.SETUP_FAILED:
            message = _advised(
                f"containment envelope incomplete, nothing ran: {failure.step}: {detail}"
            )
            if failure.cleaned_up:
                return JigError(Code.EXECUTION_FAILED, message)
            # Nothing ran, but what was built may still hold resources: not a clean failure.
            return JigError(Code.UNCERTAIN, f"{message}; cleanup not confirmed: {problems}")
        case FailureKind.PATH_CHANGED:
            # e.g. "cwd changed after the policy check: /srv/x has a symlink in it now".
            message = f"{failure.step} after the policy check: {detail}; nothing ran"
            if failure.cleaned_up:
                return JigError(Code.EXECUTION_FAILED, message)
            return JigError(Code.UNCERTAIN, f"{message}; cleanup not confirmed: {problems}")
        case FailureKind.DEADLINE_BEFORE_START:
            message = "the deadline passed before the candidate started; nothing ran"
            if failure.cleaned_up:
                return JigError(Code.DEADLINE_EXCEEDED, message)
            return JigError(Code.UNCERTAIN, f"{message}; cleanup not confirmed: {problems}")
        case FailureKind.CANCELLED_BEFORE_DISPATCH:
            return before_dispatch(deadline=deadline_stop)
        case FailureKind.INIT_LOST:
            cleanup = (
                "the envelope was cleaned up"
                if failure.cleaned_up
                else f"cleanup not confirmed: {problems}"
            )
            return JigError(
                Code.UNCERTAIN, f"{detail}; {cleanup}", cleanup_proved=failure.cleaned_up
            )
        case FailureKind.REPORTS_STOPPED:
            return JigError(
                Code.UNCERTAIN,
                "the envelope supervisor stopped reporting; the run's end and cleanup are unproved",
            )
        case FailureKind.CLEANUP_UNPROVED:
            return JigError(Code.UNCERTAIN, f"cleanup could not be confirmed: {problems}")
        case _:
            assert_never(failure.kind)


def _advised(message: str) -> str:
    """`message`, and in a container that withholds a piece of the envelope, which piece and
    the option that gives it: the kernel's refusal alone (EPERM, EROFS) does not say."""
    from jigcmd.frontends.diagnosis.containerfacts import container_advice  # noqa: PLC0415 - read only when an envelope could not be built

    advice = container_advice()
    return message if advice is None else f"{message}; {advice}"


def stopped_error(
    evidence: Evidence, report: ResourceReport | None = None, *, waiters_deadline: bool = False
) -> StoppedRun | None:
    """The failure a run stopped by its deadline or a cancel answers with (with its evidence,
    and the resources it used for a front that shows them); None for a run that exited.

    `waiters_deadline`: the stop was asked at the deadline of the last caller waiting for the
    run, earlier than the run's own (`jigcmd.command.sharing`), and the message says so.
    """
    stop_reason = evidence.stop_reason
    if stop_reason == "exited":
        return None
    details = {"command": msgspec.to_builtins(evidence)}
    if stop_reason == "deadline":
        reached = (
            "the command was stopped at the deadline of the last caller waiting for it "
            "(earlier than its own)"
            if waiters_deadline
            else "the command reached its deadline"
        )
        return StoppedRun(
            Code.DEADLINE_EXCEEDED,
            f"{reached} and its whole process tree was killed",
            details,
            report,
        )
    if stop_reason == "cancelled":
        return StoppedRun(
            Code.CANCELLED,
            "the command was cancelled and its whole process tree was killed",
            details,
            report,
        )
    assert_never(stop_reason)


def unread_end(exc: Exception) -> JigError:
    """A run whose end and cleanup were proved, but whose result the service failed to make.

    `UNCERTAIN` with the cleanup proved: the run's row is closed with it (its evidence, once
    recorded, is not the answer), so a retry or a replay later answers the same.
    """
    _logged(exc)
    return JigError(
        Code.UNCERTAIN,
        "internal error in the command service while reading how the run ended; its "
        "envelope was cleaned up, but its outcome is unknown",
        cleanup_proved=True,
    )


def internal_error(exc: Exception) -> JigError:
    """An unexpected exception during a call: `UNCERTAIN`, nothing of the run proved."""
    _logged(exc)
    return JigError(Code.UNCERTAIN, INTERNAL_ERROR)


def _logged(exc: Exception) -> None:
    # One line for the operator (`jigcmd run` prints no traceback); the whole with --verbose.
    logger.error("internal error in the command service: %s: %s", type(exc).__name__, exc)
    logger.debug("the internal error's traceback", exc_info=exc)
