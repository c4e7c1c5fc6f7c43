"""Run/1 waiters in raw frames: an operation belongs to its live waiters, not to its first.

Each transport request is its own waiter: cancelling one answers that one CANCELLED and the
run goes on while another lives; the run is stopped, and CANCELLED recorded, only when the
last live waiter cancels (DEADLINE_EXCEEDED when its own deadline passes instead). The
candidate lingers until the test sends it SIGTERM, so it ends exactly when the test says and
a second dispatch would be seen from the host.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call, mcp_initialized, tool_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import Proc, alive

pytestmark = pytest.mark.envelope


def _cancel(request_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": request_id}}


def _error(line: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(line)["error"]
    assert error["code"] == -32000
    return error


def _started_and_joined(
    rig: Rig, operation_id: str, token: str, **join: object
) -> tuple[ServeChild, dict[str, Any], Proc]:
    """A server running `operation_id` for call-1, joined by call-2; its input and candidate."""
    input = cli_input(LINGER, token)
    server = rig.serve()
    server.send(flow_call("call-1", operation_id, input))
    candidate = rig.candidate(token)
    server.send(flow_call("call-2", operation_id, input, **join))
    return server, input, candidate


def _left_alone(line: bytes, operation_id: str, code: str = "CANCELLED") -> None:
    """A waiter's own answer: its code, no evidence, the run going on for the others."""
    error = _error(line)
    assert error["data"] == {"code": code}
    assert f"operation {operation_id!r} continues for its other callers" in error["message"]


