"""The MCP dialect through the sans-IO session: lifecycle, tools, results, progress, cancel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jigcmd.errors import Code, JigError
from jigcmd.policy.digests import operation_signature
from jigcmd.protocol import mcp_tools
from jigcmd.protocol.commands import RunResult
from jigcmd.protocol.mcp_schemas import RESULT_SCHEMA
from jigcmd.protocol.session import Action, Call, Cancel, Dispatch, ProtocolChoice, Send, Session
from tests.protocol.fake_server import REPORT, TOOLS, canned_evidence

DESCRIPTOR = Path(__file__).parents[2] / "schemas" / "project-command.capability.json"


def make_session(protocol: ProtocolChoice = "auto") -> Session:
    return Session(
        TOOLS,
        signature=operation_signature,
        protocol=protocol,
        server_name="jig",
        server_version="9",
    )


def request(request_id: object, method: str, params: object = None) -> bytes:
    message: dict[str, object] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def initialized(version: str = "2025-11-25") -> Session:
    session = make_session()
    session.receive(request(0, "initialize", {"protocolVersion": version, "capabilities": {}}))
    session.receive(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return session


def answers(actions: list[Action]) -> list[dict[str, Any]]:
    data = b"".join(a.data for a in actions if isinstance(a, Send))
    return [json.loads(line) for line in data.splitlines()]


def answer(actions: list[Action]) -> dict[str, Any]:
    (only,) = answers(actions)
    return only


def tool_call(name: str, arguments: object, request_id: object = 5, **params: object) -> bytes:
    return request(request_id, "tools/call", {"name": name, "arguments": arguments, **params})


def dispatched(actions: list[Action]) -> Call:
    (action,) = actions
    assert isinstance(action, Dispatch)
    return action.call


@pytest.mark.parametrize(
    ("offered", "agreed"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", "2025-11-25"),
    ],
)
def test_initialize_negotiates_a_supported_version(offered: str, agreed: str) -> None:
    """A supported version is echoed; anything else is answered with the latest."""
    result = answer(make_session().receive(request(1, "initialize", {"protocolVersion": offered})))
    assert result["result"]["protocolVersion"] == agreed
    assert result["result"]["capabilities"] == {
        "tools": {"listChanged": True},
        "resources": {"subscribe": False, "listChanged": False},
    }
    assert result["result"]["serverInfo"] == {"name": "jig", "version": "9"}


def test_initialize_names_the_run_the_session_belongs_to() -> None:
    """`_meta["jigcmd/runId"]` carries the run id; there is none without a run."""
    session = Session(TOOLS, signature=operation_signature, root_run="run-42")
    result = answer(session.receive(request(1, "initialize", {"protocolVersion": "2025-11-25"})))
    assert result["result"]["_meta"] == {"jigcmd/runId": "run-42"}
    plain = answer(make_session().receive(request(1, "initialize", {"protocolVersion": "x"})))
    assert "_meta" not in plain["result"]


def test_ping_works_before_initialize_and_other_requests_do_not() -> None:
    """Before initialize only ping (and initialize) are served; the rest is -32600."""
    session = make_session("mcp")
    assert answer(session.receive(request("p", "ping"))) == {
        "jsonrpc": "2.0",
        "id": "p",
        "result": {},
    }
    error = answer(session.receive(request(2, "tools/list")))
    assert error["error"]["code"] == -32600
    assert "before initialize" in error["error"]["message"]


def test_a_second_initialize_is_refused() -> None:
    """The handshake happens once per session."""
    error = answer(
        initialized().receive(request(3, "initialize", {"protocolVersion": "2025-11-25"}))
    )
    assert error["error"] == {"code": -32600, "message": "Invalid Request: already initialized"}


def test_server_discover_without_its_envelope_is_invalid_params_in_every_state() -> None:
    """server/discover is the per-request era's: without its `_meta` it is -32602, not -32601."""
    for session in (make_session(), initialized()):
        error = answer(session.receive(request("d", "server/discover", {})))
        assert error["error"]["code"] == -32602
        assert "io.modelcontextprotocol/protocolVersion" in error["error"]["message"]


