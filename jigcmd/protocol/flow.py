"""The FLOW Run/1 dialect: `capability/call` (alias `effect/call`) and `request/cancel`.

Params are exactly `operationId`, `slot`, `method`, `input`, plus `channels` on
`capability/call` and the documented jigcmd extension `deadlineUnixMs` (the caller's remaining
deadline as Unix milliseconds). A params object of the wrong shape is a JSON-RPC -32602; a
well-formed call that cannot be served (`channels`, a method other than `run`) carries a
refusal that is answered, after the operation-identity check, without dispatching.

Operation identity is kept here for the session: the same `operationId` with the same
signature replays its recorded outcome, or, while it runs, is dispatched as one more waiter
on it (each transport request is its own waiter; the backend shares the run among the live
ones and stops it only when none remains); a different signature is `OPERATION_CONFLICT`,
before dispatch. Beyond the session (across restarts with the same run id) the backend's
journal keeps it, and the session remembers no more than the journal replays (`finish`):
otherwise one run would give one operation two answers. The seed's rule that a session runs
one operation at a time is the session's guard (`session.py`).
"""

from __future__ import annotations

import collections
import re
from typing import Any, Final

import msgspec

from jigcmd.contract import LOCAL_NAME_MAX_CHARS, LOCAL_NAME_PATTERN, RUN_METHOD
from jigcmd.errors import Code, JigError, bounded_details, operation_conflict
from jigcmd.evidence import Evidence
from jigcmd.policy.request import not_strict
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.actions import Action, Call, Cancel, Outcome, Send, Warn, send_error
from jigcmd.protocol.commands import ToolInfo
from jigcmd.protocol.dialect import Resource, Settings

__all__ = [
    "CALL_METHODS",
    "CANCEL_METHOD",
    "ID_REFUSED",
    "FlowCall",
    "FlowDialect",
    "RunParamsError",
    "call_without_id",
    "encode_failure",
    "encode_outcome",
    "encode_success",
    "parse_call",
    "parse_cancel",
]

CALL_METHODS: Final = frozenset({"capability/call", "effect/call"})
CANCEL_METHOD: Final = "request/cancel"
# The answer to a request whose id is not a Run/1 id (README, "FLOW Run/1").
ID_REFUSED: Final = (
    "Invalid Request: id must be a string matching [A-Za-z0-9][A-Za-z0-9._:/-]* (1-128 bytes)"
)
_PING_RESULT: Final = b"{}"

_LOCAL_NAME = re.compile(LOCAL_NAME_PATTERN)
_REQUIRED = ("operationId", "slot", "method", "input")
_OPTIONAL = {
    "capability/call": frozenset({"channels", "deadlineUnixMs"}),
    "effect/call": frozenset({"deadlineUnixMs"}),
}


class RunParamsError(ValueError):
    """Raised when call params do not have the Run/1 shape; answered with -32602."""


# Params that do not make an operation another one.
_UNSIGNED = frozenset({"operationId", "deadlineUnixMs"})


class FlowCall(msgspec.Struct, frozen=True):
    """One well-formed Run/1 capability call."""

    operation_id: str
    slot: str
    input: Any
    deadline_unix_ms: int | None
    # `{method, params without operationId and deadlineUnixMs}` for the signature; the two method
    # names are one call, so the signature uses `capability/call` for both.
    signed_method: str
    signed_params: dict[str, Any]
    # Set when the call is well-formed but cannot be served; answered without dispatch.
    refusal: JigError | None = None


def _is_local_name(value: object) -> bool:
    return (
        type(value) is str
        and len(value) <= LOCAL_NAME_MAX_CHARS
        and _LOCAL_NAME.fullmatch(value) is not None
    )


