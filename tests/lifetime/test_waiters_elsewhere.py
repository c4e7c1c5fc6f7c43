"""Run/1 waiters in two `serve` processes on one state directory, with one run id.

Server A runs the operation; server B's request joins it through the journal. B's waiter
counts as A's own do: the last cancel in A leaves the run going while B's waiter lives, and
stops it once none does (B's cancel, or B's process killed: a dead waiter keeps nothing).
The candidate lingers until the test sends it SIGTERM, so it ends when the test says.
B's own end is worded as what happens where the work runs, and B's session is busy with a
running operation; B with A's very deadline gets the work's outcome, and B whose A is killed
where nothing closes the row (its supervisor stopped) fences it and gets its UNCERTAIN.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.store import Journal
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import Proc, alive, wait_for

pytestmark = pytest.mark.envelope


def _cancel(request_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": request_id}}


def _joins(rig: Rig, operation_id: str) -> int:
    """How many joins of the operation the journal names now."""
    with Journal.open(rig.state_dir) as journal:
        return len(journal.waiting(operation_id, root_run=rig.run_id))


def _run_here_joined_there(
    rig: Rig, operation_id: str, token: str, **extra: object
) -> tuple[ServeChild, ServeChild, dict[str, Any], Proc]:
    """Server A running `operation_id` for a-1, and server B's b-1 waiting for it there
    (`extra`: both requests' further params, a deadline)."""
    input = cli_input(LINGER, token)
    here, there = rig.serve(), rig.serve()
    here.send(flow_call("a-1", operation_id, input, **extra))
    candidate = rig.candidate(token)
    there.send(flow_call("b-1", operation_id, input, **extra))
    wait_for(lambda: _joins(rig, operation_id) == 1, 30, "B's join in the journal")
    return here, there, input, candidate


# B's own end when no other process waits: whether A keeps the work is A's to say.
_STOPPED_UNLESS = (
    "no caller waits for it in another process, so it is being stopped (CANCELLED recorded) "
    "unless a caller in the process running it still waits for it"
)


def _error(line: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(line)["error"]
    assert error["code"] == -32000
    return error


def _left_alone(line: bytes, operation_id: str) -> None:
    error = _error(line)
    assert error["data"] == {"code": "CANCELLED"}
    assert f"operation {operation_id!r} continues for its other callers" in error["message"]


def _stopped_cancelled(line: bytes) -> None:
    """The run's own end by a stop: CANCELLED with its evidence."""
    error = _error(line)
    assert error["data"]["code"] == "CANCELLED"
    evidence = error["data"]["details"]["command"]
    assert (evidence["stopReason"], evidence["cleanup"]) == ("cancelled", "complete")


def _replayed(server: ServeChild, request_id: str, input: object, op: str, line: bytes) -> None:
    """`server` answers the operation again with the very same bytes (its id aside)."""
    server.send(flow_call(request_id, op, input))
    original = json.loads(line)["id"].encode()
    expected = line.replace(b'"id":"' + original + b'"', b'"id":"' + request_id.encode() + b'"')
    assert server.response(request_id) == expected


def test_a_waiter_in_another_serve_keeps_the_run_past_the_last_cancel_here(rig: Rig) -> None:
    """B joined, A's only waiter cancels: A's is CANCELLED alone, the run completes, B gets
    its evidence, and the operation replays that in both servers and after a restart (until
    2026-12-07 A stopped it, and B's waiter and every replay were CANCELLED)."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-joined-elsewhere"
    here, there, input, candidate = _run_here_joined_there(rig, operation_id, token)
    here.send(_cancel("a-1"))
    _left_alone(here.response("a-1"), operation_id)
    assert alive(candidate), "the last cancel in A killed the run B's waiter waits for"
    rig.signal(candidate, signal.SIGTERM)
    joined = there.response("b-1")
    value = json.loads(joined)["result"]["value"]
    assert (value["stopReason"], value["exitCode"]) == ("exited", 0)
    assert value["stdout"]["text"] == f"started {token}\nended {token}\n"
    _replayed(here, "a-2", input, operation_id, joined)
    _replayed(there, "b-2", input, operation_id, joined)
    assert _joins(rig, operation_id) == 0
    assert here.close_input() == 0 and there.close_input() == 0
    again = rig.serve()
    _replayed(again, "c-1", input, operation_id, joined)
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_killed_waiters_process_keeps_nothing_alive(rig: Rig) -> None:
    """B joined, then B's process is SIGKILLed (its join stays in the journal), then A's only
    waiter cancels: no live waiter is left, so the run stops and CANCELLED is recorded."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-joiner-killed"
    here, there, input, candidate = _run_here_joined_there(rig, operation_id, token)
    there.kill()
    assert _joins(rig, operation_id) == 1
    here.send(_cancel("a-1"))
    last = here.response("a-1")
    _stopped_cancelled(last)
    assert not alive(candidate)
    assert _joins(rig, operation_id) == 0, "the dead process's join was not removed"
    _replayed(here, "a-2", input, operation_id, last)
    assert here.close_input() == 0
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.outcome) == ("done", "failure")
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_the_waiter_elsewhere_cancelled_first_leaves_the_last_cancel_here_to_stop_it(
    rig: Rig,
) -> None:
    """B joined and cancelled (alone: the run goes on in A), then A's only waiter cancels:
    that is the last live waiter, so the run stops and A's waiter gets its CANCELLED."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-both-leave"
    here, there, input, candidate = _run_here_joined_there(rig, operation_id, token)
    there.send(_cancel("b-1"))
    error = _error(there.response("b-1"))
    assert error["data"] == {"code": "CANCELLED"}
    assert error["message"].endswith(_STOPPED_UNLESS), error["message"]
    assert _joins(rig, operation_id) == 0
    assert alive(candidate)
    here.send(_cancel("a-1"))
    last = here.response("a-1")
    _stopped_cancelled(last)
    assert not alive(candidate)
    _replayed(there, "b-2", input, operation_id, last)
    assert here.close_input() == 0 and there.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_sigterm_of_the_server_running_it_fences_the_run_whoever_waits_elsewhere(
    rig: Rig,
) -> None:
    """B joined, then A gets SIGTERM (its coordinator is lost): the run cannot outlive A, so
    A fences it as ever, though B's waiter lives; A's waiter and B's get the CANCELLED it
    recorded."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-fenced-joined-elsewhere"
    here, there, input, candidate = _run_here_joined_there(rig, operation_id, token)
    assert here.terminate() == 0
    assert not alive(candidate), "the candidate outlived the server running it"
    (answered,) = [line for line in here.lines if json.loads(line).get("id") == "a-1"]
    _stopped_cancelled(answered)
    joined = there.response("b-1")
    assert joined == answered.replace(b'"id":"a-1"', b'"id":"b-1"')
    _replayed(there, "b-2", input, operation_id, joined)
    assert there.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_the_last_waiter_elsewhere_is_told_the_work_is_being_stopped(rig: Rig) -> None:
    """A's only waiter cancels (B keeps the run), then B's: B is told the work is being
    stopped, CANCELLED recorded, which a re-send gets (until 2026-12-07 B was told "it goes
    on there (send it again to join it)")."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-last-elsewhere"
    here, there, input, candidate = _run_here_joined_there(rig, operation_id, token)
    here.send(_cancel("a-1"))
    _left_alone(here.response("a-1"), operation_id)
    there.send(_cancel("b-1"))
    error = _error(there.response("b-1"))
    assert error["data"] == {"code": "CANCELLED"}
    assert "goes on there" not in error["message"]
    assert error["message"].endswith(_STOPPED_UNLESS), error["message"]
    wait_for(lambda: not alive(candidate), 30, "the run stopped")
    there.send(flow_call("b-2", operation_id, input))
    _stopped_cancelled(there.response("b-2"))
    assert here.close_input() == 0 and there.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_session_joined_to_an_operation_elsewhere_is_busy_with_a_running_one(rig: Rig) -> None:
    """Another operation sent to B while B waits for A's run: RESOURCE_EXHAUSTED saying the
    joined one "is still running" (until 2026-12-07: "is still being answered (replayed from
    the journal, or starting)")."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-busy-joined"
    here, there, _, candidate = _run_here_joined_there(rig, operation_id, token)
    there.send(flow_call("b-other", "op-other", cli_input(LINGER, f"{token}-other")))
    error = _error(there.response("b-other"))
    assert error["data"] == {"code": "RESOURCE_EXHAUSTED"}
    assert error["message"].startswith(
        f"operation {operation_id!r} is still running in this session; "
    ), error["message"]
    rig.signal(candidate, signal.SIGTERM)
    joined = there.response("b-1")
    assert joined == here.response("a-1").replace(b'"id":"a-1"', b'"id":"b-1"')
    assert here.close_input() == 0 and there.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(f"{token}-other") == 0


def test_a_waiter_elsewhere_with_the_works_deadline_gets_its_outcome(rig: Rig) -> None:
    """A and B send one deadlineUnixMs: at it the run is killed, and B gets A's very answer,
    DEADLINE_EXCEEDED with the evidence (until 2026-12-07 B got a waiter-only DEADLINE_EXCEEDED
    saying the operation "goes on there", without evidence)."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-same-deadline-elsewhere"
    deadline = time.time_ns() // 1_000_000 + 6000
    here, there, _, candidate = _run_here_joined_there(
        rig, operation_id, token, deadlineUnixMs=deadline
    )
    answered = here.response("a-1")
    error = _error(answered)
    assert error["data"]["code"] == "DEADLINE_EXCEEDED"
    assert error["data"]["details"]["command"]["stopReason"] == "deadline"
    assert there.response("b-1") == answered.replace(b'"id":"a-1"', b'"id":"b-1"')
    assert not alive(candidate)
    assert here.close_input() == 0 and there.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_waiter_elsewhere_fences_the_run_of_a_killed_server_nothing_closes(rig: Rig) -> None:
    """A is SIGKILLed with its supervisor stopped (so nothing closes the row, as when A dies
    just as its candidate ends): B sees A gone, fences the run as recovery does and gets the
    UNCERTAIN it records, as does a re-send; nothing is left (until 2026-12-07 B waited its
    whole deadline, its ceiling here, and was told the operation "goes on there")."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-owner-killed"
    here, there, input, candidate = _run_here_joined_there(rig, operation_id, token)
    supervisor = rig.supervisor(operation_id)
    rig.stop(supervisor)
    here.kill()
    answered = there.response("b-1")
    error = _error(answered)
    assert error["data"]["code"] == "UNCERTAIN", error
    assert error["message"] == "a prior command dispatch was fenced without a proved result"
    assert not alive(candidate) and not alive(supervisor)
    rig.resume(supervisor)
    there.send(flow_call("b-2", operation_id, input))
    assert there.response("b-2") == answered.replace(b'"id":"b-1"', b'"id":"b-2"')
    assert there.close_input() == 0
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.cleanup) == ("uncertain", "complete")
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1