def _completed(line: bytes, token: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(line)["result"]["value"]
    assert value["stopReason"] == "exited" and value["exitCode"] == 0
    assert value["stdout"]["text"] == f"started {token}\nended {token}\n"
    assert value["cleanup"] == "complete"
    return value


def _replays(server: ServeChild, request_id: str, input: object, op: str, line: bytes) -> None:
    """`server` answers the operation again with the very same bytes (its id aside)."""
    server.send(flow_call(request_id, op, input))
    original_id = json.loads(line)["id"].encode()
    expected = line.replace(b'"id":"' + original_id + b'"', b'"id":"' + request_id.encode() + b'"')
    assert server.response(request_id) == expected


def test_cancelling_the_first_request_leaves_the_run_to_its_joiner(rig: Rig) -> None:
    """Start, join, cancel the first: it alone is CANCELLED; the joiner gets the evidence."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-first-leaves"
    server, input, candidate = _started_and_joined(rig, operation_id, token)
    server.send(_cancel("call-1"))
    _left_alone(server.response("call-1"), operation_id)
    assert alive(candidate), "cancelling one waiter killed the run its joiner waits for"
    rig.signal(candidate, signal.SIGTERM)
    joined = server.response("call-2")
    _completed(joined, token)
    _replays(server, "call-3", input, operation_id, joined)
    assert server.close_input() == 0
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.outcome) == ("done", "evidence")
    # A restart of serve with the same run id replays the completed result, running nothing.
    again = rig.serve()
    _replays(again, "call-4", input, operation_id, joined)
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_join_sent_with_the_cancel_of_the_first_in_one_write_gets_the_evidence(
    rig: Rig,
) -> None:
    """Call, join, cancel of the call, in one write to a server just started (its first
    admission still waits for the runtime's check): the join was read before the cancel, so
    it is a live waiter; the first alone is CANCELLED, the run goes on and completes for the
    join, and the operation replays that (in the session, and after a restart)."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-cancelled-with-its-join"
    input = cli_input(LINGER, token)
    server = rig.serve()
    server.send(
        flow_call("call-1", operation_id, input),
        flow_call("call-2", operation_id, input),
        _cancel("call-1"),
    )
    _left_alone(server.response("call-1"), operation_id)
    rig.signal(rig.candidate(token), signal.SIGTERM)
    joined = server.response("call-2")
    _completed(joined, token)
    _replays(server, "call-3", input, operation_id, joined)
    assert server.close_input() == 0
    again = rig.serve()
    _replays(again, "call-4", input, operation_id, joined)
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_cancelling_the_joiner_leaves_the_run_to_the_first_request(rig: Rig) -> None:
    """Start, join, cancel the joiner: it alone is CANCELLED; the first completes."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-joiner-leaves"
    server, input, candidate = _started_and_joined(rig, operation_id, token)
    server.send(_cancel("call-2"))
    _left_alone(server.response("call-2"), operation_id)
    assert alive(candidate)
    rig.signal(candidate, signal.SIGTERM)
    first = server.response("call-1")
    _completed(first, token)
    assert server.close_input() == 0
    again = rig.serve()
    _replays(again, "call-3", input, operation_id, first)
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_cancelling_every_waiter_stops_the_run_and_records_cancelled_once(rig: Rig) -> None:
    """Both cancel: the first alone, then the last stops the run; one CANCELLED is recorded."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-all-leave"
    server, input, candidate = _started_and_joined(rig, operation_id, token)
    server.send(_cancel("call-1"))
    _left_alone(server.response("call-1"), operation_id)
    server.send(_cancel("call-2"))
    last = server.response("call-2")
    error = _error(last)
    assert not alive(candidate)
    assert error["data"]["code"] == "CANCELLED"
    evidence = error["data"]["details"]["command"]
    assert (evidence["stopReason"], evidence["cleanup"]) == ("cancelled", "complete")
    _replays(server, "call-3", input, operation_id, last)
    assert server.close_input() == 0
    rows = [row for key, row in rig.rows().items() if key[1] == operation_id]
    assert [(row.state, row.outcome) for row in rows] == [("done", "failure")]
    assert rows[0].result is not None and json.loads(rows[0].result)["code"] == "CANCELLED"
    again = rig.serve()
    _replays(again, "call-4", input, operation_id, last)
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_joiner_whose_own_deadline_passes_leaves_and_the_first_completes(rig: Rig) -> None:
    """A joiner's deadlineUnixMs passing ends its wait alone (DEADLINE_EXCEEDED), not the run."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-joiner-deadline"
    soon = time.time_ns() // 1_000_000 + 300
    server, _, candidate = _started_and_joined(rig, operation_id, token, deadlineUnixMs=soon)
    _left_alone(server.response("call-2"), operation_id, "DEADLINE_EXCEEDED")
    assert alive(candidate)
    rig.signal(candidate, signal.SIGTERM)
    _completed(server.response("call-1"), token)
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_the_last_waiters_own_deadline_stops_the_run_as_a_deadline_not_a_cancel(
    rig: Rig,
) -> None:
    """Start, join with an earlier deadlineUnixMs, cancel the first: the joiner is the last
    live waiter, and its deadline passing stops the run as at a deadline. It never cancelled:
    it is answered DEADLINE_EXCEEDED with the evidence (`stopReason` `deadline`), that is
    recorded, and the operation replays it (until 2026-12-07 it was CANCELLED, `cancelled`)."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-last-waiters-deadline"
    # Time enough for the cancel of the first to be applied before it passes.
    soon = time.time_ns() // 1_000_000 + 3000
    server, input, candidate = _started_and_joined(rig, operation_id, token, deadlineUnixMs=soon)
    server.send(_cancel("call-1"))
    _left_alone(server.response("call-1"), operation_id)
    last = server.response("call-2")
    error = _error(last)
    assert not alive(candidate)
    assert error["data"]["code"] == "DEADLINE_EXCEEDED"
    assert "deadline of the last caller waiting for it" in error["message"]
    evidence = error["data"]["details"]["command"]
    assert (evidence["stopReason"], evidence["signal"]) == ("deadline", "SIGKILL")
    assert evidence["cleanup"] == "complete"
    _replays(server, "call-3", input, operation_id, last)
    assert server.close_input() == 0
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.outcome) == ("done", "failure")
    assert row.result is not None and json.loads(row.result)["code"] == "DEADLINE_EXCEEDED"
    again = rig.serve()
    _replays(again, "call-4", input, operation_id, last)
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_joiners_with_the_works_own_deadline_wait_and_get_its_outcome(rig: Rig) -> None:
    """Joiners sending the very deadlineUnixMs of the first call are not earlier than the
    work: each waits, and the work's end at that deadline answers all of them alike
    (DEADLINE_EXCEEDED with the evidence), never "continues for its other callers". Eight
    joiners: converted to monotonic time one by one, about half came out a fraction of a
    millisecond earlier than the work's."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-joiners-same-deadline"
    deadline = time.time_ns() // 1_000_000 + 3000
    input = cli_input(LINGER, token)
    server = rig.serve()
    server.send(flow_call("call-0", operation_id, input, deadlineUnixMs=deadline))
    candidate = rig.candidate(token)
    joiners = [f"call-{n}" for n in range(1, 9)]
    server.send(*(flow_call(j, operation_id, input, deadlineUnixMs=deadline) for j in joiners))
    first = server.response("call-0")
    error = _error(first)
    assert error["data"]["code"] == "DEADLINE_EXCEEDED"
    assert error["data"]["details"]["command"]["stopReason"] == "deadline"
    assert not alive(candidate)
    for joiner in joiners:
        assert json.loads(server.response(joiner))["error"] == error, joiner
    assert server.close_input() == 0
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.outcome) == ("done", "failure")
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_an_mcp_call_joined_by_key_outlives_the_cancel_of_the_call_that_started_it(
    rig: Rig,
) -> None:
    """MCP, the same rule: two calls with one operation key; cancelling the first leaves the
    run to the second, which gets the completed evidence; nothing runs twice."""
    token, key = f"tok-{uuid.uuid4().hex}", "op-mcp-first-leaves"
    server = mcp_initialized(rig.serve(protocol="mcp"))
    server.send(tool_call(2, LINGER, token, key))
    candidate = rig.candidate(token)
    server.send(tool_call(3, LINGER, token, key))
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    # Two round trips: the cancel was read, and the loop has applied it since.
    server.ping("after-cancel")
    server.ping("after-cancel-2")
    assert alive(candidate), "cancelling one MCP waiter killed the run its joiner waits for"
    rig.signal(candidate, signal.SIGTERM)
    result = json.loads(server.response(3))["result"]
    assert result["isError"] is False
    content = result["structuredContent"]
    assert (content["stopReason"], content["exitCode"]) == ("exited", 0), content
    assert server.close_input() == 0
    # A cancelled MCP request is never answered.
    assert not [line for line in server.lines if json.loads(line).get("id") == 2]
    row = rig.row(key)
    assert row is not None and (row.state, row.outcome) == ("done", "evidence")
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1
