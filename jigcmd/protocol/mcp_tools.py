"""The MCP tool catalogue: one tool per command, its schemas and the words a model reads first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from jigcmd.contract import (
    MAX_ARG_BYTES,
    MAX_ARGS,
    MAX_CANDIDATE_BYTES,
    MAX_FILES,
    MAX_STDIN_BYTES,
    OUTPUT_CAP_BYTES,
)
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import ToolInfo
from jigcmd.protocol.mcp_versions import ANNOTATED, LATEST_VERSION, STRUCTURED

__all__ = ["EVIDENCE_SCHEMA", "input_schema", "tools_list_json"]

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
    if version in STRUCTURED:
        # `title` came with 2025-06-18, like the output schema.
        definition["title"] = f"{tool.command_line} (reviewed command {tool.name!r})"
        definition["outputSchema"] = EVIDENCE_SCHEMA
    if version in ANNOTATED:
        definition["annotations"] = {
            "readOnlyHint": True,
            "openWorldHint": False,
            "idempotentHint": True,
        }
    return definition


def tools_list_json(tools: Sequence[ToolInfo], version: str = LATEST_VERSION) -> bytes:
    """The whole `tools/list` result for `version`, encoded once per session."""
    return jsonrpc.encode_json({"tools": [_tool_definition(tool, version) for tool in tools]})
