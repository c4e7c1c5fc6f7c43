"""Cancellation races and deadlines against real runs: before start, mid-run, after completion."""

from __future__ import annotations

import json
import signal
import time
import uuid
from typing import Any

import pytest

from tests.lifetime.candidates import LINGER, QUICK, SPIN, cli_input
from tests.lifetime.frames import flow_call, mcp_initialized, tool_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import alive, wait_for

pytestmark = pytest.mark.envelope


def _cancel(request_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": request_id}}


def _error(line: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(line)["error"]
    assert error["code"] == -32000
    return error


def test_a_cancel_sent_with_the_call_stops_it_before_anything_runs(rig: Rig) -> None:
    """Call and cancel in one write: CANCELLED before dispatch, no row written, nothing ran."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    server.send(flow_call("call-1", "op-early", cli_input(LINGER, token)), _cancel("call-1"))
    error = _error(server.response("call-1"))
    assert error["data"]["code"] == "CANCELLED"
    assert "details" not in error["data"]
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.row("op-early") is None
    assert rig.watch.runs(token) == 0


def test_a_cancel_during_the_run_kills_it_and_answers_cancelled_with_evidence(rig: Rig) -> None:
    """request/cancel mid-run: CANCELLED with the collected evidence at details.command."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    server.send(flow_call("call-1", "op-mid", cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    server.send(_cancel("call-1"))
    error = _error(server.response("call-1"))
    assert not alive(candidate)
    assert error["data"]["code"] == "CANCELLED"
    evidence = error["data"]["details"]["command"]
    assert evidence["stopReason"] == "cancelled"
    assert evidence["signal"] == "SIGKILL"
    assert evidence["stdout"]["text"] == f"started {token}\n"
    assert evidence["cleanup"] == "complete"
    # The recorded failure is the operation's answer from now on, across restarts too.
    assert server.close_input() == 0
    again = rig.serve()
    again.send(flow_call("call-2", "op-mid", cli_input(LINGER, token)))
    assert _error(again.response("call-2")) == error
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_an_mcp_cancelled_call_gets_no_response_and_its_run_is_killed(rig: Rig) -> None:
    """notifications/cancelled mid-run: the tree is killed and the request is never answered."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(protocol="mcp")
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
        }
    )
    server.response(1)
    server.send(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "cli",
                "arguments": {"files": {"src/cli.ts": LINGER}, "args": [token]},
            },
        },
    )
    candidate = rig.candidate(token)
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    wait_for(lambda: not alive(candidate), 30, "the cancelled candidate to be killed")
    # EOF ends the session only after every call finished: all frames are out by then.
    assert server.close_input() == 0
    assert not [line for line in server.lines if json.loads(line).get("id") == 2]
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_cancel_after_completion_changes_nothing_and_the_result_stands(rig: Rig) -> None:
    """request/cancel for an answered call is a no-op; the operation replays the same result."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    server.send(flow_call("call-1", "op-late", cli_input(QUICK, token)))
    first = server.response("call-1")
    server.send(_cancel("call-1"), flow_call("call-2", "op-late", cli_input(QUICK, token)))
    replayed = server.response("call-2")
    assert replayed == first.replace(b'"id":"call-1"', b'"id":"call-2"')
    assert json.loads(first)["result"]["value"]["exitCode"] == 0
    assert server.close_input() == 0
    assert [json.loads(line)["id"] for line in server.lines] == ["ready-1", "call-1", "call-2"]
    row = rig.row("op-late")
    assert row is not None and row.state == "done" and row.outcome == "evidence"
    rig.assert_nothing_left()


def test_a_deadline_kills_a_spinning_candidate_and_answers_with_evidence(rig: Rig) -> None:
    """deadlineUnixMs reached: DEADLINE_EXCEEDED with the evidence, the tree killed."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    deadline = time.time_ns() // 1_000_000 + 1500
    server.send(flow_call("call-1", "op-spin", cli_input(SPIN, token), deadlineUnixMs=deadline))
    error = _error(server.response("call-1"))
    assert error["data"]["code"] == "DEADLINE_EXCEEDED"
    evidence = error["data"]["details"]["command"]
    assert evidence["stopReason"] == "deadline"
    assert evidence["signal"] == "SIGKILL"
    assert evidence["stdout"]["text"] == f"spinning {token}\n"
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_candidate_ending_by_itself_after_a_cancel_was_refused_is_recorded(rig: Rig) -> None:
    """A cancel naming another request id leaves the run alone; its own end is the answer."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    server.send(flow_call("call-1", "op-other", cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    server.send(_cancel("call-unknown"))
    rig.signal(candidate, signal.SIGTERM)
    value = json.loads(server.response("call-1"))["result"]["value"]
    assert value["stopReason"] == "exited" and value["exitCode"] == 0
    assert server.close_input() == 0
    rig.assert_nothing_left()


def test_an_mcp_call_right_after_a_cancel_is_accepted_and_runs(rig: Rig) -> None:
    """One slot: cancel a running call and send the next at once; it waits, then completes."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    server = mcp_initialized(rig.serve(max_envelopes=1))
    server.send(tool_call(2, LINGER, token))
    rig.candidate(token)
    server.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
        tool_call(3, QUICK, other),
    )
    result = json.loads(server.response(3))["result"]
    assert result["isError"] is False, result
    assert result["structuredContent"]["stdout"]["head"] == f"ran {other}\n"
    assert server.close_input() == 0
    assert not [line for line in server.lines if json.loads(line).get("id") == 2]
    rig.assert_nothing_left()


def test_an_mcp_call_sent_without_cancelling_the_previous_one_runs_beside_it(rig: Rig) -> None:
    """No cancel sent: the new call runs in a free slot while the old one still runs."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    server = mcp_initialized(rig.serve(max_envelopes=2))
    server.send(tool_call(2, LINGER, token))
    candidate = rig.candidate(token)
    server.send(tool_call(3, QUICK, other))
    result = json.loads(server.response(3))["result"]
    assert result["isError"] is False, result
    assert alive(candidate)
    rig.signal(candidate, signal.SIGTERM)
    first = json.loads(server.response(2))["result"]
    assert first["structuredContent"]["stdout"]["head"] == f"started {token}\nended {token}\n"
    assert server.close_input() == 0
    rig.assert_nothing_left()
