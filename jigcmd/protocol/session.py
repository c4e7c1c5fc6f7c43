"""The sans-IO stdio session: frames in, actions out; it routes and its dialect speaks.

The first request decides the dialect unless one is forced, from the table below:
`initialize`, `server/discover` or any request carrying MCP's per-request `_meta` envelope
selects MCP (whose two eras `mcp.py` tells apart), `capability/call` / `effect/call` select
FLOW Run/1. `ping` is answered here before a dialect is chosen; once one is, the dialect
answers it under its own rules (Run/1 refuses an id outside its grammar; MCP's per-request
era has no `ping`).

One session is one context of one caller's run (`root_run`). A dialect whose row says
`one_at_a_time` (Run/1, the seed's rule) runs at most one operation at a time in the
session: a call of another one meanwhile is `RESOURCE_EXHAUSTED`; a call joining the
running one is dispatched as one more waiter on it (the backend shares the work). A frame
carrying the id of a request still awaiting its answer, whatever its method or shape, is
refused here under `"id": null`, before any dialect sees it. Everything else about a
message is its dialect's (`flow.py`, `mcp.py`), behind `dialect.Dialect`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from jigcmd.errors import Code, JigError
from jigcmd.protocol import flow, jsonrpc, mcp_era
from jigcmd.protocol.actions import (
    Action,
    Call,
    Cancel,
    Dispatch,
    Fetch,
    Lookup,
    Outcome,
    Send,
    Warn,
    send_error,
)
from jigcmd.protocol.commands import Recorded, ToolInfo
from jigcmd.protocol.dialect import (
    DEFAULT_BUDGET_BYTES,
    Dialect,
    DialectEntry,
    Resource,
    Settings,
    Signature,
)
from jigcmd.protocol.framing import MAX_FRAME_BYTES

if TYPE_CHECKING:
    from jigcmd.protocol.mcp import McpDialect

__all__ = [
    "Action",
    "Call",
    "Cancel",
    "Dispatch",
    "Fetch",
    "Lookup",
    "Outcome",
    "ProtocolChoice",
    "Resource",
    "Send",
    "Session",
    "Signature",
    "Warn",
]

ProtocolChoice = Literal["auto", "mcp", "flow"]


def _mcp_dialect() -> type[McpDialect]:
    """MCP's dialect, imported when a session first chooses MCP (or is told to, at its start)."""
    # A FLOW Run/1 server, or one not yet decided, then holds none of MCP's modules (six, ~0.2
    # MiB of its idle image: docs/performance.md, "the idle footprint, a fourth look").
    from jigcmd.protocol.mcp import McpDialect  # noqa: PLC0415 - MCP's modules only for a session that speaks it

    return McpDialect


def _start_mcp(settings: Settings) -> Dialect:
    return _mcp_dialect()(settings)


# The dialects a session speaks, in the order the hint to an undecided peer names them.
_DIALECTS: Final[dict[str, DialectEntry]] = {
    "mcp": DialectEntry(
        label="MCP",
        opener="initialize",
        opens=frozenset({"initialize", "server/discover"}),
        early=mcp_era.SESSION_METHODS,
        one_at_a_time=False,
        start=_start_mcp,
    ),
    "flow": DialectEntry(
        label="FLOW Run/1",
        opener="capability/call",
        opens=flow.CALL_METHODS,
        early=frozenset(),
        one_at_a_time=True,
        start=flow.FlowDialect,
        id_refused=flow.ID_REFUSED,
    ),
}
# A deciding method -> the dialect it opens.
_CHOSEN_BY: Final = {method: name for name, entry in _DIALECTS.items() for method in entry.opens}
_FIRST: Final = "send {} first".format(
    " or ".join(f"{entry.opener} ({entry.label})" for entry in _DIALECTS.values())
)

_PING_RESULT: Final = b"{}"
# Bytes that make a line blank (a frame never includes its LF).
_BLANK: Final = b" \t\r"