def test_tools_list_has_one_tool_per_command_with_the_right_schemas() -> None:
    """Test commands take no args; every tool's outputSchema is the contract's Result."""
    tools = answer(initialized().receive(request(4, "tools/list")))["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["tests", "cli", "locked"]
    by_name = {tool["name"]: tool for tool in tools}
    assert set(by_name["tests"]["inputSchema"]["properties"]) == {"files", "stdin"}
    assert set(by_name["cli"]["inputSchema"]["properties"]) == {"files", "args", "stdin"}
    assert by_name["cli"]["inputSchema"]["required"] == ["files"]
    assert by_name["locked"]["description"] == (
        "Unavailable: the policy is not admitted; run `jigcmd lock`. Calls are refused until "
        "the operator reviews and re-admits the Binding (the tool list changes then)."
    )
    assert "bun" not in by_name["locked"]["description"]
    for tool in tools:
        assert tool["outputSchema"] == RESULT_SCHEMA


@pytest.mark.parametrize(
    ("version", "structured", "annotated"),
    [
        ("2025-11-25", True, True),
        ("2025-06-18", True, True),
        ("2025-03-26", False, True),
        ("2024-11-05", False, False),
    ],
)
def test_tools_and_results_are_shaped_for_the_negotiated_version(
    version: str, structured: bool, annotated: bool
) -> None:
    """No outputSchema/structuredContent before 2025-06-18 (JSON text then), no annotations
    before 2025-03-26."""
    session = initialized(version)
    (tool, *_) = answer(session.receive(request(2, "tools/list")))["result"]["tools"]
    assert ("outputSchema" in tool) is structured
    assert ("annotations" in tool) is annotated
    call = dispatched(session.receive(tool_call("tests", {"files": {"test/a.test.ts": "x"}})))
    result = json.loads(session.finish(call, RunResult(canned_evidence("tests"), REPORT)))["result"]
    assert ("structuredContent" in result) is structured
    evidence = (
        result["structuredContent"] if structured else json.loads(result["content"][-1]["text"])
    )
    assert evidence["command"] == "tests" and evidence["exitCode"] == 0
    assert len(result["content"]) == (1 if structured else 2)
    stopped = dispatched(session.receive(tool_call("cli", {"files": {"a.ts": "x"}}, request_id=9)))
    failure = JigError(
        Code.DEADLINE_EXCEEDED, "past its deadline", {"command": canned_evidence("cli", "deadline")}
    )
    failed = json.loads(session.finish(stopped, failure))["result"]
    assert ("structuredContent" in failed) is structured
    if not structured:
        assert json.loads(failed["content"][-1]["text"])["stopReason"] == "deadline"


def test_an_unknown_method_before_initialize_is_method_not_found() -> None:
    """As the SDK's server: -32601 for a method it does not have, in every dialect state."""
    for session in (make_session(), make_session("mcp")):
        error = answer(session.receive(request(1, "prompts/list")))
        assert error["error"]["code"] == -32601
        assert "prompts/list" in error["error"]["message"]


def test_empty_lines_and_stray_responses_are_ignored() -> None:
    """A blank line or a response from the client gets no answer; the session goes on."""
    session = initialized()
    assert session.receive(b"") == []
    assert session.receive(b" \r") == []
    assert session.receive(b'{"jsonrpc":"2.0","id":7,"result":{}}') == []
    assert session.receive(b'{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}') == []
    assert answer(session.receive(request("p", "ping")))["result"] == {}


def test_each_tool_names_its_command_files_bounds_and_evidence_for_a_first_try() -> None:
    """Title and description say what runs and what `files` must hold; every input is described."""
    tools = answer(initialized().receive(request(2, "tools/list")))["result"]["tools"]
    by_name = {tool["name"]: tool for tool in tools}
    tests, cli = by_name["tests"], by_name["cli"]
    assert tests["title"] == "bun test test/a.test.ts (reviewed command 'tests')"
    assert cli["title"] == "bun a.ts ARGS… (reviewed command 'cli')"
    assert "Runs `bun test test/a.test.ts`" in tests["description"]
    assert "`files` must include `test/a.test.ts`" in tests["description"]
    for words in ("1-64 relative paths", "256 KiB", "16 KiB", "10 s", "exitCode", "isError false"):
        assert words in tests["description"], words
    assert "at most 32 arguments" in cli["description"]
    assert "No arguments." in tests["description"]
    # Bun's posture, which a model otherwise meets as an unexplained failure (a preload's
    # global undefined).
    assert "no bunfig.toml and no .env (a [test] preload is not loaded" in tests["description"]
    for tool in tools:
        properties = tool["inputSchema"]["properties"]
        assert all(prop.get("description") for prop in properties.values()), tool["name"]
    assert "needs `a.ts`" in cli["inputSchema"]["properties"]["files"]["description"]
    old = answer(initialized("2025-03-26").receive(request(2, "tools/list")))["result"]["tools"]
    assert all("title" not in tool for tool in old)
    # That revision's `ToolAnnotations` has a `title`: the same words go there.
    titles = {tool["name"]: tool["annotations"]["title"] for tool in old}
    assert titles == {tool["name"]: tool["title"] for tool in tools}
    oldest = answer(initialized("2024-11-05").receive(request(2, "tools/list")))["result"]
    assert all("title" not in tool and "annotations" not in tool for tool in oldest["tools"])


def test_an_unknown_tool_is_invalid_params() -> None:
    """Calling a tool that does not exist is a protocol error, -32602."""
    error = answer(initialized().receive(tool_call("nope", {})))
    assert error["error"] == {"code": -32602, "message": "Invalid params: unknown tool 'nope'"}


def test_a_completed_run_is_not_an_error_and_carries_evidence_and_report() -> None:
    """Whatever the exit, a completed run is isError false with the evidence and `_meta` report."""
    session = initialized()
    call = dispatched(session.receive(tool_call("tests", {"files": {"test/a.test.ts": "x"}})))
    assert call.input == {"command": "tests", "files": {"test/a.test.ts": "x"}}
    result = json.loads(session.finish(call, RunResult(canned_evidence("tests"), REPORT)))["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["command"] == "tests"
    # One concise text; the complete evidence is the structured content only.
    (text,) = result["content"]
    assert text["text"].startswith("`bun test test/a.test.ts` exited with code 0")
    assert result["_meta"]["jigcmd/report"]["wallMs"] == 12.5


def test_a_failure_with_evidence_is_an_error_result_with_structured_content() -> None:
    """Deadline or cancellation: isError true, a readable text, the evidence, the code in _meta."""
    session = initialized()
    call = dispatched(session.receive(tool_call("cli", {"files": {"a.ts": "x"}})))
    failure = JigError(
        Code.DEADLINE_EXCEEDED,
        "the command ran past its deadline",
        {"command": canned_evidence("cli", "deadline")},
    )
    result = json.loads(session.finish(call, failure))["result"]
    assert result["isError"] is True
    (first,) = result["content"]
    assert first["text"].startswith(
        "DEADLINE_EXCEEDED: the command ran past its deadline\n"
        "`bun a.ts` was killed by SIGKILL (stop reason: deadline"
    )
    assert result["structuredContent"]["stopReason"] == "deadline"
    assert result["_meta"] == {"jigcmd/error": {"code": "DEADLINE_EXCEEDED"}}


@pytest.mark.parametrize(
    ("name", "arguments", "text"),
    [
        (
            "locked",
            {"files": {"a.ts": "x"}},
            "UNAVAILABLE: command 'locked': the policy is not admitted",
        ),
        (
            "cli",
            {"files": {"a.ts": "x"}, "command": "tests"},
            "INVALID_INPUT: /command: not an argument",
        ),
    ],
)
def test_refusals_are_error_results_without_dispatch(
    name: str, arguments: dict[str, object], text: str
) -> None:
    """Unavailable commands and a smuggled `command` are refused as tool errors."""
    result = answer(initialized().receive(tool_call(name, arguments)))["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(text)
    assert "structuredContent" not in result


@pytest.mark.parametrize(
    ("name", "extra", "text"),
    [
        ("tests", {"bogus": 1}, "/bogus: unknown argument (tool 'tests' takes files, stdin)"),
        ("cli", {"bogus": 1}, "/bogus: unknown argument (tool 'cli' takes files, args, stdin)"),
        (
            "tests",
            {"command": "cli"},
            "/command: not an argument; the tool name selects the command "
            "(tool 'tests' takes files, stdin)",
        ),
        (
            "tests",
            {"args": []},
            "/args: not an argument of a test command, which runs its reviewed test files as "
            "they are (tool 'tests' takes files, stdin)",
        ),
        ("cli", {"a/b": 1}, "/a~1b: unknown argument (tool 'cli' takes files, args, stdin)"),
    ],
    ids=["test-tool", "run-tool", "command", "empty-args-on-a-test-tool", "escaped"],
)
def test_an_argument_the_tool_does_not_take_is_refused_naming_the_tools_own(
    name: str, extra: dict[str, object], text: str
) -> None:
    """What the inputSchema allows and nothing else; `args: []` on a test tool included."""
    arguments = {"files": {"a.ts": "x"}, **extra}
    result = answer(initialized().receive(tool_call(name, arguments)))["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == f"INVALID_INPUT: {text}"
    pointer = text.split(":", 1)[0]
    assert result["_meta"]["jigcmd/error"]["details"] == {"pointer": pointer, "rule": "input-keys"}


def test_the_arguments_a_tool_takes_are_its_input_schemas_properties() -> None:
    """One list: what `tools/list` says a tool takes is what its calls may send."""
    for tool in TOOLS:
        schema = mcp_tools.input_schema(tool.kind, tool.paths)
        assert tuple(schema["properties"]) == mcp_tools.tool_arguments(tool.kind)
        assert schema["additionalProperties"] is False


def test_concurrent_tool_calls_are_all_dispatched_side_by_side() -> None:
    """MCP hosts call tools in parallel: each valid call is dispatched, none is refused busy."""
    session = initialized()
    calls = [
        dispatched(session.receive(tool_call("cli", {"files": {"a.ts": "x"}}, request_id=n)))
        for n in (5, 6, 7)
    ]
    assert len({c.operation_id for c in calls}) == 3
    # Each answers under its own id, in whatever order they end.
    for call in reversed(calls):
        (done,) = answers([Send(session.finish(call, RunResult(canned_evidence("cli"), REPORT)))])
        assert done["id"] == call.request_id and done["result"]["isError"] is False


def test_a_refused_tool_call_is_answered_without_dispatch_beside_a_running_one() -> None:
    """A refusal never waits for, nor names, the call that is running."""
    session = initialized()
    dispatched(session.receive(tool_call("cli", {"files": {"a.ts": "x"}})))
    result = answer(session.receive(tool_call("locked", {"files": {"a.ts": "x"}}, request_id=6)))
    assert result["result"]["isError"] is True
    assert result["result"]["_meta"]["jigcmd/error"]["code"] == "UNAVAILABLE"


def test_cancelling_one_of_several_calls_cancels_only_that_one() -> None:
    """notifications/cancelled names one request; the others go on."""
    session = initialized()
    for n in (5, 6):
        dispatched(session.receive(tool_call("cli", {"files": {"a.ts": "x"}}, request_id=n)))
    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}'
    assert session.receive(cancel) == [Cancel(6)]


def test_progress_notifications_follow_the_token_and_increase() -> None:
    """With a progressToken, progress lines become notifications/progress with rising counts."""
    session = initialized()
    with_token = dispatched(
        session.receive(tool_call("cli", {"files": {}}, _meta={"progressToken": "tok"}))
    )
    first = json.loads(session.progress(with_token, "setting up"))
    second = json.loads(session.progress(with_token, "running"))
    assert first["method"] == "notifications/progress"
    assert first["params"] == {"progressToken": "tok", "progress": 1, "message": "setting up"}
    assert second["params"]["progress"] == 2
    session.finish(with_token, RunResult(canned_evidence("cli"), REPORT))
    without = dispatched(session.receive(tool_call("cli", {"files": {}}, request_id=9)))
    assert session.progress(without, "running") == b""


def test_notifications_cancelled_stops_the_run_and_suppresses_its_response() -> None:
    """After notifications/cancelled the run is stopped and no response is sent for it."""
    session = initialized()
    call = dispatched(session.receive(tool_call("cli", {"files": {}})))
    cancelled = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}'
    assert session.receive(cancelled) == [Cancel(5)]
    assert session.finish(call, JigError(Code.CANCELLED, "cancelled")) == b""
    assert session.receive(cancelled) == []


def test_an_mcp_session_does_not_speak_run1() -> None:
    """After initialize, capability/call is not found."""
    error = answer(initialized().receive(request("c", "capability/call", {})))
    assert error["error"]["code"] == -32601


def test_input_schema_helper_matches_the_command_kind() -> None:
    """`args` appears for run commands only."""
    assert "args" in mcp_tools.input_schema("run")["properties"]
    assert "args" not in mcp_tools.input_schema("test")["properties"]
