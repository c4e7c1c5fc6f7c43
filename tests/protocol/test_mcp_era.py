"""Both MCP eras on one sans-IO session, frame by frame: every rule of the per-request era.

Each test is a transcript: the frames a client sends and the answers, as parsed JSON.
"""

from __future__ import annotations

import json
from typing import Any

from jigcmd.errors import MESSAGE_MAX_CHARS, Code, JigError
from jigcmd.policy.digests import operation_signature
from jigcmd.protocol import mcp_era
from jigcmd.protocol.commands import Recorded, RunResult
from jigcmd.protocol.session import (
    Action,
    Call,
    Cancel,
    Dispatch,
    Fetch,
    Lookup,
    Send,
    Session,
)
from tests.protocol.fake_server import REPORT, TOOLS, canned_evidence

MODERN = "2026-07-28"
SERVER_INFO = {"name": "jig", "version": "9"}
# When the journal's row of a task's operation says it was created (2026-12-07 05:11:14.715Z).
CREATED_MS = 1_796_620_274_715
TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def make_session(root_run: str = "run-1") -> Session:
    return Session(
        TOOLS,
        signature=operation_signature,
        server_name="jig",
        server_version="9",
        session_tag="t",
        root_run=root_run,
    )


def envelope(
    capabilities: object = None, version: object = MODERN, **extra: object
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {} if capabilities is None else capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "transcript", "version": "1"},
    }
    meta.update(extra)
    return {key: value for key, value in meta.items() if value is not None}


def frame(request_id: object, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, object] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def modern(
    request_id: object, method: str, params: dict[str, Any] | None = None, **meta: Any
) -> bytes:
    return frame(request_id, method, {**(params or {}), "_meta": envelope(**meta)})


def answers(actions: list[Action]) -> list[dict[str, Any]]:
    data = b"".join(a.data for a in actions if isinstance(a, Send))
    return [json.loads(line) for line in data.splitlines()]


def answer(actions: list[Action]) -> dict[str, Any]:
    (only,) = answers(actions)
    return only


def dispatched(actions: list[Action]) -> Call:
    (action,) = actions
    assert isinstance(action, Dispatch), action
    return action.call


def call_args() -> dict[str, Any]:
    return {"name": "tests", "arguments": {"files": {"test/a.test.ts": "x"}}}


def completed() -> RunResult:
    return RunResult(evidence=canned_evidence("tests"), report=REPORT)


def initialize() -> bytes:
    return frame(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})


