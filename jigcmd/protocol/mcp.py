"""The MCP dialect: the lifecycle of one session (handshake, version, tools, calls in flight).

`initialize` happens once and fixes the version the tool list and results are shaped for;
before it only `ping` is served. MCP hosts call tools in parallel: every valid `tools/call`
is dispatched at once (the backend runs them side by side up to the free envelope slots and
queues the rest); a refused one is answered without dispatch. `notifications/cancelled`
stops a call and suppresses its response, as the specification asks.
"""

from __future__ import annotations

import base64
from typing import Any, Final

import msgspec

from jigcmd.errors import Code, JigError
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.actions import Action, Call, Cancel, Fetch, Outcome, Send, send_error
from jigcmd.protocol.commands import ToolInfo
from jigcmd.protocol.dialect import Resource, Settings
from jigcmd.protocol.mcp_results import completed_result, failure_result
from jigcmd.protocol.mcp_tools import tools_list_json
from jigcmd.protocol.mcp_versions import LATEST_VERSION, negotiate_version

__all__ = [
    "RUN_ID_META",
    "SESSION_METHODS",
    "McpDialect",
    "ToolCall",
    "ToolCallParamsError",
    "call_input",
    "initialize_result",
    "parse_cancelled",
    "parse_tool_call",
    "progress_notification",
    "read_result",
]

# The methods an initialized MCP session serves (besides ping); before `initialize` they are
# -32600, any other method -32601.
SESSION_METHODS: Final = frozenset(
    {"tools/list", "tools/call", "resources/read", "resources/list", "resources/templates/list"}
)
# MCP's "resource not found" error code.
RESOURCE_NOT_FOUND: Final = -32002
# The `initialize` result's `_meta` key naming the caller's run of the session.
RUN_ID_META: Final = "jigcmd/runId"


class ToolCallParamsError(ValueError):
    """Raised when MCP request params are malformed; answered with -32602."""


class ToolCall(msgspec.Struct, frozen=True):
    """One well-formed `tools/call`."""

    name: str
    arguments: dict[str, Any]
    progress_token: jsonrpc.Id | None


def initialize_result(
    version: str, server_name: str, server_version: str, *, root_run: str = ""
) -> dict[str, Any]:
    """The `initialize` result: tools (the list changes when the lock is re-admitted) and
    resources (each run's streams and report, linked from its result, read by URI).

    `_meta["jigcmd/runId"]` names the caller's run the session belongs to, when it has one.
    """
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": True},
            "resources": {"subscribe": False, "listChanged": False},
        },
        "serverInfo": {"name": server_name, "version": server_version},
        "instructions": "Each tool runs one operator-reviewed Bun command against the files you "
        "supply, inside a containment envelope, and returns host-collected evidence "
        "(output, exit code or signal, stop reason). A non-zero exit is evidence, not an error.",
    }
    if root_run:
        result["_meta"] = {RUN_ID_META: root_run}
    return result


def parse_tool_call(params: object) -> ToolCall:
    """Check `tools/call` params; raise `ToolCallParamsError` if malformed."""
    if type(params) is not dict:
        raise ToolCallParamsError("Invalid params: tools/call params must be an object")
    name = params.get("name")
    if type(name) is not str:
        raise ToolCallParamsError("Invalid params: /name must be a string")
    arguments = params.get("arguments", {})
    if type(arguments) is not dict:
        raise ToolCallParamsError("Invalid params: /arguments must be an object")
    token: jsonrpc.Id | None = None
    meta = params.get("_meta")
    if type(meta) is dict and jsonrpc.is_mcp_id(meta.get("progressToken")):
        token = meta["progressToken"]
    return ToolCall(name, arguments, token)


def call_input(call: ToolCall) -> dict[str, Any]:
    """The capability `run` input for a tool call: the tool name selects the command."""
    if "command" in call.arguments:
        raise JigError(
            Code.INVALID_INPUT,
            "/command: not an argument; the tool name selects the command",
            {"pointer": "/command", "rule": "input members"},
        )
    return {"command": call.name, **call.arguments}


