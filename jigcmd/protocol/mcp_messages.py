"""MCP's messages as jigcmd shapes them: the `initialize` result, a tool call's params,
progress and cancellation; pure functions of their inputs.

The dialect (`mcp.py`) decides when each is sent; the tool results themselves are
`mcp_results.py`'s, the tool list `mcp_tools.py`'s, a resource read `mcp_resources.py`'s.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from jigcmd.errors import Code, JigError
from jigcmd.policy.pointers import escape
from jigcmd.policy.request import not_strict
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.actions import Action, send_error
from jigcmd.protocol.commands import ToolInfo
from jigcmd.protocol.mcp_tools import tool_arguments

__all__ = [
    "ATTESTATION_META",
    "CAPABILITIES",
    "INSTRUCTIONS",
    "REPORT_META",
    "RUN_ID_META",
    "ToolCall",
    "ToolCallParamsError",
    "call_input",
    "cursor_refusal",
    "initialize_result",
    "malformed_meta",
    "parse_cancelled",
    "parse_tool_call",
    "progress_notification",
]

# The `initialize` result's `_meta` key naming the caller's run of the session.
RUN_ID_META: Final = "jigcmd/runId"
# Where a tool result carries its run's measurements (`mcp_results.py`).
REPORT_META: Final = "jigcmd/report"
# Where a tool result names its run's signed statement: its digest, and the caller's run and
# operation id that `jigcmd attest` fetches it by (see docs/attestation.md).
ATTESTATION_META: Final = "jigcmd/attestation"
INSTRUCTIONS: Final = (
    "Each tool runs one operator-reviewed Bun command against the files you supply, inside a "
    "containment envelope, and returns host-collected evidence (output, exit code or signal, "
    "stop reason). A non-zero exit is evidence, not an error."
)
# What the server offers, in both eras.
CAPABILITIES: Final = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": False, "listChanged": False},
}


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
        "capabilities": CAPABILITIES,
        "serverInfo": {"name": server_name, "version": server_version},
        "instructions": INSTRUCTIONS,
    }
    if root_run:
        result["_meta"] = {RUN_ID_META: root_run}
    return result


def malformed_meta(params: object) -> str | None:
    """Why a request's `_meta` is not what MCP defines, or None: an object, whose
    `progressToken` is a string or an integer."""
    # Refused, not ignored: a token jigcmd cannot echo would leave the caller waiting for
    # progress that never comes, and a `_meta` that is not an object carries no key at all.
    if type(params) is not dict or "_meta" not in params:
        return None
    meta = params["_meta"]
    if type(meta) is not dict:
        return "Invalid params: /_meta must be an object"
    if "progressToken" in meta and not jsonrpc.is_mcp_id(meta["progressToken"]):
        return "Invalid params: /_meta/progressToken must be a string or an integer"
    return None


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


def call_input(call: ToolCall, tool: ToolInfo, fault: jsonrpc.Fault | None) -> dict[str, Any]:
    """The capability `run` input for a tool call: the tool name selects the command.

    Only the tool's own arguments are taken, as its inputSchema says
    (`additionalProperties: false`); a refusal names them. `fault`: where the arguments
    break a strict JSON/1 rule (`jsonrpc.Request.fault`), refused before anything else.
    """
    # First: the checks below name keys, and a lone surrogate (which the JSON-RPC layer
    # lets through only here) must never reach an encoder.
    if fault is not None:
        raise not_strict(fault.pointer, fault.problem)
    allowed = tool_arguments(tool.kind)
    for key in call.arguments:
        if key not in allowed:
            raise _not_an_argument(key, tool, allowed)
    return {"command": call.name, **call.arguments}


def _not_an_argument(key: str, tool: ToolInfo, allowed: tuple[str, ...]) -> JigError:
    pointer = f"/{escape(key)}"
    if key == "command":
        why = "not an argument; the tool name selects the command"
    elif key == "args":
        why = "not an argument of a test command, which runs its reviewed test files as they are"
    else:
        why = "unknown argument"
    return JigError(
        Code.INVALID_INPUT,
        f"{pointer}: {why} (tool {tool.name!r} takes {', '.join(allowed)})",
        {"pointer": pointer, "rule": "input-keys"},
    )


def cursor_refusal(request: jsonrpc.Request) -> list[Action]:
    """-32602 for a list request with a cursor (MCP pagination: SHOULD); [] without one.

    No list here is ever paginated, so no cursor was ever handed out: any is invalid.
    """
    params = request.params
    if type(params) is not dict or params.get("cursor") is None:
        return []
    return send_error(
        request.id,
        jsonrpc.INVALID_PARAMS,
        "Invalid params: /cursor is not a cursor of this server (its lists are never "
        "paginated: send the request without one)",
    )


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
