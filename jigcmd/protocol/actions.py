"""What a session asks its shell to do: send frames, start a call, cancel one, read a record,
warn the operator."""

from __future__ import annotations

from typing import Any

import msgspec

from jigcmd.errors import JigError
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import RunResult

__all__ = [
    "Action",
    "Call",
    "Cancel",
    "Dispatch",
    "Fetch",
    "Lookup",
    "Outcome",
    "Send",
    "Warn",
    "send_error",
]

Outcome = RunResult | JigError


class Call(msgspec.Struct, frozen=True):
    """One command call to run: the request that dispatched it and what the backend needs."""

    request_id: jsonrpc.Id
    # The name of the dialect that made it (the session's dialect table key).
    dialect: str
    operation_id: str
    input: Any
    deadline_unix_ms: int | None = None
    progress_token: jsonrpc.Id | None = None
    # The operation's identity for the journal (replay, join, conflict); None keeps no row.
    signature: str | None = None
    # The caller's context: this session.
    context: str = ""
    # The caller's run this session belongs to: the scope of operation identity.
    root_run: str = ""
    # The MCP task the call runs as (its operation id too), when it is one.
    task_id: str | None = None
    # The caller's W3C trace context (`traceparent`, `tracestate`), kept with the run.
    trace: dict[str, str] | None = None


class Send(msgspec.Struct, frozen=True):
    """Write these frame bytes to the peer."""

    data: bytes


class Dispatch(msgspec.Struct, frozen=True):
    """Start `call`; report its outcome to `Session.finish`."""

    call: Call


class Cancel(msgspec.Struct, frozen=True):
    """Ask the running call dispatched by `request_id` (or running as `task_id`) to stop."""

    request_id: jsonrpc.Id
    task_id: str | None = None


class Fetch(msgspec.Struct, frozen=True):
    """Read the per-run resource `uri` for a caller of `scope`; report to `Session.fetched`."""

    request_id: jsonrpc.Id
    uri: str
    scope: str


class Lookup(msgspec.Struct, frozen=True):
    """Read the journal's record of an operation of `root_run`; answer via `Session.recorded`."""

    request_id: jsonrpc.Id
    method: str
    operation_id: str
    root_run: str


class Warn(msgspec.Struct, frozen=True):
    """Log one warning line on the operator's stderr; the peer is told nothing."""

    message: str


Action = Send | Dispatch | Cancel | Fetch | Lookup | Warn


def send_error(request_id: jsonrpc.Id | None, code: int, message: str) -> list[Action]:
    """Answer a request with a JSON-RPC error and do nothing else."""
    return [Send(jsonrpc.encode_error(request_id, code, message))]
