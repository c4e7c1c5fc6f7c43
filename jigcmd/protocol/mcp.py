"""The MCP dialect: handshake, one tool per command, and tool results built from evidence.

A completed command, whatever its exit, is `isError: false` with the evidence as
`structuredContent`; refusals and operational failures are `isError: true` with a readable
text, the evidence when there is some, and the failure code under `_meta["jigcmd/error"]`.
Measurements travel beside the evidence in `_meta["jigcmd/report"]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from jigcmd.contract import (
    MAX_ARG_BYTES,
    MAX_ARGS,
    MAX_CANDIDATE_BYTES,
    MAX_FILES,
    MAX_STDIN_BYTES,
    OUTPUT_CAP_BYTES,
)
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import RunResult, ToolInfo
from jigcmd.protocol.summary import summary

__all__ = [
    "EVIDENCE_SCHEMA",
    "LATEST_VERSION",
    "RUN_ID_META",
    "SESSION_METHODS",
    "SUPPORTED_VERSIONS",
    "ToolCall",
    "call_input",
    "completed_result",
    "failure_result",
    "initialize_result",
    "input_schema",
    "negotiate_version",
    "parse_cancelled",
    "parse_tool_call",
    "progress_notification",
    "tools_list_json",
]

LATEST_VERSION: Final = "2025-11-25"
# Every version negotiated, newest first: a client's own version is answered when listed.
SUPPORTED_VERSIONS: Final = (LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05")
# Versions with `structuredContent` and `outputSchema` (and tool `title`s); before them the
# evidence travels as JSON text.
_STRUCTURED: Final = frozenset({LATEST_VERSION, "2025-06-18"})
# Versions with tool `annotations` (`readOnlyHint`, …).
_ANNOTATED: Final = _STRUCTURED | {"2025-03-26"}
# The methods an initialized MCP session serves (besides ping); before `initialize` they are
# -32600, any other method -32601.
SESSION_METHODS: Final = frozenset({"tools/list", "tools/call"})
# The `initialize` result's `_meta` key naming the caller's run of the session.
RUN_ID_META: Final = "jigcmd/runId"

_STREAM_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "maxLength": OUTPUT_CAP_BYTES},
        "truncated": {"type": "boolean"},
    },
    "required": ["text", "truncated"],
    "additionalProperties": False,
}

# The contract descriptor's `Result` definition, verbatim (a test proves it).
EVIDENCE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "candidateDigest": {"type": "string", "maxLength": 71},
        "command": {"type": "string"},
        "invocation": {"type": "array", "items": {"type": "string"}},
        "stdinDigest": {"type": "string", "maxLength": 71},
        "stdout": _STREAM_SCHEMA,
        "stderr": _STREAM_SCHEMA,
        "exitCode": {"type": ["integer", "null"]},
        "signal": {"type": ["string", "null"]},
        "stopReason": {"enum": ["exited", "deadline", "cancelled"]},
        "cleanup": {"const": "complete"},
    },
    "required": [
        "candidateDigest",
        "command",
        "invocation",
        "stdinDigest",
        "stdout",
        "stderr",
        "exitCode",
        "signal",
        "stopReason",
        "cleanup",
    ],
    "additionalProperties": False,
}

_FILES_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "description": f"The candidate project: 1-{MAX_FILES} relative paths mapped to their UTF-8 "
    f"text (at most {MAX_CANDIDATE_BYTES // 1024} KiB in total). The command's own files must "
    "be included.",
    "additionalProperties": {"type": "string", "maxLength": MAX_CANDIDATE_BYTES},
    "minProperties": 1,
    "maxProperties": MAX_FILES,
}
_ARGS_SCHEMA: Final[dict[str, Any]] = {
    "type": "array",
    "description": "Arguments passed verbatim to the script (never Bun options).",
    "items": {"type": "string", "maxLength": MAX_ARG_BYTES},
    "maxItems": MAX_ARGS,
}
_STDIN_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "description": f"Text supplied on standard input (at most {MAX_STDIN_BYTES // 1024} KiB).",
    "maxLength": MAX_STDIN_BYTES,
}


# Evidence collected before a deadline or cancel arrives as the builtins of its JSON.
_as_evidence: Final = msgspec.json.Decoder(Evidence)


class ParamsError(ValueError):
    """Raised when MCP request params are malformed; answered with -32602."""


class ToolCall(msgspec.Struct, frozen=True):
    """One well-formed `tools/call`."""

    name: str
    arguments: dict[str, Any]
    progress_token: jsonrpc.Id | None


def negotiate_version(params: object) -> str:
    """The protocol version to answer `initialize` with: the client's if supported, else ours."""
    requested = params.get("protocolVersion") if type(params) is dict else None
    return requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION


