"""The MCP dialect: both eras of one stdio process, its tool list, its calls and tasks.

The handshake era: `initialize` happens once, fixes the version the tool list and results
are shaped for, and selects that era for the process; before it only `ping` (and
`server/discover`) is served. The per-request era (2026-07-28, `mcp_era.py`): a request
carrying the `_meta` envelope is checked and served on its own, whatever came before;
`server/discover` is answered in every state without choosing an era, so a host may probe
and then send `initialize`. The first per-request call made before any `initialize` selects
the per-request era: a later `initialize` is -32022 naming the versions served.

MCP hosts call tools in parallel: every valid `tools/call` is dispatched at once (the backend
runs them side by side up to the free envelope slots and queues the rest); a refused one is
answered without dispatch. Every dispatched call is an operation of the caller's run in the
journal, under the caller's key (`_meta["dev.jigcmd/operationId"]`, whose retry replays), its
task id, or an id of its own. `notifications/cancelled` stops a call and suppresses its
response, as the specification asks; `tasks/cancel` stops a task (`mcp_tasks.py`).
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from jigcmd.attest.dsse import bundle_digest
from jigcmd.clock import unix_ms
from jigcmd.errors import Code, JigError
from jigcmd.protocol import jsonrpc, mcp_era
from jigcmd.protocol.actions import (
    Action,
    Call,
    Cancel,
    Fetch,
    Lookup,
    Outcome,
    Send,
    send_error,
)
from jigcmd.protocol.commands import Recorded, ToolInfo
from jigcmd.protocol.dialect import Resource, Settings
from jigcmd.protocol.mcp_era import SESSION_METHODS, Envelope, EnvelopeError, RequestKeys
from jigcmd.protocol.mcp_messages import (
    ATTESTATION_META,
    INSTRUCTIONS,
    REPORT_META,
    ToolCall,
    ToolCallParamsError,
    call_input,
    cursor_refusal,
    initialize_result,
    malformed_meta,
    parse_cancelled,
    parse_tool_call,
    progress_notification,
)
from jigcmd.protocol.mcp_resources import RESOURCE_METHODS, listed, read_answer, requested_uri
from jigcmd.protocol.mcp_results import completed_result, failure_result
from jigcmd.protocol.mcp_tasks import (
    TaskBook,
    TaskState,
    ended,
    is_task_id,
    new_task_id,
    no_task,
    task_fields,
)
from jigcmd.protocol.mcp_tools import tools_list_json
from jigcmd.protocol.mcp_versions import LATEST_VERSION, MODERN_VERSION, negotiate_version

__all__ = ["SESSION_METHODS", "McpDialect"]

_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/cancel", "tasks/update"})
# `tasks/update` of a task that is one: no task of this server ever asks for input.
_NO_INPUT_ASKED: Final = "it has no outstanding input request"
# Every method jigcmd serves in some era: each takes MCP's `_meta` (`malformed_meta`).
_METHODS: Final = SESSION_METHODS | _TASK_METHODS | {"initialize", "ping", "server/discover"}
Era = Literal["undecided", "handshake", "per-request"]


class _Pending(msgspec.Struct):
    """A dispatched call: the shape of its answer and what it hands back."""

    operation_id: str
    version: str
    trace: dict[str, str]
    task_id: str | None = None


class McpDialect:
    """The MCP state of one process: the era, the agreed version, the calls and tasks."""

    def __init__(self, settings: Settings) -> None:
        """Start undecided, with the tool list shaped for the latest handshake version."""
        self._tools = {tool.name: tool for tool in settings.tools}
        self._tool_infos = settings.tools
        self._version = LATEST_VERSION
        self._budget = settings.result_budget
        self._tools_json = tools_list_json(settings.tools, self._version, self._budget)
        self._server_info = {"name": settings.server_name, "version": settings.server_version}
        self._signature = settings.signature
        self._tag = settings.session_tag
        self._root_run = settings.root_run
        self._era: Era = "undecided"
        self._calls = 0
        # Request ids awaiting an answer -> their call.
        self._pending: dict[jsonrpc.Id, _Pending] = {}
        # Task id -> its call, while it runs.
        self._task_calls: dict[str, _Pending] = {}
        self._tasks = TaskBook()
        self._silenced: set[jsonrpc.Id] = set()
        self._progress: dict[jsonrpc.Id, int] = {}
        # A `resources/read` awaiting its bytes -> the version its answer is shaped for.
        self._fetch_versions: dict[jsonrpc.Id, str] = {}
        self._modern_tools = self._modern_tools_json()

    def request(self, request: jsonrpc.Request) -> list[Action] | Call:
        """Serve a request of either era; an unknown method is -32601."""
        if request.method in _METHODS and (problem := malformed_meta(request.params)):
            # Before the era is read: a `_meta` that is no object holds no envelope either.
            return send_error(request.id, jsonrpc.INVALID_PARAMS, problem)
        if mcp_era.claims_envelope(request.params):
            envelope = mcp_era.read_envelope(request.params)
            if isinstance(envelope, EnvelopeError):
                return [Send(envelope.frame(request.id))]
            return self._per_request(request, envelope)
        return self._handshake(request)

    def started(self, call: Call) -> None:
        """The call is running: it is answered (or silenced) when it finishes."""

    def refuse(self, request_id: jsonrpc.Id, error: JigError) -> bytes:
        """A refusal is a tool error result, not a protocol error."""
        return jsonrpc.encode_result(request_id, failure_result(error, self._version, self._budget))

    def notification(self, notification: jsonrpc.Notification) -> list[Action]:
        """`notifications/cancelled` stops a call in flight; anything else needs nothing."""
        if notification.method == "notifications/cancelled":
            request_id = parse_cancelled(notification.params)
            pending = self._pending.get(request_id) if request_id is not None else None
            if request_id is not None and pending is not None:
                self._silenced.add(request_id)
                return [Cancel(request_id, pending.task_id)]
        # notifications/initialized and anything unknown: nothing to do, never answered.
        return []

    def owned(self, call: Call, created_unix_ms: int) -> bytes:
        """The journal holds the call's operation: a task's `CreateTaskResult` goes out now."""
        if call.task_id is None or call.request_id in self._silenced:
            # A request the peer cancelled gets no answer, a task's creation included.
            return b""
        task = self._tasks.announce(call.task_id, created_unix_ms)
        if task is None:
            return b""
        del self._pending[call.request_id]
        self._silenced.discard(call.request_id)
        created = mcp_era.modern_result(task_fields(task), self._server_info, result_type="task")
        return jsonrpc.encode_result(call.request_id, created)

    def finish(self, call: Call, outcome: Outcome) -> bytes:
        """The call's tool result, or nothing when the peer cancelled it or it is a task."""
        if call.task_id is not None and not self._tasks.awaits_announcement(call.task_id):
            pending = self._task_calls.pop(call.task_id)
            task = self._tasks.finish(call.task_id)
            # When the journal row says it ended, as `tasks/get` after a restart says.
            ended(task, outcome, self._result(pending, outcome), outcome.ended_unix_ms or unix_ms())
            return b""
        if call.task_id is not None:
            # Refused before the journal held it: answered directly, no task was created.
            self._task_calls.pop(call.task_id, None)
            self._tasks.drop(call.task_id)
        self._progress.pop(call.request_id, None)
        pending = self._pending.pop(call.request_id)
        if call.request_id in self._silenced:
            # The peer cancelled the request and expects no response to it.
            self._silenced.discard(call.request_id)
            return b""
        return jsonrpc.encode_result(call.request_id, self._result(pending, outcome))

    def progress(
        self, call: Call, message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> bytes:
        """A `notifications/progress` frame when the caller sent a progress token.

        `progress` is the elapsed milliseconds when known (else a count), always increasing.
        """
        if (
            call.progress_token is None
            or call.task_id is not None
            or call.request_id not in self._pending
        ):
            # The Tasks extension has no progress for tasks.
            return b""
        last = self._progress.get(call.request_id, 0)
        value = max(last + 1, elapsed_ms if elapsed_ms is not None else 0)
        self._progress[call.request_id] = value
        return progress_notification(call.progress_token, value, message, total_ms)

    def fetched(self, request_id: jsonrpc.Id, found: Resource | str) -> bytes:
        """The `resources/read` answer, in the era the read came in (`mcp_resources`)."""
        version = self._fetch_versions.pop(request_id, self._version)
        return read_answer(request_id, found, version, self._server_info)

    def tools_changed(self, tools: tuple[ToolInfo, ...]) -> bytes:
        """Re-admission changed the catalog: `notifications/tools/list_changed` when initialized.

        The per-request era has no notifications outside a request: its clients re-list
        when the `ttlMs` of their cached list runs out.
        """
        self._tools = {tool.name: tool for tool in tools}
        self._tool_infos = tools
        self._tools_json = tools_list_json(tools, self._version, self._budget)
        self._modern_tools = self._modern_tools_json()
        if self._era != "handshake":
            return b""
        return jsonrpc.encode_notification("notifications/tools/list_changed", {})

    def recorded(self, lookup: Lookup, found: Recorded | None) -> bytes:
        """Answer a `tasks/get`, `tasks/cancel` or `tasks/update` for a task only the journal
        knows."""
        if found is None:
            return no_task(lookup.request_id, lookup.operation_id)
        if lookup.method == "tasks/update":
            return no_task(lookup.request_id, lookup.operation_id, _NO_INPUT_ASKED)
        if lookup.method == "tasks/cancel":
            if found.open:
                # Only the server that runs it can stop it: an ack would say it stops.
                why = (
                    "it is not run by this server: its row is open in the journal, run by "
                    "another jigcmd server of this run, which alone can stop it, or left by "
                    "one that died, which recovery closes (`jigcmd recover`); nothing was "
                    "cancelled"
                )
                return no_task(lookup.request_id, lookup.operation_id, why)
            # Ended: as for a task of this server's that ended, the ack is all.
            return self._ack(lookup.request_id)
        task = TaskState(lookup.operation_id, found.created_unix_ms, found.updated_unix_ms)
        if found.open:
            task.message = "running (recorded in the journal; not by this server)"
        else:
            assert found.outcome is not None
            pending = _Pending(lookup.operation_id, MODERN_VERSION, {})
            ended(task, found.outcome, self._result(pending, found.outcome), found.updated_unix_ms)
        return self._task_answer(lookup.request_id, task)

    # The handshake era.

    def _handshake(self, request: jsonrpc.Request) -> list[Action] | Call:
        method = request.method
        if method == "initialize":
            return self._initialize(request)
        if self._era == "per-request" or method == "server/discover":
            return [Send(mcp_era.without_envelope(method, request.params).frame(request.id))]
        if method == "ping":
            return [Send(jsonrpc.encode_raw_result(request.id, b"{}"))]
        if self._era != "handshake":
            return _before_initialize(request)
        if method == "tools/list":
            return cursor_refusal(request) or [
                Send(jsonrpc.encode_raw_result(request.id, self._tools_json))
            ]
        if method == "tools/call":
            return self._tool_call(request, None)
        if method in RESOURCE_METHODS:
            return self._resources(request, self._version)
        return send_error(request.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")

    def _resources(self, request: jsonrpc.Request, version: str) -> list[Action]:
        """`resources/read` of a run's resource (the shell reads it), or a list."""
        if request.method != "resources/read":
            return listed(request, version, self._server_info)
        uri = requested_uri(request)
        if not isinstance(uri, str):
            return uri
        self._fetch_versions[request.id] = version
        return [Fetch(request.id, uri, self._root_run or self._tag)]

    def _initialize(self, request: jsonrpc.Request) -> list[Action]:
        if self._era == "per-request":
            params = request.params if type(request.params) is dict else {}
            requested = params.get("protocolVersion")
            refusal = mcp_era.unsupported_version(
                requested if type(requested) is str else "",
                message="Unsupported protocol version: this process serves MCP "
                f"{MODERN_VERSION} per request since its first such call; initialize is "
                "not part of it",
            )
            return [Send(refusal.frame(request.id))]
        if self._era == "handshake":
            return send_error(
                request.id, jsonrpc.INVALID_REQUEST, "Invalid Request: already initialized"
            )
        if type(request.params) is not dict:
            return send_error(
                request.id,
                jsonrpc.INVALID_PARAMS,
                "Invalid params: initialize params must be an object",
            )
        self._era = "handshake"
        version = negotiate_version(request.params)
        # Results and the tool list are shaped for the version agreed on.
        self._version = version
        self._tools_json = tools_list_json(self._tool_infos, version, self._budget)
        result = initialize_result(
            version,
            self._server_info["name"],
            self._server_info["version"],
            root_run=self._root_run,
        )
        return [Send(jsonrpc.encode_result(request.id, result))]

    # The per-request era.

    def _per_request(self, request: jsonrpc.Request, envelope: Envelope) -> list[Action] | Call:
        method = request.method
        if method == "server/discover":
            result = mcp_era.discover_result(self._server_info, INSTRUCTIONS)
            return [Send(jsonrpc.encode_result(request.id, result))]
        if method in mcp_era.HANDSHAKE_ONLY or method not in SESSION_METHODS | _TASK_METHODS:
            return send_error(
                request.id,
                jsonrpc.METHOD_NOT_FOUND,
                f"Method not found: {method} (MCP {envelope.version})",
            )
        if self._era == "undecided":
            self._era = "per-request"
        if method == "tools/list":
            return cursor_refusal(request) or [
                Send(jsonrpc.encode_raw_result(request.id, self._modern_tools))
            ]
        if method == "tools/call":
            return self._tool_call(request, envelope)
        if method in RESOURCE_METHODS:
            return self._resources(request, envelope.version)
        if not envelope.tasks:
            return [Send(mcp_era.missing_tasks_capability(method).frame(request.id))]
        return self._task_request(request)

    def _modern_tools_json(self) -> bytes:
        listed = msgspec.json.decode(
            tools_list_json(self._tool_infos, MODERN_VERSION, self._budget)
        )
        # The catalogue is this operator's Binding: cached per client, for a minute.
        listed |= {"ttlMs": mcp_era.TOOLS_TTL_MS, "cacheScope": "private"}
        return jsonrpc.encode_json(mcp_era.modern_result(listed, self._server_info))

    def _task_request(self, request: jsonrpc.Request) -> list[Action]:
        params = request.params if type(request.params) is dict else {}
        task_id = params.get("taskId")
        if type(task_id) is not str:
            return send_error(
                request.id, jsonrpc.INVALID_PARAMS, "Invalid params: /taskId must be a string"
            )
        task = self._tasks.get(task_id)
        if task is None:
            # An unknown id is said to be one, `tasks/update`'s too (the journal's answer).
            if not is_task_id(task_id) or not self._root_run:
                return [Send(no_task(request.id, task_id))]
            return [Lookup(request.id, request.method, task_id, self._root_run)]
        if request.method == "tasks/update":
            return [Send(no_task(request.id, task_id, _NO_INPUT_ASKED))]
        if request.method == "tasks/cancel":
            actions: list[Action] = [Send(self._ack(request.id))]
            if self._tasks.running(task_id):
                actions.insert(0, Cancel(request.id, task_id))
            return actions
        return [Send(self._task_answer(request.id, task))]

    def _task_answer(self, request_id: jsonrpc.Id, task: TaskState) -> bytes:
        result = mcp_era.modern_result(task_fields(task), self._server_info)
        return jsonrpc.encode_result(request_id, result)

    def _ack(self, request_id: jsonrpc.Id) -> bytes:
        return jsonrpc.encode_result(request_id, mcp_era.modern_result({}, self._server_info))

    # Tool calls, both eras.

    def _result(self, pending: _Pending, outcome: Outcome) -> dict[str, Any]:
        if isinstance(outcome, JigError):
            result = failure_result(outcome, pending.version, self._budget)
        else:
            result = completed_result(outcome, pending.version, self._budget)
        if outcome.attestation is not None:
            result["_meta"] = dict(result.get("_meta", {})) | {
                ATTESTATION_META: {
                    "digest": bundle_digest(outcome.attestation),
                    "runId": self._root_run,
                    "operationId": pending.operation_id,
                }
            }
        if pending.trace:
            meta = dict(result.get("_meta", {}))
            if REPORT_META in meta:
                # Kept with the run's report too, beside its measurements.
                meta[REPORT_META] = msgspec.to_builtins(meta[REPORT_META]) | {
                    "trace": pending.trace
                }
            result["_meta"] = meta | pending.trace
        if pending.version == MODERN_VERSION:
            return mcp_era.modern_result(result, self._server_info)
        return result

    def _tool_call(
        self, request: jsonrpc.Request, envelope: Envelope | None
    ) -> list[Action] | Call:
        try:
            call = parse_tool_call(request.params)
        except ToolCallParamsError as exc:
            return send_error(request.id, jsonrpc.INVALID_PARAMS, str(exc))
        keys = mcp_era.read_request_keys(request.params)
        if isinstance(keys, EnvelopeError):
            return [Send(keys.frame(request.id))]
        tool = self._tools.get(call.name)
        if tool is None:
            return send_error(
                request.id, jsonrpc.INVALID_PARAMS, f"Invalid params: unknown tool {call.name!r}"
            )
        version = self._version if envelope is None else envelope.version
        pending = _Pending("", version, keys.trace())
        try:
            if tool.unavailable is not None:
                raise JigError(Code.UNAVAILABLE, f"command {tool.name!r}: {tool.unavailable}")
            arguments = call_input(call, tool, request.fault)
        except JigError as refusal:
            return [Send(jsonrpc.encode_result(request.id, self._result(pending, refusal)))]
        return self._dispatch(request.id, call, arguments, pending, keys=keys, envelope=envelope)

    def _dispatch(
        self,
        request_id: jsonrpc.Id,
        call: ToolCall,
        arguments: dict[str, Any],
        pending: _Pending,
        *,
        keys: RequestKeys,
        envelope: Envelope | None,
    ) -> Call:
        # Durable only within a caller's run; a call with its own key is answered directly
        # (the key is its durable handle: a retry replays).
        durable = bool(self._root_run)
        task_id = None
        if envelope is not None and envelope.tasks and durable and keys.operation_id is None:
            task_id = new_task_id()
            self._tasks.create(task_id, request_id)
        self._calls += 1
        operation_id = keys.operation_id or task_id or f"mcp.{self._tag}.{self._calls}"
        pending.operation_id = operation_id
        pending.task_id = task_id
        self._pending[request_id] = pending
        if task_id is not None:
            self._task_calls[task_id] = pending
        signature = (
            self._signature("tools/call", {"name": call.name, "arguments": call.arguments})
            if durable
            else None
        )
        return Call(
            request_id,
            "mcp",
            operation_id,
            arguments,
            progress_token=call.progress_token,
            signature=signature,
            context=self._tag,
            root_run=self._root_run,
            task_id=task_id,
            trace=pending.trace or None,
        )


def _before_initialize(request: jsonrpc.Request) -> list[Action]:
    """A session method too early is -32600; any other method is -32601 (as the SDK)."""
    if request.method in SESSION_METHODS:
        return send_error(
            request.id,
            jsonrpc.INVALID_REQUEST,
            f"Invalid Request: {request.method} before initialize; send initialize first",
        )
    return send_error(
        request.id,
        jsonrpc.METHOD_NOT_FOUND,
        f"Method not found: {request.method}; send initialize first",
    )
