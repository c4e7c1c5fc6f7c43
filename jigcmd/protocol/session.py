"""The sans-IO stdio session: frames in, actions out (frames to send, calls to start or cancel).

The first request decides the dialect unless one is forced: `initialize` selects MCP,
`capability/call` / `effect/call` select FLOW Run/1. `ping` is answered in every state and
`server/discover` always gets -32601 at once, so newer MCP clients fall back to `initialize`.

One session is one context of one caller's run (`root_run`). Run/1 keeps the seed's rule: at
most one operation runs at a time in the session, a second concurrent one is
`RESOURCE_EXHAUSTED`. MCP hosts call tools in parallel: every valid `tools/call` is
dispatched at once (the backend runs them side by side up to the free envelope slots and
queues the rest); a refused one is answered without dispatch.

Run/1 operation identity is kept here for the session: the same `operationId` with the same
signature joins the running operation or replays its recorded outcome; a different
signature is `OPERATION_CONFLICT`, before dispatch. Beyond the session (across restarts with
the same run id) the backend's journal keeps it; a conflict the journal reports is not the
operation's outcome here, so the request the journal holds is still answered from it.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from jigcmd.errors import Code, JigError
from jigcmd.protocol import flow, jsonrpc, mcp
from jigcmd.protocol.commands import RunResult, ToolInfo
from jigcmd.protocol.framing import MAX_FRAME_BYTES

__all__ = [
    "Action",
    "Call",
    "Cancel",
    "Dialect",
    "Dispatch",
    "Outcome",
    "ProtocolChoice",
    "Send",
    "Session",
    "Signature",
]

Dialect = Literal["mcp", "flow"]
ProtocolChoice = Literal["auto", "mcp", "flow"]
Outcome = RunResult | JigError
# `operation_signature(method, params_without_operation_id) -> str`, injected so that this
# module stays free of hashing and policy imports.
Signature = Callable[[str, Mapping[str, object]], str]

_PING_RESULT: Final = b"{}"
# Bytes that make a line blank (a frame never includes its LF).
_BLANK: Final = b" \t\r"
# Outcomes a session does not remember as the operation's own (see `_finish_flow`).
_NOT_THE_OPERATIONS_OUTCOME: Final = frozenset({Code.RESOURCE_EXHAUSTED, Code.OPERATION_CONFLICT})


class Call(msgspec.Struct, frozen=True):
    """One command call to run: the request that dispatched it and what the backend needs."""

    request_id: jsonrpc.Id
    dialect: Dialect
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


Action = Send | Dispatch | Cancel


class _Operation:
    """A Run/1 operation in this session: its signature, who waits for it, how it ended."""

    __slots__ = ("dispatcher", "outcome", "signature", "waiters")

    def __init__(self, signature: str, dispatcher: jsonrpc.Id | None) -> None:
        self.signature = signature
        self.dispatcher = dispatcher
        self.waiters: list[jsonrpc.Id] = [] if dispatcher is None else [dispatcher]
        self.outcome: Outcome | None = None


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
    ) -> None:
        """`remember`: how many finished operations keep their outcome in memory (None: all).

        Bound it only when the backend keeps operation identity itself (the journal): a
        forgotten operation asked again is dispatched, and the backend replays it.
        """
        self._tools = {tool.name: tool for tool in tools}
        self._tool_infos = tuple(tools)
        self._version = mcp.LATEST_VERSION
        self._tools_json = mcp.tools_list_json(tools, self._version)
        self._signature = signature
        self._server_name = server_name
        self._server_version = server_version
        self._tag = session_tag
        self._root_run = root_run
        self._slot = slot
        self._dialect: Dialect | None = None if protocol == "auto" else protocol
        self._initialized = False
        self._active: Call | None = None
        self._calls = 0
        self._operations: dict[str, _Operation] = {}
        self._remember = remember
        self._finished: collections.deque[str] = collections.deque()
        # Request ids awaiting an answer -> operation id (Run/1) or their own call (MCP).
        self._pending: dict[jsonrpc.Id, str] = {}
        self._silenced: set[jsonrpc.Id] = set()
        self._progress: dict[jsonrpc.Id, int] = {}

    @property
    def dialect(self) -> Dialect | None:
        """The dialect chosen so far, or None before the first deciding request."""
        return self._dialect

    @property
    def active(self) -> Call | None:
        """The Run/1 call currently running, if any (MCP calls run side by side)."""
        return self._active

    def receive(self, frame: bytes) -> list[Action]:
        """Handle one frame (without its b"\\n"); empty lines and stray responses are ignored."""
        if not frame.strip(_BLANK):
            return []
        message = jsonrpc.parse(frame)
        if type(message) is jsonrpc.Request:
            return self._request(message)
        if type(message) is jsonrpc.Notification:
            return self._notification(message)
        if type(message) is jsonrpc.Response:
            return []
        assert type(message) is jsonrpc.Rejected
        return [Send(jsonrpc.encode_error(message.id, message.code, message.message))]

    def oversized(self, size: int) -> bytes:
        """The answer to a frame that exceeded the limit and was discarded."""
        return jsonrpc.encode_error(
            None,
            jsonrpc.INVALID_REQUEST,
            f"Invalid Request: frame of at least {size:,} bytes exceeds the limit of "
            f"{MAX_FRAME_BYTES:,} bytes; it was discarded",
        )

    def finish(self, call: Call, outcome: Outcome) -> bytes:
        """Record how `call` ended and return every answer it completes."""
        if self._active is call:
            self._active = None
        self._progress.pop(call.request_id, None)
        if call.dialect == "flow":
            return self._finish_flow(call, outcome)
        self._pending.pop(call.request_id, None)
        if call.request_id in self._silenced:
            # MCP: the peer cancelled the request and expects no response to it.
            self._silenced.discard(call.request_id)
            return b""
        if isinstance(outcome, JigError):
            return jsonrpc.encode_result(
                call.request_id, mcp.failure_result(outcome, self._version)
            )
        return jsonrpc.encode_result(call.request_id, mcp.completed_result(outcome, self._version))

    def progress(self, call: Call, message: str) -> bytes:
        """A progress notification for `call`, or b"" when its caller asked for none."""
        if call.progress_token is None or call.request_id not in self._pending:
            return b""
        count = self._progress.get(call.request_id, 0) + 1
        self._progress[call.request_id] = count
        return mcp.progress_notification(call.progress_token, count, message)

    # -- requests ----------------------------------------------------------------------

    def _request(self, request: jsonrpc.Request) -> list[Action]:
        method = request.method
        if method == "ping":
            return [Send(jsonrpc.encode_raw_result(request.id, _PING_RESULT))]
        if method == "server/discover":
            return self._error(
                request.id,
                jsonrpc.METHOD_NOT_FOUND,
                "Method not found: server/discover; use the initialize handshake",
            )
        if self._dialect is None:
            if method == "initialize":
                self._dialect = "mcp"
            elif method in flow.CALL_METHODS:
                self._dialect = "flow"
            else:
                return self._before_initialize(request)
        if self._dialect == "flow":
            return self._flow_request(request)
        return self._mcp_request(request)

    def _before_initialize(self, request: jsonrpc.Request) -> list[Action]:
        """A known MCP method too early is -32600; any other method is -32601 (as the SDK)."""
        first = (
            "send initialize first"
            if self._dialect == "mcp"
            else "send initialize (MCP) or capability/call (FLOW Run/1) first"
        )
        if request.method in mcp.SESSION_METHODS:
            return self._error(
                request.id,
                jsonrpc.INVALID_REQUEST,
                f"Invalid Request: {request.method} before initialize; {first}",
            )
        return self._error(
            request.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {request.method}; {first}"
        )

    def _error(self, request_id: jsonrpc.Id | None, code: int, message: str) -> list[Action]:
        return [Send(jsonrpc.encode_error(request_id, code, message))]

    def _flow_request(self, request: jsonrpc.Request) -> list[Action]:
        if request.method not in flow.CALL_METHODS:
            return self._error(
                request.id,
                jsonrpc.METHOD_NOT_FOUND,
                f"Method not found: {request.method} (this session speaks FLOW Run/1)",
            )
        if not jsonrpc.is_run1_id(request.id):
            return self._error(
                request.id,
                jsonrpc.INVALID_REQUEST,
                "Invalid Request: id must be a string matching [A-Za-z0-9][A-Za-z0-9._:/-]* "
                "(1-128 bytes)",
            )
        if request.id in self._pending:
            return self._error(
                request.id, jsonrpc.INVALID_REQUEST, "Invalid Request: id is already in flight"
            )
        try:
            call = flow.parse_call(request.method, request.params)
        except flow.ParamsError as exc:
            return self._error(request.id, jsonrpc.INVALID_PARAMS, str(exc))
        signature = self._signature(call.signed_method, call.signed_params)
        operation = self._operations.get(call.operation_id)
        if operation is not None:
            if operation.signature != signature:
                conflict = JigError(
                    Code.OPERATION_CONFLICT,
                    f"operationId {call.operation_id!r} was reused differently",
                )
                return [Send(flow.encode_failure(request.id, conflict))]
            if operation.outcome is not None:
                return [Send(_encode_flow(request.id, operation.outcome))]
            operation.waiters.append(request.id)
            self._pending[request.id] = call.operation_id
            return []
        refusal = call.refusal
        if refusal is None and self._slot is not None and call.slot != self._slot:
            refusal = JigError(
                Code.UNAVAILABLE,
                f"slot {call.slot!r} is not served here; this server serves {self._slot!r}",
            )
        if refusal is not None:
            # Not remembered: the same call is refused the same way again, and a peer sending
            # refused calls forever must not grow the session (nothing ran, nothing to keep).
            return [Send(flow.encode_failure(request.id, refusal))]
        if self._active is not None:
            return [Send(flow.encode_failure(request.id, self._busy()))]
        self._operations[call.operation_id] = _Operation(signature, request.id)
        self._pending[request.id] = call.operation_id
        self._active = Call(
            request.id,
            "flow",
            call.operation_id,
            call.input,
            call.deadline_unix_ms,
            signature=signature,
            context=self._tag,
            root_run=self._root_run,
        )
        return [Dispatch(self._active)]

    def _busy(self) -> JigError:
        assert self._active is not None
        return JigError(
            Code.RESOURCE_EXHAUSTED,
            f"operation {self._active.operation_id!r} is still running in this session; "
            "a session runs one operation at a time",
        )

    def _mcp_request(self, request: jsonrpc.Request) -> list[Action]:
        method = request.method
        if method == "initialize":
            if self._initialized:
                return self._error(
                    request.id, jsonrpc.INVALID_REQUEST, "Invalid Request: already initialized"
                )
            if type(request.params) is not dict:
                return self._error(
                    request.id,
                    jsonrpc.INVALID_PARAMS,
                    "Invalid params: initialize params must be an object",
                )
            self._initialized = True
            version = mcp.negotiate_version(request.params)
            # Results and the tool list are shaped for the version agreed on.
            self._version = version
            self._tools_json = mcp.tools_list_json(self._tool_infos, version)
            result = mcp.initialize_result(
                version, self._server_name, self._server_version, root_run=self._root_run
            )
            return [Send(jsonrpc.encode_result(request.id, result))]
        if not self._initialized:
            return self._before_initialize(request)
        if method == "tools/list":
            return [Send(jsonrpc.encode_raw_result(request.id, self._tools_json))]
        if method == "tools/call":
            return self._tool_call(request)
        return self._error(request.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")

    def _tool_call(self, request: jsonrpc.Request) -> list[Action]:
        try:
            call = mcp.parse_tool_call(request.params)
        except mcp.ParamsError as exc:
            return self._error(request.id, jsonrpc.INVALID_PARAMS, str(exc))
        tool = self._tools.get(call.name)
        if tool is None:
            return self._error(
                request.id, jsonrpc.INVALID_PARAMS, f"Invalid params: unknown tool {call.name!r}"
            )
        if request.id in self._pending:
            return self._error(
                request.id, jsonrpc.INVALID_REQUEST, "Invalid Request: id is already in flight"
            )
        try:
            if tool.unavailable is not None:
                raise JigError(Code.UNAVAILABLE, f"command {tool.name!r}: {tool.unavailable}")
            arguments = mcp.call_input(call)
        except JigError as refusal:
            return [
                Send(jsonrpc.encode_result(request.id, mcp.failure_result(refusal, self._version)))
            ]
        self._calls += 1
        operation_id = f"mcp.{self._tag}.{self._calls}"
        self._pending[request.id] = operation_id
        dispatched = Call(
            request.id,
            "mcp",
            operation_id,
            arguments,
            progress_token=call.progress_token,
            context=self._tag,
            root_run=self._root_run,
        )
        return [Dispatch(dispatched)]

    # -- notifications -----------------------------------------------------------------

    def _notification(self, notification: jsonrpc.Notification) -> list[Action]:
        method = notification.method
        if method == flow.CANCEL_METHOD and self._dialect == "flow":
            return self._flow_cancel(flow.parse_cancel(notification.params))
        if method == "notifications/cancelled" and self._dialect == "mcp":
            request_id = mcp.parse_cancelled(notification.params)
            if request_id is not None and request_id in self._pending:
                self._silenced.add(request_id)
                return [Cancel(request_id)]
        # notifications/initialized and anything unknown: nothing to do, never answered.
        return []

    def _flow_cancel(self, request_id: str | None) -> list[Action]:
        operation_id = self._pending.get(request_id) if request_id is not None else None
        if request_id is None or operation_id is None:
            return []  # unknown or finished: a no-op
        operation = self._operations[operation_id]
        if request_id == operation.dispatcher:
            return [Cancel(request_id)]
        # A joined request stops waiting; the operation goes on for the request that started it.
        operation.waiters.remove(request_id)
        del self._pending[request_id]
        cancelled = JigError(
            Code.CANCELLED,
            f"request cancelled; operation {operation_id!r} continues for its other caller",
        )
        return [Send(flow.encode_failure(request_id, cancelled))]

    def _finish_flow(self, call: Call, outcome: Outcome) -> bytes:
        operation = self._operations[call.operation_id]
        if isinstance(outcome, JigError) and (
            outcome.code in _NOT_THE_OPERATIONS_OUTCOME or outcome.retryable
        ):
            # Nothing ran and nothing was recorded: the caller may retry the same operation.
            # OPERATION_CONFLICT from the backend: the journal holds another request under the
            # id; that request, sent next, must be answered from the journal, not refused here.
            del self._operations[call.operation_id]
        else:
            operation.outcome = outcome
            self._forget_old(call.operation_id)
        frames = []
        for request_id in operation.waiters:
            self._pending.pop(request_id, None)
            frames.append(_encode_flow(request_id, outcome))
        operation.waiters = []
        return b"".join(frames)

    def _forget_old(self, operation_id: str) -> None:
        """Keep at most `remember` finished outcomes; a long session must not grow forever."""
        if self._remember is None:
            return
        self._finished.append(operation_id)
        while len(self._finished) > self._remember:
            old = self._finished.popleft()
            operation = self._operations.get(old)
            if operation is not None and operation.outcome is not None:
                del self._operations[old]


def _encode_flow(request_id: jsonrpc.Id, outcome: Outcome) -> bytes:
    if isinstance(outcome, JigError):
        return flow.encode_failure(request_id, outcome)
    return flow.encode_success(request_id, outcome.evidence)