class Session:
    """The protocol state of one stdio session."""

    def __init__(
        self,
        tools: Sequence[ToolInfo],
        *,
        signature: Signature,
        protocol: ProtocolChoice = "auto",
        server_name: str = "jigcmd",
        server_version: str = "0",
        session_tag: str = "0",
        slot: str | None = None,
        remember: int | None = None,
        root_run: str = "",
        result_budget: int = DEFAULT_BUDGET_BYTES,
    ) -> None:
        """`remember`: how many finished Run/1 operations keep their outcome (None: all).

        Bound it only when the backend keeps operation identity itself (the journal): a
        forgotten operation asked again is dispatched, and the backend replays it.
        """
        self._settings = Settings(
            tools=tuple(tools),
            signature=signature,
            server_name=server_name,
            server_version=server_version,
            session_tag=session_tag,
            slot=slot,
            remember=remember,
            root_run=root_run,
            result_budget=result_budget,
        )
        self._name: str | None = None
        self._dialect: Dialect | None = None
        self._one_at_a_time = False
        self._active: Call | None = None
        # The requests waiting on the active operation (its first and its joins).
        self._active_requests: set[jsonrpc.Id] = set()
        # The journal began a row for the active operation: it runs. Until then it is being
        # answered from the journal (a replay) or has yet to start.
        self._running = False
        # Every request id awaiting its answer (either dialect) -> the action it waits on.
        self._in_flight: dict[jsonrpc.Id, Dispatch | Fetch | Lookup] = {}
        if protocol != "auto":
            self._choose(protocol)

    @property
    def dialect(self) -> str | None:
        """The dialect chosen so far, or None before the first deciding request."""
        return self._name

    @property
    def active(self) -> Call | None:
        """The call running under the one-at-a-time rule (Run/1), if any."""
        return self._active

    def receive(self, frame: bytes) -> list[Action]:
        """Handle one frame (without its b"\\n"); empty lines and stray responses are ignored."""
        if not frame.strip(_BLANK):
            return []
        message = jsonrpc.parse(frame)
        reused = _frame_id(message)
        if reused is not None and reused in self._in_flight:
            # Before anything else looks at the frame (its method, its shape): any answer
            # under that id would be taken for the one in flight (docs/protocols.md).
            return [Send(jsonrpc.encode_duplicate(reused))]
        if type(message) is jsonrpc.Request:
            return self._awaiting(self._request(message))
        if type(message) is jsonrpc.Notification:
            if self._dialect is not None:
                return self._dialect.notification(message)
            # Not a dialect's first request (it expects no answer), but a call is not lost
            # without a word.
            return flow.call_without_id(message) if message.method in flow.CALL_METHODS else []
        if type(message) is jsonrpc.Response:
            return []
        assert type(message) is jsonrpc.Rejected
        text = message.message
        # Before any dialect is chosen, the method says which one the request was meant for.
        name = self._name or _CHOSEN_BY.get(message.method or "")
        if message.bad_id and name is not None:
            text = _DIALECTS[name].id_refused or text
        return [Send(jsonrpc.encode_error(message.id, message.code, text))]

    def oversized(self, size: int, head: bytes = b"", tail: bytes = b"") -> bytes:
        """The answer to a frame that exceeded the limit and was discarded.

        Its id, when its first bytes (`head`) or its last (`tail`) name it: the caller stops
        waiting at once.
        """
        found = jsonrpc.scanned_id(head, tail)
        if found is not None and found in self._in_flight:
            return jsonrpc.encode_duplicate(found)
        return jsonrpc.encode_error(
            found,
            jsonrpc.INVALID_REQUEST,
            f"Invalid Request: frame of at least {size:,} bytes exceeds the limit of "
            f"{MAX_FRAME_BYTES:,} bytes; it was discarded",
        )

    def finish(self, call: Call, outcome: Outcome) -> bytes:
        """Record how `call` ended and return every answer it completes."""
        self._answered(call.request_id, call)
        self._active_requests.discard(call.request_id)
        if not self._active_requests:
            self._active = None
            self._running = False
        assert self._dialect is not None, "a call is only dispatched by a chosen dialect"
        return self._dialect.finish(call, outcome)

    def progress(
        self, call: Call, message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> bytes:
        """A progress notification for `call`, or b"" when its caller asked for none."""
        assert self._dialect is not None, "a call is only dispatched by a chosen dialect"
        return self._dialect.progress(call, message, elapsed_ms, total_ms)

    def fetched(self, request_id: jsonrpc.Id, found: Resource | str) -> bytes:
        """The answer to a `Fetch`: the resource read, or why there is none."""
        assert self._dialect is not None, "a fetch is only asked for by a chosen dialect"
        self._in_flight.pop(request_id, None)
        return self._dialect.fetched(request_id, found)

    def tools_changed(self, tools: Sequence[ToolInfo]) -> bytes:
        """The catalog changed while serving: the dialect's notification, or b""."""
        self._settings = msgspec.structs.replace(self._settings, tools=tuple(tools))
        return b"" if self._dialect is None else self._dialect.tools_changed(tuple(tools))

    def owned(self, call: Call, created_unix_ms: int) -> bytes:
        """The journal began `call`'s operation (it runs), its row created at `created_unix_ms`:
        what that answers (a task's creation)."""
        if self._active is not None and self._active.operation_id == call.operation_id:
            self._running = True
        if call.task_id is None:
            return b""
        created = self._mcp().owned(call, created_unix_ms)
        if created:
            # The task's creation answers the request: its id is free again.
            self._answered(call.request_id, call)
        return created

    def recorded(self, lookup: Lookup, found: Recorded | None) -> bytes:
        """The answer to a `Lookup` from what the journal holds (None: nothing)."""
        self._in_flight.pop(lookup.request_id, None)
        return self._mcp().recorded(lookup, found)

    def lookup_failed(self, lookup: Lookup) -> bytes:
        """The answer to a `Lookup` whose journal could not be read."""
        self._in_flight.pop(lookup.request_id, None)
        return jsonrpc.encode_error(
            lookup.request_id,
            jsonrpc.INTERNAL_ERROR,
            "Internal error: the journal could not be read",
        )

    def _mcp(self) -> McpDialect:
        assert isinstance(self._dialect, _mcp_dialect()), "only MCP reads records or owns tasks"
        return self._dialect

    def _awaiting(self, actions: list[Action]) -> list[Action]:
        """Note the requests these actions leave waiting for an answer; return the actions."""
        for action in actions:
            if type(action) is Dispatch:
                self._in_flight[action.call.request_id] = action
            elif type(action) is Fetch or type(action) is Lookup:
                self._in_flight[action.request_id] = action
        return actions

    def _answered(self, request_id: jsonrpc.Id, call: Call) -> None:
        """`call`'s request is answered; its id may already be another request's (a task's)."""
        waiting = self._in_flight.get(request_id)
        if type(waiting) is Dispatch and waiting.call == call:
            del self._in_flight[request_id]

    def _choose(self, name: str) -> None:
        entry = _DIALECTS[name]
        self._name = name
        self._dialect = entry.start(self._settings)
        self._one_at_a_time = entry.one_at_a_time

    def _request(self, request: jsonrpc.Request) -> list[Action]:
        method = request.method
        claims = mcp_era.claims_envelope(request.params)
        if method == "ping" and self._name is None and not claims:
            # Once a dialect is chosen, its own rules (Run/1's ids) apply to `ping` too.
            return [Send(jsonrpc.encode_raw_result(request.id, _PING_RESULT))]
        if self._dialect is None:
            chosen = _CHOSEN_BY.get(method) or ("mcp" if claims else None)
            if chosen is None:
                return _undecided(request)
            self._choose(chosen)
            assert self._dialect is not None
        reply = self._dialect.request(request)
        if not isinstance(reply, Call):
            return reply
        if self._one_at_a_time:
            # A join of the running operation is one more waiter on it, not a second call.
            active = self._active
            if active is not None and active.operation_id != reply.operation_id:
                return [Send(self._dialect.refuse(request.id, _busy(active, self._running)))]
            self._active = active or reply
            self._active_requests.add(reply.request_id)
        self._dialect.started(reply)
        return [Dispatch(reply)]


def _frame_id(
    message: jsonrpc.Request | jsonrpc.Notification | jsonrpc.Response | jsonrpc.Rejected,
) -> jsonrpc.Id | None:
    """The id a request, or a frame refused as one, would be answered under (None: none)."""
    if type(message) is jsonrpc.Request or type(message) is jsonrpc.Rejected:
        return message.id
    return None


def _undecided(request: jsonrpc.Request) -> list[Action]:
    """Before any dialect: a method some dialect serves once open is -32600, others -32601."""
    for entry in _DIALECTS.values():
        if request.method in entry.early:
            return send_error(
                request.id,
                jsonrpc.INVALID_REQUEST,
                f"Invalid Request: {request.method} before {entry.opener}; {_FIRST}",
            )
    return send_error(
        request.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {request.method}; {_FIRST}"
    )


def _busy(active: Call, running: bool) -> JigError:
    """The refusal of another operation while `active` is answered, worded as it is."""
    # Whether the active operation runs is known only once the journal began its row;
    # before that its request is checked (and admitted), or it is a replay of a recorded
    # outcome, which runs nothing: the session cannot tell which, so it says both.
    doing = (
        "is still running"
        if running
        else "is still being answered (not running: its request is being checked before it "
        "can begin, or its recorded outcome replayed from the journal)"
    )
    return JigError(
        Code.RESOURCE_EXHAUSTED,
        f"operation {active.operation_id!r} {doing} in this session; "
        "a session answers one operation at a time",
    )