def initialize_result(
    version: str, server_name: str, server_version: str, *, root_run: str = ""
) -> dict[str, Any]:
    """The `initialize` result: tools only, no list changes (the catalog is fixed per process).

    `_meta["jigcmd/runId"]` names the caller's run the session belongs to, when it has one.
    """
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": server_name, "version": server_version},
        "instructions": "Each tool runs one operator-reviewed Bun command against the files you "
        "supply, inside a containment envelope, and returns host-collected evidence "
        "(output, exit code or signal, stop reason). A non-zero exit is evidence, not an error.",
    }
    if root_run:
        result["_meta"] = {RUN_ID_META: root_run}
    return result


def input_schema(kind: str, paths: Sequence[str] = ()) -> dict[str, Any]:
    """The tool input schema: `files`, plus `args`/`stdin` only where the command accepts them.

    With the command's `paths`, the `files` description names the ones it must include.
    """
    files = dict(_FILES_SCHEMA)
    if paths:
        named = ", ".join(f"`{path}`" for path in paths)
        files["description"] = (
            f"{files['description']} This command needs {named}, and every file it imports."
        )
    properties: dict[str, Any] = {"files": files}
    if kind == "run":
        properties["args"] = _ARGS_SCHEMA
    properties["stdin"] = _STDIN_SCHEMA
    return {
        "type": "object",
        "properties": properties,
        "required": ["files"],
        "additionalProperties": False,
    }


def _description(tool: ToolInfo) -> str:
    """What a model needs on its first call: the command, the files, the bounds, the evidence."""
    needed = " and ".join(f"`{path}`" for path in tool.paths) or "the command's own files"
    if tool.kind == "test":
        runs = f"Runs `{tool.command_line}` (Bun's test runner on the reviewed test files)"
        inputs = "No arguments."
    else:
        runs = f"Runs `{tool.command_line}` (the reviewed entry point with your arguments)"
        inputs = (
            f"`args`: at most {MAX_ARGS} arguments of at most {MAX_ARG_BYTES // 1024} KiB each, "
            "given to the script verbatim (never Bun options)."
        )
    parts = [
        f"{runs} against the project files you send, in a fresh sandbox: no network, no "
        "package install (no node_modules; Bun's built-ins only), a read-only copy of your "
        "files, at most 10 s, 256 MiB and 64 processes.",
        f"`files` must include {needed} and every file it imports: 1-{MAX_FILES} relative paths "
        f"mapped to UTF-8 text, at most {MAX_CANDIDATE_BYTES // 1024} KiB in total; "
        "node_modules, .git and .jig are reserved.",
        inputs,
        f"`stdin`: optional text of at most {MAX_STDIN_BYTES // 1024} KiB.",
        "Returns evidence of what ran: exitCode or signal, stopReason (exited, deadline, "
        f"cancelled), and stdout and stderr (the first {OUTPUT_CAP_BYTES // 1024} KiB of each, "
        "complete in structuredContent; the text content shows their head and tail). A non-zero "
        "exit, such as failing tests, is evidence (isError false), not a tool error; isError true "
        "means nothing ran to completion (refused input, unavailable, deadline, cancelled).",
    ]
    if tool.unavailable is not None:
        parts.append(f"Currently unavailable: {tool.unavailable}")
    return " ".join(parts)


