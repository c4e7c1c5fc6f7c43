"""Frames the lifetime tests send and compare (their server: `servechild.ServeChild`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jigcmd.frontends.servechild import ServeChild

__all__ = [
    "ANSWER_SECONDS",
    "flow_call",
    "mcp_initialized",
    "serve_child",
    "tool_call",
    "without_id",
]

# How long a lifetime test waits for any one answer (a failsafe, never a timing claim).
ANSWER_SECONDS = 60.0


def serve_child(
    binding: Path,
    state_dir: Path,
    stderr_path: Path,
    *,
    max_envelopes: int | None = None,
    protocol: str = "auto",
    run_id: str | None = None,
    launcher: tuple[str, ...] = (),
    socket_stdout: bool = False,
) -> ServeChild:
    """`jigcmd serve` on a state directory, its stderr in `stderr_path` (under `launcher`).

    With `socket_stdout` its stdout is a socketpair, as a Node host's `child_process` gives it.
    """
    args = ["--state-dir", str(state_dir), "--protocol", protocol]
    if max_envelopes is not None:
        args += ["--max-envelopes", str(max_envelopes)]
    if run_id is not None:
        args += ["--run-id", run_id]
    return ServeChild(
        binding,
        args,
        timeout=ANSWER_SECONDS,
        stderr_path=stderr_path,
        launcher=launcher,
        socket_stdout=socket_stdout,
    )


def flow_call(request_id: str, operation_id: str, input: object, **extra: object) -> dict[str, Any]:
    """A `capability/call` request frame (extra params such as `deadlineUnixMs` allowed)."""
    params: dict[str, Any] = {
        "operationId": operation_id,
        "slot": "command",
        "method": "run",
        "input": input,
        **extra,
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "capability/call", "params": params}


def mcp_initialized(server: ServeChild) -> ServeChild:
    """`server` after MCP's handshake (`initialize` as request 1, then `initialized`)."""
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
    server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize})
    server.response(1)
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def tool_call(request_id: int, source: str, token: str, key: str | None = None) -> dict[str, Any]:
    """An MCP `tools/call` of the `cli` command running `source` with `token` (keyed by `key`)."""
    params: dict[str, Any] = {
        "name": "cli",
        "arguments": {"files": {"src/cli.ts": source}, "args": [token]},
    }
    if key is not None:
        params["_meta"] = {"dev.jigcmd/operationId": key}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def without_id(line: bytes) -> dict[str, Any]:
    """A response line's object without its JSON-RPC id (for byte-level replay comparison)."""
    message: dict[str, Any] = json.loads(line)
    message.pop("id", None)
    return message