def test_discover_is_answered_before_and_after_initialize_without_choosing_the_era() -> None:
    """discover → initialize → call (Claude Code's sequence) works; discover again after."""
    session = make_session()
    found = answer(session.receive(modern(1, "server/discover")))["result"]
    assert found["supportedVersions"] == [MODERN]
    assert found["resultType"] == "complete"
    assert found["_meta"]["io.modelcontextprotocol/serverInfo"] == SERVER_INFO
    assert found["capabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}
    assert found["capabilities"]["tools"] == {"listChanged": False}
    assert (found["cacheScope"], type(found["ttlMs"])) == ("private", int)
    init = answer(session.receive(initialize()))["result"]
    assert init["protocolVersion"] == "2025-11-25"
    assert "resultType" not in init
    listed = answer(session.receive(frame(2, "tools/list")))["result"]
    assert "resultType" not in listed and "ttlMs" not in listed
    call = dispatched(session.receive(frame(3, "tools/call", call_args())))
    result = answer([Send(session.finish(call, completed()))])["result"]
    assert "resultType" not in result and "jigcmd/report" in result["_meta"]
    again = answer(session.receive(modern(4, "server/discover")))["result"]
    assert again == found


def test_a_per_request_call_before_initialize_selects_the_era_and_initialize_is_then_32022() -> (
    None
):
    """Once modern, `initialize` is -32022 with {supported, requested}."""
    session = make_session()
    listed = answer(session.receive(modern(1, "tools/list")))["result"]
    assert [tool["name"] for tool in listed["tools"]] == ["tests", "cli", "locked"]
    assert (listed["resultType"], listed["cacheScope"]) == ("complete", "private")
    assert listed["ttlMs"] > 0
    assert listed["_meta"]["io.modelcontextprotocol/serverInfo"] == SERVER_INFO
    error = answer(session.receive(initialize()))["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [MODERN], "requested": "2025-11-25"}


def test_the_tool_list_keeps_one_order_on_every_request() -> None:
    session = make_session()
    first = answer(session.receive(modern(1, "tools/list")))["result"]
    second = answer(session.receive(modern(2, "tools/list")))["result"]
    assert first == second


def test_version_and_capabilities_are_checked_on_every_request_never_inferred() -> None:
    """Missing → -32602; unsupported → -32022; a good request before changes nothing."""
    session = make_session()
    answer(session.receive(modern(1, "tools/list")))
    missing_version = frame(2, "tools/list", {"_meta": envelope(version=None)})
    error = answer(session.receive(missing_version))["error"]
    assert error["code"] == -32602 and "protocolVersion" in error["message"]
    no_caps = {"io.modelcontextprotocol/protocolVersion": MODERN}
    error = answer(session.receive(frame(3, "tools/list", {"_meta": no_caps})))["error"]
    assert error["code"] == -32602 and "clientCapabilities" in error["message"]
    error = answer(session.receive(modern(4, "tools/list", version="2099-01-01")))["error"]
    assert error == {
        "code": -32022,
        "message": error["message"],
        "data": {"supported": [MODERN], "requested": "2099-01-01"},
    }
    # A handshake version inside the envelope is not served per request either.
    error = answer(session.receive(modern(5, "tools/list", version="2025-11-25")))["error"]
    assert error["code"] == -32022
    # Without any envelope, a modern process does not guess one from earlier requests.
    error = answer(session.receive(frame(6, "tools/list")))["error"]
    assert error["code"] == -32602
    error = answer(session.receive(modern(7, "tools/list", capabilities=[])))["error"]
    assert error["code"] == -32602


def test_ping_and_logging_set_level_exist_only_in_the_handshake_era() -> None:
    session = make_session()
    assert answer(session.receive(frame(1, "ping")))["result"] == {}
    for method in ("ping", "logging/setLevel", "initialize"):
        error = answer(session.receive(modern(2, method)))["error"]
        assert error["code"] == -32601, method
    answer(session.receive(modern(3, "tools/list")))
    assert answer(session.receive(frame(4, "ping")))["error"]["code"] == -32601


def test_a_modern_tool_call_is_stamped_and_keeps_its_trace_context() -> None:
    """resultType, serverInfo, dev.jigcmd/ keys; traceparent/tracestate handed back."""
    session = make_session()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    params = call_args()
    params["_meta"] = envelope(traceparent=parent, tracestate="vendor=1")
    call = dispatched(session.receive(frame(1, "tools/call", params)))
    assert call.signature is not None and call.root_run == "run-1"
    assert call.operation_id.startswith("mcp.t.")
    result = answer([Send(session.finish(call, completed()))])["result"]
    assert result["resultType"] == "complete"
    meta = result["_meta"]
    assert meta["io.modelcontextprotocol/serverInfo"] == SERVER_INFO
    assert "dev.jigcmd/report" in meta and "jigcmd/report" not in meta
    assert (meta["traceparent"], meta["tracestate"]) == (parent, "vendor=1")
    assert result["structuredContent"]["exitCode"] == 0
    refused = dispatched(session.receive(modern(2, "tools/call", call_args())))
    failed = answer([Send(session.finish(refused, JigError(Code.INVALID_INPUT, "no")))])
    assert failed["result"]["isError"] is True
    assert failed["result"]["_meta"]["dev.jigcmd/error"]["code"] == "INVALID_INPUT"


def test_an_invalid_traceparent_is_dropped_not_refused() -> None:
    session = make_session()
    params = call_args()
    params["_meta"] = envelope(traceparent="00-zz-yy-01")
    call = dispatched(session.receive(frame(1, "tools/call", params)))
    result = answer([Send(session.finish(call, completed()))])["result"]
    assert "traceparent" not in result["_meta"]


def test_each_call_has_its_own_identity_and_an_explicit_key_is_kept() -> None:
    session = make_session()
    first = dispatched(session.receive(modern(1, "tools/call", call_args())))
    second = dispatched(session.receive(modern(2, "tools/call", call_args())))
    assert first.operation_id != second.operation_id
    assert first.signature == second.signature
    keyed = call_args() | {"_meta": envelope(**{"dev.jigcmd/operationId": "wf-7/act-3"})}
    call = dispatched(session.receive(frame(3, "tools/call", keyed)))
    assert call.operation_id == "wf-7/act-3" and call.task_id is None
    bad = call_args() | {"_meta": {"dev.jigcmd/operationId": " spaced "}}
    legacy = make_session()
    legacy.receive(initialize())
    error = answer(legacy.receive(frame(4, "tools/call", bad)))["error"]
    assert error["code"] == -32602 and "dev.jigcmd/operationId" in error["message"]


def test_no_notifications_and_no_server_requests_are_sent_unasked() -> None:
    """Only progress, and only for a request that gave a progress token."""
    session = make_session()
    call = dispatched(session.receive(modern(1, "tools/call", call_args())))
    assert session.progress(call, "running") == b""
    frames = session.finish(call, completed()).splitlines()
    assert [json.loads(line)["id"] for line in frames] == [1]


def test_tasks_are_created_only_once_the_journal_holds_them() -> None:
    session = make_session()
    call = dispatched(session.receive(modern(1, "tools/call", call_args(), capabilities=TASKS)))
    assert call.task_id is not None and call.operation_id == call.task_id
    assert len(call.task_id) == len("task-") + 32
    # Nothing is answered until the row is written.
    created = answer([Send(session.owned(call, CREATED_MS))])
    assert created["id"] == 1
    task = created["result"]
    assert (task["resultType"], task["status"], task["taskId"]) == ("task", "working", call.task_id)
    assert task["ttlMs"] is None and task["pollIntervalMs"] > 0
    # The row's instant, which a restarted server reads back: createdAt never moves.
    assert task["createdAt"] == task["lastUpdatedAt"] == "2026-12-07T05:11:14.715Z"
    assert session.owned(call, CREATED_MS) == b""
    get = modern(2, "tasks/get", {"taskId": call.task_id}, capabilities=TASKS)
    working = answer(session.receive(get))["result"]
    assert (working["resultType"], working["status"]) == ("complete", "working")
    # The call's request id may be reused once its task was announced.
    other = dispatched(session.receive(modern(1, "tools/call", call_args())))
    assert session.finish(call, completed()) == b""
    done = answer(session.receive(get))["result"]
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["exitCode"] == 0
    assert done["result"]["resultType"] == "complete"
    assert answer([Send(session.finish(other, completed()))])["id"] == 1


def test_a_task_call_refused_before_the_journal_is_answered_directly() -> None:
    session = make_session()
    call = dispatched(session.receive(modern(1, "tools/call", call_args(), capabilities=TASKS)))
    refused = answer([Send(session.finish(call, JigError(Code.INVALID_INPUT, "bad")))])
    assert refused["result"]["isError"] is True and refused["result"]["resultType"] == "complete"
    get = modern(2, "tasks/get", {"taskId": call.task_id}, capabilities=TASKS)
    assert isinstance(session.receive(get)[0], Lookup)


def test_task_methods_need_the_extension_in_that_very_request() -> None:
    session = make_session()
    call = dispatched(session.receive(modern(1, "tools/call", call_args(), capabilities=TASKS)))
    session.owned(call, CREATED_MS)
    error = answer(session.receive(modern(2, "tasks/get", {"taskId": call.task_id})))["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": TASKS}
    # Without the extension a call is never a task.
    plain = dispatched(session.receive(modern(3, "tools/call", call_args())))
    assert plain.task_id is None


def test_tasks_cancel_stops_the_task_and_acknowledges() -> None:
    session = make_session()
    call = dispatched(session.receive(modern(1, "tools/call", call_args(), capabilities=TASKS)))
    session.owned(call, CREATED_MS)
    actions = session.receive(
        modern(2, "tasks/cancel", {"taskId": call.task_id}, capabilities=TASKS)
    )
    assert Cancel(2, call.task_id) in actions
    assert answer(actions)["result"]["resultType"] == "complete"
    session.finish(call, JigError(Code.CANCELLED, "cancelled"))
    get = modern(3, "tasks/get", {"taskId": call.task_id}, capabilities=TASKS)
    assert answer(session.receive(get))["result"]["status"] == "cancelled"


def test_an_unknown_task_is_looked_up_in_the_callers_run_and_answered_from_the_record() -> None:
    """A task of a server that died: the recorded result, or UNCERTAIN, never a new run."""
    session = make_session()
    task_id = "task-" + "ab" * 16
    (lookup,) = session.receive(modern(1, "tasks/get", {"taskId": task_id}, capabilities=TASKS))
    assert lookup == Lookup(1, "tasks/get", task_id, "run-1")
    done = answer([Send(session.recorded(lookup, Recorded(False, 1000, 2000, completed())))])
    assert done["result"]["status"] == "completed"
    assert done["result"]["createdAt"] == "1970-01-01T00:00:01.000Z"
    uncertain = JigError(Code.UNCERTAIN, "a prior command dispatch was fenced")
    ended = answer([Send(session.recorded(lookup, Recorded(False, 1000, 2000, uncertain)))])
    assert ended["result"]["status"] == "completed"
    assert ended["result"]["result"]["isError"] is True
    assert ended["result"]["statusMessage"].startswith("UNCERTAIN")
    running = answer([Send(session.recorded(lookup, Recorded(True, 1000, 1500)))])
    assert running["result"]["status"] == "working"
    missing = answer([Send(session.recorded(lookup, None))])
    assert missing["error"]["code"] == -32602
    # Not a task id this server hands out: not found without reading anything.
    error = answer(session.receive(modern(2, "tasks/get", {"taskId": "x"}, capabilities=TASKS)))
    assert error["error"]["code"] == -32602


def test_error_codes_stay_within_what_the_revision_allows() -> None:
    """Every error this session answers is JSON-RPC's or the revision's (-32021, -32022)."""
    allowed = {-32700, -32600, -32601, -32602, -32603, -32021, -32022}
    session = make_session()
    frames = [
        b"{",
        modern(1, "nope"),
        modern(2, "tools/call", {"name": "nope"}),
        modern(3, "tools/call", {"name": 5}),
        modern(4, "tasks/get", {}, capabilities=TASKS),
        modern(5, "tasks/update", {"taskId": "task-" + "0" * 32}, capabilities=TASKS),
        modern(6, "tools/list", version=7),
        # 2026-07-28 has no -32002: an unknown resource is -32602 there (handshake era: -32002).
        modern(9, "resources/read", {"uri": "jigcmd://no/such/resource"}),
        modern(10, "resources/list"),
        modern(11, "prompts/list"),
        initialize(),
        frame(8, "tools/list"),
    ]
    replies = []
    for sent in frames:
        actions = session.receive(sent)
        # A read is answered once the shell has looked: here, it finds nothing.
        fetches = [a for a in actions if isinstance(a, Fetch)]
        actions += [Send(session.fetched(a.request_id, "no such run")) for a in fetches]
        # A task-shaped id is looked up in the journal: here, it is not there.
        lookups = [a for a in actions if isinstance(a, Lookup)]
        actions += [Send(session.recorded(a, None)) for a in lookups]
        replies += [(sent, reply) for reply in answers(actions)]
    assert {reply["id"] for _sent, reply in replies} >= {1, 2, 3, 4, 5, 6, 9, 10, 11, 0, 8}
    for sent, reply in replies:
        if "error" in reply:
            assert reply["error"]["code"] in allowed, (sent, reply)


def test_a_missing_resource_is_32602_per_request_and_32002_in_the_handshake_era() -> None:
    """SEP-2164 took -32002 out of 2026-07-28; a handshake client still gets it."""
    session = make_session()
    (read,) = session.receive(modern(1, "resources/read", {"uri": "jigcmd://run/x/y/stdout"}))
    assert isinstance(read, Fetch)
    error = answer([Send(session.fetched(read.request_id, "no such run"))])["error"]
    assert (error["code"], error["message"]) == (-32602, "Resource not found: no such run")
    handshake = make_session()
    handshake.receive(initialize())
    (read,) = handshake.receive(frame(2, "resources/read", {"uri": "jigcmd://run/x/y/stdout"}))
    assert isinstance(read, Fetch)
    assert answer([Send(handshake.fetched(read.request_id, "gone"))])["error"]["code"] == -32002


def test_a_task_call_cancelled_before_its_creation_is_never_answered() -> None:
    session = make_session()
    call = dispatched(session.receive(modern(1, "tools/call", call_args(), capabilities=TASKS)))
    cancelled = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'
    assert session.receive(cancelled) == [Cancel(1, call.task_id)]
    assert session.owned(call, CREATED_MS) == b""
    assert session.finish(call, JigError(Code.CANCELLED, "cancelled")) == b""


def test_a_list_request_with_a_cursor_is_32602_as_no_list_is_ever_paginated() -> None:
    """No `nextCursor` is ever sent, so any cursor is invalid; none, or null, is answered."""
    modern_session = make_session()
    handshake_session = make_session()
    handshake_session.receive(initialize())
    for method in ("tools/list", "resources/list", "resources/templates/list"):
        for cursor in ("abc", "", 5):
            sent = modern(1, method, {"cursor": cursor})
            error = answer(modern_session.receive(sent))["error"]
            assert error["code"] == -32602 and "/cursor" in error["message"], method
            plain = frame(2, method, {"cursor": cursor})
            assert answer(handshake_session.receive(plain))["error"]["code"] == -32602
        assert "result" in answer(modern_session.receive(modern(3, method, {"cursor": None})))
        assert "result" in answer(handshake_session.receive(frame(4, method)))


def test_an_unsupported_version_of_megabytes_is_echoed_bounded() -> None:
    """-32022 names the version requested, cut as every error message is."""
    refusal = mcp_era.unsupported_version("v" * (1 << 20))
    error = json.loads(refusal.frame(1))["error"]
    assert len(error["data"]["requested"]) == MESSAGE_MAX_CHARS
    assert len(error["message"]) == MESSAGE_MAX_CHARS
