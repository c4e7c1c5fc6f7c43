"""A run whose evidence is durable but whose row close a full disk refused, seen from another
server: the idle server that ran it closes the row `done` once space returns, so `runs` and a
second server replay its answer; while it cannot, a joiner elsewhere is told what it knows."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from jigcmd.clock import unix_ms
from jigcmd.frontends.servechild import ServeChild
from tests.faults.disk import SmallDisk
from tests.lifetime.candidates import cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

# Sleeps while the test nearly fills the disk, then prints a line: its evidence still fits.
_LATE_AND_QUIET = 'await new Promise((done) => setTimeout(done, 2000));\nconsole.log("end");\n'
# What the disk keeps free: room for the evidence's commit, none for the close after it.
_ROOM_FOR_EVIDENCE = 16384
# The serving closer's last try before it gives the close up (`rowclosing._CLOSE_RETRY_S`).
_GIVEN_UP = "failed (attempt 5)"
# A bound on waiting for the server's retries, not a timing claim: they come within seconds.
_FAILSAFE_S = 30.0


def _answered_with_its_close_lost(
    state_disk: SmallDisk, rig: Rig, call: dict[str, Any]
) -> tuple[ServeChild, dict[str, Any]]:
    """The first server's answer to `call`, a success whose row close it has given up."""
    first = rig.serve()
    first.send(call)
    failsafe = time.monotonic() + _FAILSAFE_S
    while "op-1  running" not in rig.runs() and time.monotonic() < failsafe:
        time.sleep(0.05)
    state_disk.leave(_ROOM_FOR_EVIDENCE)
    answer = first.answer(call["id"])
    assert "result" in answer, answer
    while _GIVEN_UP not in first.stderr() and time.monotonic() < failsafe + _FAILSAFE_S:
        time.sleep(0.1)
    assert _GIVEN_UP in first.stderr(), first.stderr()
    return first, answer


def test_a_close_given_up_is_retried_until_space_returns(state_disk: SmallDisk, rig: Rig) -> None:
    """Answered, its close refused past the closer's tries: once space is back the idle
    server closes it `done`, and a second server replays the very answer."""
    call = flow_call("call-1", "op-1", cli_input(_LATE_AND_QUIET, f"tok-{uuid.uuid4().hex}"))
    _, answer = _answered_with_its_close_lost(state_disk, rig, call)
    state_disk.free()
    failsafe = time.monotonic() + _FAILSAFE_S
    listed = rig.runs()
    while "op-1  done" not in listed and time.monotonic() < failsafe:
        time.sleep(0.2)
        listed = rig.runs()
    assert "op-1  done" in listed, listed
    second = rig.serve()
    second.send({**call, "id": "call-2"})
    assert second.answer("call-2")["result"] == answer["result"]


def test_a_joiner_elsewhere_hears_the_evidence_is_recorded(state_disk: SmallDisk, rig: Rig) -> None:
    """While the disk stays full, a joiner whose deadline passes is told the run ended with
    its evidence recorded, not that it still runs or is being stopped."""
    call = flow_call("call-1", "op-1", cli_input(_LATE_AND_QUIET, f"tok-{uuid.uuid4().hex}"))
    # Before the disk fills: on a nearly full one a journal may not open (its `-shm` index).
    second = rig.serve()
    _answered_with_its_close_lost(state_disk, rig, call)
    params = {**call["params"], "deadlineUnixMs": unix_ms() + 2000}
    second.send({**call, "id": "call-2", "params": params})
    error = second.answer("call-2")["error"]
    assert error["data"]["code"] == "DEADLINE_EXCEEDED", error
    assert "its evidence is recorded" in error["message"], error
    assert "still running" not in error["message"], error
    state_disk.free()
