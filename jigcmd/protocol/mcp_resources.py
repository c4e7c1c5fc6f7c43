"""MCP resources: a run's kept resources read back by URI, and the fixed lists of them.

Run resources are linked from each result, not listed: `resources/list` is empty and
`resources/templates/list` names the one URI shape they share. The dialect (`mcp.py`) asks
the shell for the bytes (`Fetch`) and answers with them in the era the read came in.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from jigcmd.protocol import jsonrpc, mcp_era
from jigcmd.protocol.actions import Action, Send, send_error
from jigcmd.protocol.dialect import Resource
from jigcmd.protocol.mcp_messages import cursor_refusal
from jigcmd.protocol.mcp_versions import MODERN_VERSION

__all__ = [
    "RESOURCE_METHODS",
    "RESOURCE_NOT_FOUND",
    "RUN_RESOURCE_TEMPLATE",
    "listed",
    "read_answer",
    "read_result",
    "requested_uri",
]

RESOURCE_METHODS: Final = frozenset(
    {"resources/read", "resources/list", "resources/templates/list"}
)
# MCP's "resource not found" error code.
RESOURCE_NOT_FOUND: Final = -32002

# The shape of every URI a result links (`jigcmd.durable.runresources.resource_uri`).
RUN_RESOURCE_TEMPLATE: Final = {
    "uriTemplate": "jigcmd://run/{run}/{operation}/{name}",
    "name": "run-resource",
    "title": "A kept resource of one call",
    "description": "What one tool call kept: {name} is stdout, stderr, junit or attestation. "
    "Each tool result links its own; only this session's run is served.",
}


def listed(request: jsonrpc.Request, version: str, server_info: dict[str, str]) -> list[Action]:
    """The answer to `resources/list` (empty) or `resources/templates/list` (the one shape)."""
    refused = cursor_refusal(request)
    if refused:
        return refused
    lists: dict[str, Any] = (
        {"resources": []}
        if request.method == "resources/list"
        else {"resourceTemplates": [RUN_RESOURCE_TEMPLATE]}
    )
    if version == MODERN_VERSION:
        # Fixed for the process, like the catalogue (SEP-2549: a cacheable result).
        lists |= {"ttlMs": mcp_era.RESOURCE_LISTS_TTL_MS, "cacheScope": "private"}
        lists = mcp_era.modern_result(lists, server_info)
    return [Send(jsonrpc.encode_result(request.id, lists))]


def requested_uri(request: jsonrpc.Request) -> str | list[Action]:
    """The URI a `resources/read` asks for, or its refusal."""
    params = request.params
    uri = params.get("uri") if type(params) is dict else None
    if type(uri) is not str:
        return send_error(
            request.id, jsonrpc.INVALID_PARAMS, "Invalid params: /uri must be a string"
        )
    return uri


def read_answer(
    request_id: jsonrpc.Id, found: Resource | str, version: str, server_info: dict[str, str]
) -> bytes:
    """The `resources/read` answer: its contents, or not found with the reason.

    Not found is -32002 in the handshake era; 2026-07-28 has no such code (SEP-2164): -32602.
    """
    if isinstance(found, str):
        code = jsonrpc.INVALID_PARAMS if version == MODERN_VERSION else RESOURCE_NOT_FOUND
        return jsonrpc.encode_error(request_id, code, f"Resource not found: {found}")
    result = read_result(found)
    if version == MODERN_VERSION:
        # The bytes of a kept resource never change; they are this caller's run's own.
        result |= {"ttlMs": mcp_era.RESOURCE_TTL_MS, "cacheScope": "private"}
        result = mcp_era.modern_result(result, server_info)
    return jsonrpc.encode_result(request_id, result)


def read_result(resource: Resource) -> dict[str, Any]:
    """A `resources/read` result: text when the bytes are UTF-8, else a base64 blob."""
    content: dict[str, Any] = {"uri": resource.uri, "mimeType": resource.mime_type}
    try:
        content["text"] = resource.data.decode("utf-8")
    except UnicodeDecodeError:
        content["blob"] = base64.b64encode(resource.data).decode("ascii")
    return {"contents": [content]}