def _tool_definition(tool: ToolInfo, version: str) -> dict[str, Any]:
    definition: dict[str, Any] = {
        "name": tool.name,
        "description": _description(tool),
        "inputSchema": input_schema(tool.kind, tool.paths),
    }
    if version in _STRUCTURED:
        # `title` came with 2025-06-18, like the output schema.
        definition["title"] = f"{tool.command_line} (reviewed command {tool.name!r})"
        definition["outputSchema"] = EVIDENCE_SCHEMA
    if version in _ANNOTATED:
        definition["annotations"] = {
            "readOnlyHint": True,
            "openWorldHint": False,
            "idempotentHint": True,
        }
    return definition


def tools_list_json(tools: Sequence[ToolInfo], version: str = LATEST_VERSION) -> bytes:
    """The whole `tools/list` result for `version`, encoded once per session."""
    return jsonrpc.encode_json({"tools": [_tool_definition(tool, version) for tool in tools]})


def parse_tool_call(params: object) -> ToolCall:
    """Check `tools/call` params; raise `ParamsError` if malformed."""
    if type(params) is not dict:
        raise ParamsError("Invalid params: tools/call params must be an object")
    name = params.get("name")
    if type(name) is not str:
        raise ParamsError("Invalid params: /name must be a string")
    arguments = params.get("arguments", {})
    if type(arguments) is not dict:
        raise ParamsError("Invalid params: /arguments must be an object")
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


def _evidence_content(evidence: Evidence, version: str) -> list[dict[str, Any]]:
    """The text content that goes with evidence: the concise summary, within its budget.

    Before 2025-06-18 there is no `structuredContent`, so the complete evidence follows as
    JSON text. From 2025-06-18 it is not repeated as text (which the specification suggests):
    hosts cap tool results, and two full streams alone are ~32k tokens.
    """
    content = [{"type": "text", "text": summary(evidence)}]
    if version not in _STRUCTURED:
        content.append({"type": "text", "text": jsonrpc.encode_json(evidence).decode()})
    return content


def completed_result(result: RunResult, version: str = LATEST_VERSION) -> dict[str, Any]:
    """A completed run: not an error whatever the exit; evidence as structured content.

    Before 2025-06-18 there is no `structuredContent`: the evidence is JSON text.
    """
    completed: dict[str, Any] = {
        "content": _evidence_content(result.evidence, version),
        "isError": False,
        "_meta": {"jigcmd/report": result.report},
    }
    if version in _STRUCTURED:
        completed["structuredContent"] = result.evidence
    return completed


def failure_result(error: JigError, version: str = LATEST_VERSION) -> dict[str, Any]:
    """A refusal or operational failure as a tool error with a readable reason.

    Evidence collected before a deadline or cancel rides as `structuredContent`, or as JSON
    text before 2025-06-18.
    """
    details = dict(error.details) if error.details else {}
    evidence = details.pop("command", None)
    meta: dict[str, Any] = {"code": error.code.value}
    if details:
        meta["details"] = details
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": f"{error.code.value}: {error.message}"}],
        "isError": True,
        "_meta": {"jigcmd/error": meta},
    }
    if evidence is not None:
        collected = (
            evidence
            if isinstance(evidence, Evidence)
            else _as_evidence.decode(jsonrpc.encode_json(evidence))
        )
        result["content"] += _evidence_content(collected, version)
        if version in _STRUCTURED:
            result["structuredContent"] = evidence
    return result


def parse_cancelled(params: object) -> jsonrpc.Id | None:
    """The request id a `notifications/cancelled` names, or None when malformed."""
    if type(params) is dict and jsonrpc.is_mcp_id(params.get("requestId")):
        return params["requestId"]  # type: ignore[no-any-return]
    return None


def progress_notification(token: jsonrpc.Id, progress: int, message: str) -> bytes:
    """A `notifications/progress` frame; `progress` increases with every notification."""
    return jsonrpc.encode_notification(
        "notifications/progress", {"progressToken": token, "progress": progress, "message": message}
    )
