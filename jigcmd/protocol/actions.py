"""What a session asks its shell to do: send frames, start a call, cancel one."""

from __future__ import annotations

from typing import Any

import msgspec

from jigcmd.errors import JigError
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import RunResult

__all__ = ["Action", "Call", "Cancel", "Dispatch", "Fetch", "Outcome", "Send", "send_error"]

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
    # Run/1 operation identity (None for MCP calls, which have no durable identity).
    signature: str | None = None
    # The caller's context: this session.
    context: str = ""
    # The caller's run this session belongs to: the scope of operation identity.
    root_run: str = ""


class Send(msgspec.Struct, frozen=True):
    """Write these frame bytes to the peer."""

    data: bytes


class Dispatch(msgspec.Struct, frozen=True):
    """Start `call`; report its outcome to `Session.finish`."""

    call: Call


class Cancel(msgspec.Struct, frozen=True):
    """Ask the running call dispatched by `request_id` to stop."""

    request_id: jsonrpc.Id


class Fetch(msgspec.Struct, frozen=True):
    """Read the per-run resource `uri` for a caller of `scope`; report to `Session.fetched`."""

    request_id: jsonrpc.Id
    uri: str
    scope: str


Action = Send | Dispatch | Cancel | Fetch


def send_error(request_id: jsonrpc.Id | None, code: int, message: str) -> list[Action]:
    """Answer a request with a JSON-RPC error and do nothing else."""
    return [Send(jsonrpc.encode_error(request_id, code, message))]
