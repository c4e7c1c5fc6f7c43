"""What a dialect is to the session: a row of its table and an object that speaks it.

The session routes: it answers `ping`, chooses the dialect from the first request's method,
and holds the one-call-at-a-time guard for the dialects whose row asks for it. Everything
else (parsing params, per-session state, encoding answers) belongs to the dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Protocol

import msgspec

from jigcmd.errors import JigError
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.actions import Action, Call, Outcome
from jigcmd.protocol.commands import ToolInfo

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "MIN_BUDGET_BYTES",
    "Dialect",
    "DialectEntry",
    "Resource",
    "Settings",
    "Signature",
]

# The byte budget of every MCP tool result (`mcp_view.py`, ~6k tokens): a setting of every
# session, here so that a session that never speaks MCP does not import MCP's modules.
DEFAULT_BUDGET_BYTES: Final = 24 * 1024
# Below this even the counts, digests and links may not fit.
MIN_BUDGET_BYTES: Final = 4 * 1024

# `operation_signature(method, params_without_operation_id) -> str`, injected so that the
# protocol package stays free of hashing and policy imports.
Signature = Callable[[str, Mapping[str, object]], str]


class Resource(msgspec.Struct, frozen=True):
    """A per-run resource as read back: its URI, MIME type and bytes."""

    uri: str
    mime_type: str
    data: bytes


class Settings(msgspec.Struct, frozen=True):
    """What a session is configured with, for the dialect it starts."""

    tools: tuple[ToolInfo, ...]
    signature: Signature
    server_name: str
    server_version: str
    session_tag: str
    slot: str | None
    remember: int | None
    root_run: str
    # structuredContent and content of every MCP tool result fit in this many JSON bytes.
    result_budget: int = DEFAULT_BUDGET_BYTES


class Dialect(Protocol):
    """One dialect's messages and per-session state."""

    def request(self, request: jsonrpc.Request) -> list[Action] | Call:
        """Answer a request, or return the call it asks for (started only via `started`)."""
        ...

    def started(self, call: Call) -> None:
        """Record that the session dispatched `call`, which `request` returned."""
        ...

    def refuse(self, request_id: jsonrpc.Id, error: JigError) -> bytes:
        """The answer refusing a call the session did not dispatch (the one-call guard)."""
        ...

    def notification(self, notification: jsonrpc.Notification) -> list[Action]:
        """Handle a notification; it is never answered."""
        ...

    def finish(self, call: Call, outcome: Outcome) -> bytes:
        """Record how `call` ended and return every answer it completes."""
        ...

    def progress(
        self, call: Call, message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> bytes:
        """A progress notification for `call`, or b"" when its caller asked for none."""
        ...

    def fetched(self, request_id: jsonrpc.Id, found: Resource | str) -> bytes:
        """The answer to a `Fetch` it asked for: the resource, or why there is none."""
        ...

    def tools_changed(self, tools: tuple[ToolInfo, ...]) -> bytes:
        """The tool list changed (re-admission): the notification to send, or b""."""
        ...


class DialectEntry(msgspec.Struct, frozen=True):
    """One row of the session's dialect table."""

    # How the hint to an undecided peer names it: "initialize (MCP)".
    label: str
    opener: str
    # The methods whose arrival in an undecided session chooses this dialect.
    opens: frozenset[str]
    # Methods served only once the dialect is open: -32600 before that, not -32601.
    early: frozenset[str]
    # At most one call of this dialect runs at a time in a session; another is refused.
    one_at_a_time: bool
    start: Callable[[Settings], Dialect]
    # The refusal of a request whose id is neither a string nor an integer, when the
    # dialect's own id rule is stricter than JSON-RPC's (None: JSON-RPC's wording).
    id_refused: str | None = None
