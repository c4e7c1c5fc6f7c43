"""Pid 1 lost mid-run: the job's OOM kill count, read or not, never turns UNCERTAIN into a
setup failure, and an unread count claims no cause (stubs, no kernel resources)."""

from __future__ import annotations

import types

import pytest

from jigcmd.envelope.failure import StepError
from jigcmd.envelope.lifecycle import Envelope
from jigcmd.envelope.messages import INIT_LOST
from jigcmd.envelope.states import State
from jigcmd.plan import Limits


def _lost(stats: object) -> StepError:
    """What the envelope fails with when pid 1 is lost while the candidate runs."""
    envelope = object.__new__(Envelope)
    failed: list[StepError] = []
    envelope.state = State.RUNNING
    envelope.launch = types.SimpleNamespace(plan=types.SimpleNamespace(limits=Limits()))  # type: ignore[assignment]
    envelope.held = types.SimpleNamespace(job=types.SimpleNamespace(stats=stats))  # type: ignore[assignment]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(envelope, "_unwatch_sock", lambda: None)
        patch.setattr(envelope, "_fail", failed.append)
        envelope._init_lost("the candidate ran")
    [error] = failed
    assert error.step == INIT_LOST
    return error


def _unreadable() -> None:
    raise OSError(2, "No such file or directory", "pids.events")


def _malformed() -> None:
    int("max")


@pytest.mark.parametrize("stats", [_unreadable, _malformed])
def test_an_unread_oom_count_says_the_cause_is_unknown_and_stays_uncertain(
    stats: object,
) -> None:
    """OSError or anything else from the stats: INIT_LOST, "(cause unknown …)", no outsider."""
    assert _lost(stats).error == (
        "pid 1 of the envelope died without reporting how the candidate ended (cause unknown: "
        "the job's OOM kill count could not be read); the candidate ran, its outcome is unknown"
    )
