"""FLOW Run/1 wire rules a runtime relies on, driven through a real `jigcmd serve --protocol flow`.

A client matches answers by id: a refusal must never carry the id of a call still in flight
(MCP's `tools/call` is held to the same rule, checked here too). A Flow session applies
Run/1's id rule to every request (`ping` included) and words its refusals by Run/1's rules;
`request/cancel` is a notification; the busy refusal says whether the other operation runs
or is being answered from the journal.
"""

from __future__ import annotations

import json
import signal
import uuid
from typing import Any

import msgspec
import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "0"},
}
RUN1_ID_RULE = "id must be a string matching [A-Za-z0-9][A-Za-z0-9._:/-]* (1-128 bytes)"


def _request(request_id: object, method: str, params: object = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _result(line: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(line)["result"]["value"]
    return value


def _reusing(request_id: object, call: dict[str, Any]) -> dict[str, bytes]:
    """Frames of every kind carrying `request_id`, the id of `call`, which is in flight."""
    return {
        "the same call": msgspec.json.encode(call),
        "ping": msgspec.json.encode(_request(request_id, "ping")),
        "an unknown method": msgspec.json.encode(_request(request_id, "no/such-method")),
        "no method": msgspec.json.encode({"jsonrpc": "2.0", "id": request_id}),
        "an extra top-level member": msgspec.json.encode(call | {"extra": 1}),
        "not JSON-RPC 2.0": msgspec.json.encode(call | {"jsonrpc": "1.0"}),
        "a NaN in its params": msgspec.json.encode(_request(request_id, "ping"))[:-1]
        + b', "params": {"x": NaN}}',
    }


def _refuse_every_reuse(server: ServeChild, request_id: object, frames: dict[str, bytes]) -> None:
    """Each frame is refused `-32600` under `id: null` naming the id, nothing under the id."""
    named = msgspec.json.encode(request_id).decode()
    for kind, frame in frames.items():
        server.send_bytes(frame + b"\n")
        refused = server.answer(None)
        assert refused["error"]["code"] == -32600, kind
        assert f"id {named} is already in flight" in refused["error"]["message"], kind
        assert not server.answered(request_id), f"{kind} was answered under the original's id"


def test_every_flow_frame_reusing_an_id_in_flight_is_refused_under_null(
    rig: Rig,
) -> None:
    """Whatever its method or shape: the refusal is `id: null`; call-1's one answer is its own."""
    token = f"tok-{uuid.uuid4().hex}"
    call = flow_call("call-1", "op-duplicate-id", cli_input(LINGER, token))
    server = rig.serve(protocol="flow")
    server.send(call)
    candidate = rig.candidate(token)
    frames = _reusing("call-1", call) | {
        "request/cancel with an id": msgspec.json.encode(
            _request("call-1", "request/cancel", {"requestId": "call-1"})
        ),
    }
    _refuse_every_reuse(server, "call-1", frames)
    rig.signal(candidate, signal.SIGTERM)
    value = _result(server.response("call-1"))
    assert value["stdout"]["text"] == f"started {token}\nended {token}\n"
    # Answered, the id is free again.
    server.ping("call-1")
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_every_mcp_frame_reusing_an_id_in_flight_is_refused_under_null_too(rig: Rig) -> None:
    """The same rule on the MCP front, an unknown tool's call included: call 1 gets its result."""
    token = f"tok-{uuid.uuid4().hex}"
    arguments = {"files": {"src/cli.ts": LINGER}, "args": [token]}
    call = _request(1, "tools/call", {"name": "cli", "arguments": arguments})
    server = rig.serve(protocol="mcp")
    server.request("initialize", INIT)
    server.notify("notifications/initialized", {})
    server.send(call)
    candidate = rig.candidate(token)
    frames = _reusing(1, call) | {
        "an unknown tool": msgspec.json.encode(
            _request(1, "tools/call", {"name": "nosuch", "arguments": {}})
        ),
    }
    _refuse_every_reuse(server, 1, frames)
    rig.signal(candidate, signal.SIGTERM)
    result = server.answer(1)["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["exitCode"] == 0
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


@pytest.mark.parametrize("bad", [7, "", "-x", "a b", "a" * 129])
def test_a_flow_session_refuses_a_ping_whose_id_run1_refuses(rig: Rig, bad: object) -> None:
    """`ping` is a request like any other: an id outside Run/1's grammar is -32600."""
    server = rig.serve(protocol="flow")
    server.send(_request(bad, "ping"))
    refused = server.answer(bad)
    assert refused["error"] == {"code": -32600, "message": f"Invalid Request: {RUN1_ID_RULE}"}
    server.send(_request("ok-1", "ping"))
    assert server.answer("ok-1")["result"] == {}
    assert server.close_input() == 0


@pytest.mark.parametrize("protocol", ["flow", "auto"])
@pytest.mark.parametrize("bad", [None, True, 1.5])
def test_a_flow_call_with_an_unreadable_id_is_refused_by_the_run1_rule(
    rig: Rig, bad: object, protocol: str
) -> None:
    """Null, a boolean or a fraction: the refusal states Run/1's rule, not "or an integer";
    so does an `auto` session before any call chose its dialect: the method says which."""
    server = rig.serve(protocol=protocol)
    server.send(flow_call("x", "op-bad-id", cli_input(QUICK, "t")) | {"id": bad})
    refused = server.answer(None)
    assert refused["error"] == {"code": -32600, "message": f"Invalid Request: {RUN1_ID_RULE}"}
    assert server.close_input() == 0


def test_an_undecided_session_words_an_mcp_requests_unreadable_id_by_json_rpc(rig: Rig) -> None:
    """`initialize` with an object id, before any dialect: JSON-RPC's own id rule, MCP's."""
    server = rig.serve(protocol="auto")
    server.send(_request({"a": 1}, "initialize", INIT))
    refused = server.answer(None)
    expected = 'Invalid Request: "id" must be a string or an integer'
    assert refused["error"] == {"code": -32600, "message": expected}
    assert server.close_input() == 0


def test_a_null_deadline_is_refused_as_not_a_deadline(rig: Rig) -> None:
    """`deadlineUnixMs: null` is not "no deadline" (that is leaving it out): -32602."""
    server = rig.serve(protocol="flow")
    server.send(flow_call("call-1", "op-null-deadline", cli_input(QUICK, "t"), deadlineUnixMs=None))
    error = server.answer("call-1")["error"]
    assert error == {
        "code": -32602,
        "message": "Invalid params: /deadlineUnixMs must be a non-negative integer, not null "
        "(leave it out for no deadline of the call's own)",
    }
    assert server.close_input() == 0


def test_request_cancel_sent_with_an_id_is_refused_as_a_notification_and_cancels_nothing(
    rig: Rig,
) -> None:
    """It says how to send it; the call it names goes on and completes."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(protocol="flow")
    server.send(flow_call("call-1", "op-cancel-with-id", cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    server.send(_request("cancel-1", "request/cancel", {"requestId": "call-1"}))
    refused = server.answer("cancel-1")
    assert refused["error"]["code"] == -32600
    assert (
        "request/cancel is a notification: send it without an id" in (refused["error"]["message"])
    )
    rig.signal(candidate, signal.SIGTERM)
    assert _result(server.response("call-1"))["exitCode"] == 0
    assert server.close_input() == 0
    rig.assert_nothing_left()


def test_the_busy_refusal_says_running_while_the_other_operation_runs(rig: Rig) -> None:
    """The journal began the first operation: a call of another one is told it is running."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(protocol="flow")
    server.send(flow_call("call-1", "op-running", cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    server.send(flow_call("call-2", "op-other", cli_input(QUICK, "t")))
    error = server.answer("call-2")["error"]
    assert error["data"] == {"code": "RESOURCE_EXHAUSTED"}
    assert "operation 'op-running' is still running in this session" in error["message"]
    rig.signal(candidate, signal.SIGTERM)
    server.response("call-1")
    assert server.close_input() == 0
    rig.assert_nothing_left()


def test_the_busy_refusal_behind_a_call_being_checked_does_not_call_it_a_replay(
    rig: Rig,
) -> None:
    """A new operation not yet begun is being checked: the refusal says so (until 2026-12-07
    it read "replayed from the journal, or starting", as if it were a replay)."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(protocol="flow")
    # One write: the second call is read while the first is being checked.
    server.send(
        flow_call("call-1", "op-new", cli_input(QUICK, token)),
        flow_call("call-2", "op-other", cli_input(QUICK, "t")),
    )
    error = server.answer("call-2")["error"]
    assert error["data"] == {"code": "RESOURCE_EXHAUSTED"}
    assert error["message"].startswith(
        "operation 'op-new' is still being answered (not running: its request is being "
        "checked before it can begin, or "
    )
    server.response("call-1")
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_the_busy_refusal_does_not_call_a_replay_running(rig: Rig) -> None:
    """A restarted server answering a recorded operation from the journal runs nothing."""
    token = f"tok-{uuid.uuid4().hex}"
    input = cli_input(QUICK, token)
    first = rig.serve(protocol="flow")
    first.send(flow_call("call-1", "op-recorded", input))
    first.response("call-1")
    assert first.close_input() == 0
    again = rig.serve(protocol="flow")
    # One write: the second call is read while the first is being answered from the journal.
    again.send(
        flow_call("call-2", "op-recorded", input),
        flow_call("call-3", "op-other", cli_input(QUICK, "t")),
    )
    error = again.answer("call-3")["error"]
    assert error["data"] == {"code": "RESOURCE_EXHAUSTED"}
    assert "'op-recorded' is still being answered (not running: " in error["message"]
    assert "or its recorded outcome replayed from the journal)" in error["message"]
    assert "is still running" not in error["message"]
    again.response("call-2")
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_an_unconfigured_command_is_unavailable_and_the_configured_ones_keep_working(
    rig: Rig,
) -> None:
    """The seed: a valid name the Binding does not configure is unavailable; a malformed
    name is a bad request; `cli` still runs."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(protocol="flow")
    lint = cli_input(QUICK, token) | {"command": "lint"}
    server.send(flow_call("call-1", "op-unconfigured", lint))
    error = server.answer("call-1")["error"]
    assert error["data"] == {"code": "UNAVAILABLE"}
    assert error["message"] == (
        "command 'lint' is not configured by the admitted Binding (admitted: cli, tests)"
    )
    malformed = cli_input(QUICK, token) | {"command": "Not A Name"}
    server.send(flow_call("call-2", "op-malformed-name", malformed))
    error = server.answer("call-2")["error"]
    assert error["data"]["code"] == "INVALID_INPUT"
    assert error["data"]["details"] == {"pointer": "/command", "rule": "command"}
    server.send(flow_call("call-3", "op-configured", cli_input(QUICK, token)))
    assert _result(server.response("call-3"))["exitCode"] == 0
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


@pytest.mark.parametrize("protocol", ["auto", "flow"])
def test_a_call_sent_without_an_id_runs_nothing_and_says_so_on_stderr(
    rig: Rig, protocol: str
) -> None:
    """A notification is never answered, so the call is not run; one warning line says why."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(protocol=protocol)
    call = flow_call("x", "op-no-id", cli_input(QUICK, token))
    del call["id"]
    server.send(call)
    server.ping("after")
    assert server.close_input() == 0
    said = [line for line in server.stderr().splitlines() if "op-no-id" in line]
    assert said == [
        "jigcmd: WARNING jigcmd.server: capability/call (operationId 'op-no-id') was not run: "
        "it has no id, so it is a notification and could not be answered; send it with an id"
    ]
    assert rig.watch.runs(token) == 0