def parse_call(rpc_method: str, params: object) -> FlowCall:
    """Check a `capability/call` / `effect/call` params object (`RunParamsError` if malformed)."""
    if type(params) is not dict:
        raise RunParamsError(f"Invalid params: {rpc_method} params must be an object")
    unknown = params.keys() - set(_REQUIRED) - _OPTIONAL[rpc_method]
    if unknown:
        raise RunParamsError(f"Invalid params: unknown member /{sorted(unknown)[0]}")
    for name in _REQUIRED:
        if name not in params:
            raise RunParamsError(f"Invalid params: missing /{name}")
    operation_id = params["operationId"]
    if not jsonrpc.is_run1_id(operation_id):
        raise RunParamsError(
            "Invalid params: /operationId must match [A-Za-z0-9][A-Za-z0-9._:/-]* (1-128 bytes)"
        )
    if not _is_local_name(params["slot"]):
        raise RunParamsError(
            "Invalid params: /slot must be a LocalName (^[a-z0-9]+(?:-[a-z0-9]+)*$)"
        )
    method = params["method"]
    if not _is_local_name(method):
        raise RunParamsError(
            "Invalid params: /method must be a LocalName (^[a-z0-9]+(?:-[a-z0-9]+)*$)"
        )
    deadline = params.get("deadlineUnixMs")
    if deadline is not None and (type(deadline) is not int or deadline < 0):
        raise RunParamsError("Invalid params: /deadlineUnixMs must be a non-negative integer")
    if "deadlineUnixMs" in params and deadline is None:
        raise RunParamsError(
            "Invalid params: /deadlineUnixMs must be a non-negative integer, not null "
            "(leave it out for no deadline of the call's own)"
        )
    channels = params.get("channels", {})
    if type(channels) is not dict:
        raise RunParamsError("Invalid params: /channels must be an object")
    refusal = None
    if channels:
        refusal = JigError(Code.UNAVAILABLE, "channels are not supported by project-command")
    elif method != RUN_METHOD:
        refusal = JigError(
            Code.UNAVAILABLE, f"method {method!r} is not offered; project-command offers only 'run'"
        )
    # Transport ids and timing are not the operation's identity: the same operation re-sent
    # with another deadline is the same operation (it joins or replays).
    signed = {key: value for key, value in params.items() if key not in _UNSIGNED}
    return FlowCall(
        operation_id=operation_id,
        slot=params["slot"],
        input=params["input"],
        deadline_unix_ms=deadline,
        signed_method="capability/call",
        signed_params=signed,
        refusal=refusal,
    )


def call_without_id(notification: jsonrpc.Notification) -> list[Action]:
    """A `capability/call` sent as a notification: never answered, so never run; say so."""
    params = notification.params
    found = params.get("operationId") if type(params) is dict else None
    named = f" (operationId {found!r})" if jsonrpc.is_run1_id(found) else ""
    return [
        Warn(
            f"{notification.method}{named} was not run: it has no id, so it is a "
            "notification and could not be answered; send it with an id"
        )
    ]


def parse_cancel(params: object) -> str | None:
    """The request id a `request/cancel` names, or None when the notification is malformed."""
    if type(params) is dict:
        request_id = params.get("requestId")
        if jsonrpc.is_run1_id(request_id):
            return request_id
    return None


def encode_success(request_id: jsonrpc.Id, evidence: Evidence) -> bytes:
    """The success frame: exactly `{"value": evidence}`."""
    return jsonrpc.encode_result(request_id, {"value": evidence})


def encode_failure(request_id: jsonrpc.Id, error: JigError) -> bytes:
    """The failure frame: -32000, the message, and `data: {code, details?}` and nothing else."""
    data: dict[str, object] = {"code": error.code.value}
    if error.details is not None:
        data["details"] = bounded_details(error.details)
    return jsonrpc.encode_error(request_id, jsonrpc.OPERATION_FAILED, error.message, data)


def encode_outcome(request_id: jsonrpc.Id, outcome: Outcome) -> bytes:
    """The frame answering `request_id` with how its operation ended."""
    if isinstance(outcome, JigError):
        return encode_failure(request_id, outcome)
    return encode_success(request_id, outcome.evidence)


class _Operation:
    """A Run/1 operation in this session: its signature, its requests in flight, its outcome."""

    __slots__ = ("outcome", "requests", "signature")

    def __init__(self, signature: str) -> None:
        self.signature = signature
        self.requests: set[jsonrpc.Id] = set()
        self.outcome: Outcome | None = None


