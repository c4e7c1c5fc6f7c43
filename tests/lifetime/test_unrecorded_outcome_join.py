"""An outcome a full disk kept from the journal, seen from another server: the idle server
that ran it closes its row once space returns, and a caller joining it elsewhere gets that
UNCERTAIN at once, never a wait to its deadline for a run that ended long ago."""

from __future__ import annotations

import time
import uuid

import pytest

from jigcmd.clock import unix_ms
from tests.faults.disk import SmallDisk
from tests.lifetime.candidates import cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

# Sleeps while the test fills the disk, then prints 256 KiB: its evidence cannot be written.
_LATE_AND_LOUD = (
    "await new Promise((done) => setTimeout(done, 2000));\n"
    'for (let i = 0; i < 256; i++) console.log("x".repeat(1023));\n'
)
# A bound on waiting for the server's retries, not a timing claim: they come within seconds.
_FAILSAFE_S = 30.0


def test_an_unrecorded_outcome_ends_for_a_joiner_in_another_server(
    state_disk: SmallDisk, rig: Rig
) -> None:
    """UNCERTAIN to its caller; once space is back, `runs` and a second server agree."""
    first = rig.serve()
    call = flow_call("call-1", "op-1", cli_input(_LATE_AND_LOUD, f"tok-{uuid.uuid4().hex}"))
    first.send(call)
    failsafe = time.monotonic() + _FAILSAFE_S
    while "op-1  running" not in rig.runs() and time.monotonic() < failsafe:
        time.sleep(0.05)
    state_disk.fill()
    error = first.answer("call-1")["error"]
    assert error["data"]["code"] == "UNCERTAIN", error
    assert "could not record its outcome" in error["message"], error
    state_disk.free()
    listed = rig.runs()
    while "op-1  uncertain" not in listed and time.monotonic() < failsafe + _FAILSAFE_S:
        time.sleep(0.2)
        listed = rig.runs()
    assert "op-1  uncertain" in listed, listed
    second = rig.serve()
    second.send({**call, "id": "call-2"})
    assert second.answer("call-2")["error"] == error


def test_a_joiner_elsewhere_is_not_told_an_ended_run_still_runs(
    state_disk: SmallDisk, rig: Rig
) -> None:
    """While the disk stays full, a joiner whose deadline is earlier than the run's hears that
    the run ended unrecorded, never that it runs and is being stopped (CANCELLED recorded)."""
    # Both before the disk fills: on a full one a journal may not open (its `-shm` index).
    first, second = rig.serve(), rig.serve()
    token = f"tok-{uuid.uuid4().hex}"
    call = flow_call("call-1", "op-1", cli_input(_LATE_AND_LOUD, token))
    first.send(call)
    failsafe = time.monotonic() + _FAILSAFE_S
    while "op-1  running" not in rig.runs() and time.monotonic() < failsafe:
        time.sleep(0.05)
    state_disk.fill()
    assert first.answer("call-1")["error"]["data"]["code"] == "UNCERTAIN"
    params = {**call["params"], "deadlineUnixMs": unix_ms() + 2000}
    second.send({**call, "id": "call-2", "params": params})
    error = second.answer("call-2")["error"]
    assert error["data"]["code"] == "DEADLINE_EXCEEDED", error
    assert "has not recorded its outcome" in error["message"], error
    assert "still running" not in error["message"], error
    assert "CANCELLED" not in error["message"], error
    state_disk.free()