def parse_cancelled(params: object) -> jsonrpc.Id | None:
    """The request id a `notifications/cancelled` names, or None when malformed."""
    if type(params) is dict and jsonrpc.is_mcp_id(params.get("requestId")):
        return params["requestId"]  # type: ignore[no-any-return]
    return None


def progress_notification(
    token: jsonrpc.Id, progress: int, message: str, total: int | None = None
) -> bytes:
    """A `notifications/progress` frame; `progress` increases with every notification."""
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = max(total, progress)
    params["message"] = message
    return jsonrpc.encode_notification("notifications/progress", params)


def read_result(resource: Resource) -> dict[str, Any]:
    """A `resources/read` result: text when the bytes are UTF-8, else a base64 blob."""
    content: dict[str, Any] = {"uri": resource.uri, "mimeType": resource.mime_type}
    try:
        content["text"] = resource.data.decode("utf-8")
    except UnicodeDecodeError:
        content["blob"] = base64.b64encode(resource.data).decode("ascii")
    return {"contents": [content]}


class McpDialect:
    """The MCP state of one session: the handshake, the agreed version, the calls in flight."""

    def __init__(self, settings: Settings) -> None:
        """Start uninitialized, with the tool list shaped for the latest version."""
        self._tools = {tool.name: tool for tool in settings.tools}
        self._tool_infos = settings.tools
        self._version = LATEST_VERSION
        self._budget = settings.result_budget
        self._tools_json = tools_list_json(settings.tools, self._version, self._budget)
        self._server_name = settings.server_name
        self._server_version = settings.server_version
        self._tag = settings.session_tag
        self._root_run = settings.root_run
        self._initialized = False
        self._calls = 0
        # Request ids awaiting an answer -> their call's operation id.
        self._pending: dict[jsonrpc.Id, str] = {}
        self._silenced: set[jsonrpc.Id] = set()
        self._progress: dict[jsonrpc.Id, int] = {}

    def request(self, request: jsonrpc.Request) -> list[Action] | Call:
        """Serve the handshake, the tool list and tool calls; anything else is -32601."""
        method = request.method
        if method == "initialize":
            return self._initialize(request)
        if not self._initialized:
            return self._before_initialize(request)
        if method == "tools/list":
            return [Send(jsonrpc.encode_raw_result(request.id, self._tools_json))]
        if method == "tools/call":
            return self._tool_call(request)
        if method == "resources/read":
            return self._resource_read(request)
        if method == "resources/list":
            # Run resources are linked from each result, not listed.
            return [Send(jsonrpc.encode_result(request.id, {"resources": []}))]
        if method == "resources/templates/list":
            return [Send(jsonrpc.encode_result(request.id, {"resourceTemplates": []}))]
        return send_error(request.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")

    def started(self, call: Call) -> None:
        """The call is running: it is answered (or silenced) when it finishes."""
        self._pending[call.request_id] = call.operation_id

    def refuse(self, request_id: jsonrpc.Id, error: JigError) -> bytes:
        """A refusal is a tool error result, not a protocol error."""
        return jsonrpc.encode_result(request_id, failure_result(error, self._version, self._budget))

    def notification(self, notification: jsonrpc.Notification) -> list[Action]:
        """`notifications/cancelled` stops a call in flight; anything else needs nothing."""
        if notification.method == "notifications/cancelled":
            request_id = parse_cancelled(notification.params)
            if request_id is not None and request_id in self._pending:
                self._silenced.add(request_id)
                return [Cancel(request_id)]
        # notifications/initialized and anything unknown: nothing to do, never answered.
        return []

    def finish(self, call: Call, outcome: Outcome) -> bytes:
        """The call's tool result, or nothing when the peer cancelled it."""
        self._progress.pop(call.request_id, None)
        self._pending.pop(call.request_id, None)
        if call.request_id in self._silenced:
            # The peer cancelled the request and expects no response to it.
            self._silenced.discard(call.request_id)
            return b""
        if isinstance(outcome, JigError):
            return self.refuse(call.request_id, outcome)
        return jsonrpc.encode_result(
            call.request_id, completed_result(outcome, self._version, self._budget)
        )

    def progress(
        self, call: Call, message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> bytes:
        """A `notifications/progress` frame when the caller sent a progress token.

        `progress` is the elapsed milliseconds when known (else a count), always increasing.
        """
        if call.progress_token is None or call.request_id not in self._pending:
            return b""
        last = self._progress.get(call.request_id, 0)
        value = max(last + 1, elapsed_ms if elapsed_ms is not None else 0)
        self._progress[call.request_id] = value
        return progress_notification(call.progress_token, value, message, total_ms)

    def fetched(self, request_id: jsonrpc.Id, found: Resource | str) -> bytes:
        """The `resources/read` answer: its contents, or -32002 with the reason."""
        if isinstance(found, str):
            return jsonrpc.encode_error(
                request_id, RESOURCE_NOT_FOUND, f"Resource not found: {found}"
            )
        return jsonrpc.encode_result(request_id, read_result(found))

    def tools_changed(self, tools: tuple[ToolInfo, ...]) -> bytes:
        """Re-admission changed the catalog: `notifications/tools/list_changed` once initialized."""
        self._tools = {tool.name: tool for tool in tools}
        self._tool_infos = tools
        self._tools_json = tools_list_json(tools, self._version, self._budget)
        if not self._initialized:
            return b""
        return jsonrpc.encode_notification("notifications/tools/list_changed", {})

    def _resource_read(self, request: jsonrpc.Request) -> list[Action]:
        params = request.params
        uri = params.get("uri") if type(params) is dict else None
        if type(uri) is not str:
            return send_error(
                request.id, jsonrpc.INVALID_PARAMS, "Invalid params: /uri must be a string"
            )
        return [Fetch(request.id, uri, self._root_run or self._tag)]

    def _initialize(self, request: jsonrpc.Request) -> list[Action]:
        if self._initialized:
            return send_error(
                request.id, jsonrpc.INVALID_REQUEST, "Invalid Request: already initialized"
            )
        if type(request.params) is not dict:
            return send_error(
                request.id,
                jsonrpc.INVALID_PARAMS,
                "Invalid params: initialize params must be an object",
            )
        self._initialized = True
        version = negotiate_version(request.params)
        # Results and the tool list are shaped for the version agreed on.
        self._version = version
        self._tools_json = tools_list_json(self._tool_infos, version, self._budget)
        result = initialize_result(
            version, self._server_name, self._server_version, root_run=self._root_run
        )
        return [Send(jsonrpc.encode_result(request.id, result))]

    def _before_initialize(self, request: jsonrpc.Request) -> list[Action]:
        """A session method too early is -32600; any other method is -32601 (as the SDK)."""
        if request.method in SESSION_METHODS:
            return send_error(
                request.id,
                jsonrpc.INVALID_REQUEST,
                f"Invalid Request: {request.method} before initialize; send initialize first",
            )
        return send_error(
            request.id,
            jsonrpc.METHOD_NOT_FOUND,
            f"Method not found: {request.method}; send initialize first",
        )

    def _tool_call(self, request: jsonrpc.Request) -> list[Action] | Call:
        try:
            call = parse_tool_call(request.params)
        except ToolCallParamsError as exc:
            return send_error(request.id, jsonrpc.INVALID_PARAMS, str(exc))
        tool = self._tools.get(call.name)
        if tool is None:
            return send_error(
                request.id, jsonrpc.INVALID_PARAMS, f"Invalid params: unknown tool {call.name!r}"
            )
        if request.id in self._pending:
            return send_error(
                request.id, jsonrpc.INVALID_REQUEST, "Invalid Request: id is already in flight"
            )
        try:
            if tool.unavailable is not None:
                raise JigError(Code.UNAVAILABLE, f"command {tool.name!r}: {tool.unavailable}")
            arguments = call_input(call)
        except JigError as refusal:
            return [Send(self.refuse(request.id, refusal))]
        self._calls += 1
        return Call(
            request.id,
            "mcp",
            f"mcp.{self._tag}.{self._calls}",
            arguments,
            progress_token=call.progress_token,
            context=self._tag,
            root_run=self._root_run,
        )