class FlowDialect:
    """The Run/1 state of one session: its operations and the requests waiting on them."""

    def __init__(self, settings: Settings) -> None:
        """`settings.remember`: how many finished operations keep their outcome (None: all).

        Bound it only when the backend keeps operation identity itself (the journal): a
        forgotten operation asked again is dispatched, and the backend replays it.
        """
        self._signature = settings.signature
        self._slot = settings.slot
        self._tag = settings.session_tag
        self._root_run = settings.root_run
        self._remember = settings.remember
        self._operations: dict[str, _Operation] = {}
        self._finished: collections.deque[str] = collections.deque()
        # Request ids awaiting an answer -> the operation they wait for.
        self._pending: dict[jsonrpc.Id, str] = {}

    def request(self, request: jsonrpc.Request) -> list[Action] | Call:
        """Answer, join or replay a call, or return the new operation's call to dispatch."""
        # The id rule comes first, for every method: an id Run/1 refuses is never served.
        if not jsonrpc.is_run1_id(request.id):
            return send_error(request.id, jsonrpc.INVALID_REQUEST, ID_REFUSED)
        if request.method == "ping":
            return [Send(jsonrpc.encode_raw_result(request.id, _PING_RESULT))]
        if request.method == CANCEL_METHOD:
            return send_error(
                request.id,
                jsonrpc.INVALID_REQUEST,
                f"Invalid Request: {CANCEL_METHOD} is a notification: send it without an id "
                "(nothing was cancelled)",
            )
        if request.method not in CALL_METHODS:
            return send_error(
                request.id,
                jsonrpc.METHOD_NOT_FOUND,
                f"Method not found: {request.method} (this session speaks FLOW Run/1)",
            )
        try:
            call = parse_call(request.method, request.params)
        except RunParamsError as exc:
            return send_error(request.id, jsonrpc.INVALID_PARAMS, str(exc))
        if request.fault is not None:
            # Before the signature: input that is not strict JSON has no one meaning to sign
            # (a repeated key), or cannot be encoded at all (a lone surrogate). Not remembered.
            fault = not_strict(request.fault.pointer, request.fault.problem)
            return [Send(encode_failure(request.id, fault))]
        signature = self._signature(call.signed_method, call.signed_params)
        operation = self._operations.get(call.operation_id)
        if operation is not None:
            if operation.signature != signature:
                running = operation.outcome is None
                conflict = operation_conflict(call.operation_id, running=running)
                return [Send(encode_failure(request.id, conflict))]
            if operation.outcome is not None:
                return [Send(encode_outcome(request.id, operation.outcome))]
            # In flight: this request is one more waiter on it, dispatched to the backend,
            # which shares the one run among its live waiters (`jigcmd.command.sharing`).
            return self._call(request.id, call, signature)
        refusal = call.refusal
        if refusal is None and self._slot is not None and call.slot != self._slot:
            refusal = JigError(
                Code.UNAVAILABLE,
                f"slot {call.slot!r} is not served here; this server serves {self._slot!r}",
            )
        if refusal is not None:
            # Not remembered: the same call is refused the same way again, and a peer sending
            # refused calls forever must not grow the session (nothing ran, nothing to keep).
            return [Send(encode_failure(request.id, refusal))]
        return self._call(request.id, call, signature)

    def _call(self, request_id: jsonrpc.Id, call: FlowCall, signature: str) -> Call:
        return Call(
            request_id,
            "flow",
            call.operation_id,
            call.input,
            call.deadline_unix_ms,
            signature=signature,
            context=self._tag,
            root_run=self._root_run,
        )

    def started(self, call: Call) -> None:
        """The request is waiting on its operation: later calls of the operation join it."""
        assert call.signature is not None
        operation = self._operations.get(call.operation_id)
        if operation is None:
            operation = self._operations[call.operation_id] = _Operation(call.signature)
        operation.requests.add(call.request_id)
        self._pending[call.request_id] = call.operation_id

    def refuse(self, request_id: jsonrpc.Id, error: JigError) -> bytes:
        """A failure frame; the refused operation is not remembered."""
        return encode_failure(request_id, error)

    def notification(self, notification: jsonrpc.Notification) -> list[Action]:
        """`request/cancel` ends that request's wait; the backend decides what it stops."""
        if notification.method in CALL_METHODS:
            return call_without_id(notification)
        if notification.method != CANCEL_METHOD:
            return []
        request_id = parse_cancel(notification.params)
        if request_id is None or request_id not in self._pending:
            return []  # unknown or finished: a no-op
        # The request is one waiter: it is answered CANCELLED, and the run stops only when
        # no other waiter remains (then its answer carries the run's evidence).
        return [Cancel(request_id)]

    def finish(self, call: Call, outcome: Outcome) -> bytes:
        """Answer the request, and remember the outcome if it is the operation's own.

        The session remembers exactly what the journal replays: a completed run, or a failure
        its row recorded (`JigError.recorded`). Anything else is this request's own end and
        nothing ran for the operation: a refusal before dispatch (its deadline had passed, a
        cancel, UNAVAILABLE, INVALID_INPUT), one waiter's cancel or deadline while another
        waits, no slot, a row that could not be written, or OPERATION_CONFLICT from the
        journal (the request it holds, sent next, must be answered from it). Remembered, such
        an answer would be replayed here while another server of the same run, or this one
        restarted, runs the operation: one operationId, two answers.
        """
        self._pending.pop(call.request_id, None)
        frame = encode_outcome(call.request_id, outcome)
        operation = self._operations.get(call.operation_id)
        if operation is None:
            return frame  # already answered and forgotten (`remember`)
        operation.requests.discard(call.request_id)
        if isinstance(outcome, JigError) and not outcome.recorded:
            if not operation.requests and operation.outcome is None:
                del self._operations[call.operation_id]
        elif operation.outcome is None:
            operation.outcome = outcome
            self._forget_old(call.operation_id)
        return frame

    def progress(
        self, call: Call, message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> bytes:
        """Nothing: Run/1 has no progress notifications."""
        return b""

    def fetched(self, request_id: jsonrpc.Id, found: Resource | str) -> bytes:
        """Nothing: Run/1 never asks for a resource."""
        return b""

    def tools_changed(self, tools: tuple[ToolInfo, ...]) -> bytes:
        """Nothing: Run/1 has no tool list."""
        return b""

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
