"""The FLOW Run/1 dialect: `capability/call` (alias `effect/call`) and `request/cancel`.

Params are exactly `operationId`, `slot`, `method`, `input`, plus `channels` on
`capability/call` and the documented jigcmd extension `deadlineUnixMs` (the caller's remaining
deadline as Unix milliseconds). A params object of the wrong shape is a JSON-RPC -32602; a
well-formed call that cannot be served (`channels`, a method other than `run`) carries a
refusal that the session answers, after the operation-identity check, without dispatching.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from jigcmd.contract import LOCAL_NAME_MAX_CHARS, LOCAL_NAME_PATTERN, RUN_METHOD
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence
from jigcmd.protocol import jsonrpc

__all__ = [
    "CALL_METHODS",
    "CANCEL_METHOD",
    "FlowCall",
    "ParamsError",
    "encode_failure",
    "encode_success",
    "parse_call",
    "parse_cancel",
]

CALL_METHODS: Final = frozenset({"capability/call", "effect/call"})
CANCEL_METHOD: Final = "request/cancel"

_LOCAL_NAME = re.compile(LOCAL_NAME_PATTERN)
_REQUIRED = ("operationId", "slot", "method", "input")
_OPTIONAL = {
    "capability/call": frozenset({"channels", "deadlineUnixMs"}),
    "effect/call": frozenset({"deadlineUnixMs"}),
}


class ParamsError(ValueError):
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
    """Check a `capability/call` / `effect/call` params object; raise `ParamsError` if malformed."""
    if type(params) is not dict:
        raise ParamsError(f"Invalid params: {rpc_method} params must be an object")
    unknown = params.keys() - set(_REQUIRED) - _OPTIONAL[rpc_method]
    if unknown:
        raise ParamsError(f"Invalid params: unknown member /{sorted(unknown)[0]}")
    for name in _REQUIRED:
        if name not in params:
            raise ParamsError(f"Invalid params: missing /{name}")
    operation_id = params["operationId"]
    if not jsonrpc.is_run1_id(operation_id):
        raise ParamsError(
            "Invalid params: /operationId must match [A-Za-z0-9][A-Za-z0-9._:/-]* (1-128 bytes)"
        )
    if not _is_local_name(params["slot"]):
        raise ParamsError("Invalid params: /slot must be a LocalName (^[a-z0-9]+(?:-[a-z0-9]+)*$)")
    method = params["method"]
    if not _is_local_name(method):
        raise ParamsError(
            "Invalid params: /method must be a LocalName (^[a-z0-9]+(?:-[a-z0-9]+)*$)"
        )
    deadline = params.get("deadlineUnixMs")
    if deadline is not None and (type(deadline) is not int or deadline < 0):
        raise ParamsError("Invalid params: /deadlineUnixMs must be a non-negative integer")
    if "deadlineUnixMs" in params and deadline is None:
        raise ParamsError("Invalid params: /deadlineUnixMs must be a non-negative integer")
    channels = params.get("channels", {})
    if type(channels) is not dict:
        raise ParamsError("Invalid params: /channels must be an object")
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
        data["details"] = error.details
    return jsonrpc.encode_error(request_id, jsonrpc.OPERATION_FAILED, error.message, data)
