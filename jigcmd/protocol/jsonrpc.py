"""JSON-RPC 2.0 messages: classify one decoded frame, and encode replies as single-line frames.

Only what a server needs: incoming requests and notifications, outgoing results, errors and
notifications. Batches are not supported (one -32600 answers a top-level array), and anything
that is not a request or notification is answered with -32600 and, when unreadable, `"id": null`.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Final

import msgspec

from jigcmd.contract import OPERATION_ID_MAX_BYTES, OPERATION_ID_PATTERN
from jigcmd.errors import bounded
from jigcmd.jsonio import faults
from jigcmd.jsonio.faults import Fault
from jigcmd.jsonio.strict import (
    MAX_SAFE_INTEGER,
    Malformed,
    NestingTooDeep,
    StrictJSONError,
    loads,
)

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "OPERATION_FAILED",
    "PARSE_ERROR",
    "Fault",
    "Id",
    "Notification",
    "Rejected",
    "Request",
    "Response",
    "classify",
    "encode_duplicate",
    "encode_error",
    "encode_json",
    "encode_notification",
    "encode_raw_result",
    "encode_result",
    "is_mcp_id",
    "is_run1_id",
    "leading_id",
    "parse",
    "scanned_id",
    "trailing_id",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# FLOW Run/1 operational failures; `data.code` carries the `jigcmd.errors.Code`.
OPERATION_FAILED: Final = -32000

_RUN1_ID = re.compile(OPERATION_ID_PATTERN)

Id = str | int


class Request(msgspec.Struct, frozen=True):
    """A call the peer expects exactly one answer to."""

    id: Id
    method: str
    # None when absent; otherwise an object or an array, as JSON-RPC allows.
    params: dict[str, Any] | list[Any] | None
    # Where the call's input (`INPUT_MEMBERS`) breaks a strict JSON/1 rule, all else in the
    # frame being strict: the dialect refuses the call naming it, and never runs its input.
    fault: Fault | None = None


class Notification(msgspec.Struct, frozen=True):
    """A message that is never answered."""

    method: str
    params: dict[str, Any] | list[Any] | None


class Response(msgspec.Struct, frozen=True):
    """A response from the peer: this server sends no requests, so it answers nothing."""

    id: Id | None


class Rejected(msgspec.Struct, frozen=True):
    """A frame that gets an error answer before any dialect looks at it."""

    code: int
    message: str
    id: Id | None = None
    # The frame is a request whose id is neither a string nor an integer: a dialect with a
    # stricter id rule words the refusal as its own (`DialectEntry.id_refused`); `method`
    # lets an undecided session word it as the dialect that method would open.
    bad_id: bool = False
    method: str | None = None


# The Run/1 id grammar as every refusal of an id (a request's, a run's, an operation's) words it.
RUN1_ID_RULE: Final = "[A-Za-z0-9][A-Za-z0-9._:/-]* (1-128 bytes)"


def is_run1_id(value: object) -> bool:
    """True for a FLOW Run/1 request id: the request-id grammar, 1-128 bytes."""
    # The grammar is ASCII, so characters and bytes coincide once it matches.
    return (
        type(value) is str
        and 0 < len(value) <= OPERATION_ID_MAX_BYTES
        and _RUN1_ID.fullmatch(value) is not None
    )


def is_mcp_id(value: object) -> bool:
    """True for an MCP request id: a string or an integer (never null, never a boolean)."""
    return type(value) is str or type(value) is int


# The params member that is a call's input, by method: a strict JSON/1 fault only there is
# the call's own refusal (`INVALID_INPUT` naming its pointer), as any other invalid input is.
INPUT_MEMBERS: Final = {
    "capability/call": "input",
    "effect/call": "input",
    "tools/call": "arguments",
}


def parse(frame: bytes) -> Request | Notification | Response | Rejected:
    """Decode and classify one frame; strict JSON/1 failures become -32700.

    The request's id is answered whenever the frame is JSON's syntax (a client waits for
    its id, not for null): only a malformed text or a fault in the id itself (a repeated
    "id", an unsafe integer, a lone surrogate) leaves it unknown.
    """
    try:
        message = loads(frame)
    except NestingTooDeep as exc:
        # Well-formed but too deep to take apart safely: still answer the request's id.
        return Rejected(INVALID_REQUEST, f"Invalid Request: {exc}", _sound_id(frame))
    except Malformed as exc:
        return Rejected(PARSE_ERROR, f"Parse error: {exc}")
    except StrictJSONError as exc:
        return _broken_rule(frame, exc)
    return classify(message)


def _broken_rule(
    frame: bytes, exc: StrictJSONError
) -> Request | Notification | Response | Rejected:
    """JSON's syntax with a strict rule broken: the call, carrying its fault, when only its
    input breaks one; otherwise -32700 naming the first fault, with the id if it is sound."""
    decoded = faults.decode(frame)
    if decoded is None:
        # Too large to take apart (or not the stdlib's syntax): the rule, with a scanned id.
        return Rejected(PARSE_ERROR, f"Parse error: {exc}", _scanned_id(frame))
    value = decoded.value
    request_id = _decoded_id(value)
    if decoded.bytes_fault is not None:
        # A fault of the frame's bytes comes before any of its values (and its input's).
        return Rejected(PARSE_ERROR, f"Parse error: {decoded.bytes_fault}", request_id)
    skip = _input_path(value)
    outside = faults.first_fault(value, skip)
    if outside is None and skip is not None:
        assert isinstance(value, dict)
        inside = faults.first_fault(value["params"][skip[1]])
        message = classify(faults.plain(value))
        if inside is not None and type(message) is Request:
            return Request(message.id, message.method, message.params, inside)
        if inside is not None:
            return message
    text = f"{outside.problem} at '{outside.pointer}'" if outside is not None else str(exc)
    return Rejected(PARSE_ERROR, f"Parse error: {text}", request_id)


def _input_path(value: object) -> list[str | int] | None:
    """The path of the call's input member (`INPUT_MEMBERS`), when the frame has one."""
    if not isinstance(value, dict):
        return None
    method = value.get("method")
    member = INPUT_MEMBERS.get(method) if type(method) is str else None
    params = value.get("params")
    if member is None or not isinstance(params, dict) or member not in params:
        return None
    return ["params", member]


def _sound_id(frame: bytes) -> Id | None:
    """The top-level id of a frame refused whole, when sound: decoded, else scanned."""
    decoded = faults.decode(frame)
    return _scanned_id(frame) if decoded is None else _decoded_id(decoded.value)


def _decoded_id(value: object) -> Id | None:
    """The top-level id of a `faults.decode`d frame, unless it is at fault or repeated."""
    found = value.get("id") if isinstance(value, dict) else None
    sound = is_mcp_id(found) and faults.first_fault(found) is None
    return found if sound and not faults.repeats(value, "id") else None


def _scanned_id(frame: bytes) -> Id | None:
    """The top-level id of a frame no decoder takes: `scanned_id` of its two ends."""
    return scanned_id(frame, frame[_ID_SCAN_BYTES:][-_ID_TAIL_BYTES:])


# Strings, structural characters, and any other run of bytes up to one of those or JSON
# white space (a number, `null`, `true`, `NaN`, `-Infinity`, stray text): every value is
# one token, so the token after `"id":` is the id's whole value.
# A string left open runs to the end (one token): were it no token, the scan would try again
# at each quote inside it, each time to the end (15 s for 64 KiB of `\\"`).
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"?|[{}\[\]:,]|[^"{}\[\]:, \t\n\r]+')
# How far into a frame too deep to decode the top-level "id" is looked for.
_ID_SCAN_BYTES = 64 * 1024


def leading_id(frame: bytes) -> Id | None:
    """The top-level "id" of a frame the decoder cannot take, if in its first 64 KiB.

    A scan of tokens (strings, brackets, other values), bounded by those 64 KiB: for a frame too
    deep, one breaking a strict rule, or the head of one too large to keep. None when the
    id is written twice there.
    """
    return _safe_id(_scan_id(frame))


def scanned_id(head: bytes, tail: bytes) -> Id | None:
    """The top-level "id" of a frame known by its `head` and a `tail` past the head's first
    64 KiB: `leading_id`, else `trailing_id`; None when the two ends name an id each.
    """
    found = _scan_id(head)
    last = trailing_id(tail)
    if found is _ABSENT:
        return last
    # Two "id" members (one in each end, or two in the head), or one the head cut off: the
    # frame's id is unknown.
    return None if last is not None else _safe_id(found)


def _safe_id(found: object) -> Id | None:
    if type(found) is int:
        # An id beyond ±(2^53-1) is refused as the client sent it: no answer can name it.
        return found if -MAX_SAFE_INTEGER <= found <= MAX_SAFE_INTEGER else None
    return found if type(found) is str else None


# The last member of a frame's top-level object, when it is "id": in a valid text the final
# `}` closes the top-level object, so what sits just before it is a top-level member.
# How far from a frame's end its trailing "id" is looked for (an id is short).
_ID_TAIL_BYTES = 4 * 1024
_TRAILING_ID = re.compile(rb',\s*"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*}\s*\Z')


def trailing_id(tail: bytes) -> Id | None:
    """The top-level "id" of a frame whose last bytes are `tail`, if it is the last member.

    Where the TypeScript SDK's `JSON.stringify` writes it; one anchored match over the last
    4 KiB at most.
    """
    found = _TRAILING_ID.search(tail[-_ID_TAIL_BYTES:])
    if found is None:
        return None
    text = found.group(1)
    if text[:1] == b'"':
        with contextlib.suppress(msgspec.DecodeError):
            return str(msgspec.json.decode(text))
        return None
    number = int(text)
    return number if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER else None


# What `_scan_id` says of an "id" it did not see; and of one it saw twice, or whose key or
# value the 64 KiB cut off (the frame's id is then unknown).
_ABSENT = object()
_UNKNOWN = object()
_ID_KEY = b'"id"'
# Where the scan of the top-level object stands: before a key, before `:`, before a value.
_KEY, _COLON, _VALUE, _AFTER = range(4)


def _scan_id(frame: bytes) -> object:
    """The value of the top-level "id" in the first 64 KiB (None when it is not a string or
    an integer), `_ABSENT`, or `_UNKNOWN`: written twice there, or cut off by the 64 KiB."""
    end = min(len(frame), _ID_SCAN_BYTES)
    cut = len(frame) >= _ID_SCAN_BYTES  # the frame may go on past the bytes scanned
    depth, state, id_member, found = 0, _AFTER, False, _ABSENT
    for token in _TOKEN.finditer(frame, 0, end):
        text = token.group()
        first = text[:1]
        unfinished = cut and token.end() == end
        if depth == 1 and state == _VALUE:
            state = _AFTER
            if id_member and found is not _ABSENT:
                return _UNKNOWN
            if id_member:
                found = _UNKNOWN if unfinished else _scalar(text)
        if first in (b"{", b"["):
            depth += 1
            state = _KEY if depth == 1 and first == b"{" else state
        elif first in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and first == b":":
            state = _VALUE
        elif depth == 1 and first == b"," and state == _AFTER:
            state = _KEY
        elif depth == 1 and first == b'"' and state == _KEY:
            # An "id" key the cut may have shortened (`"i`) could be the id's.
            id_member = _is_id_key(text) or (unfinished and _may_be_id_key(text))
            state = _COLON
    if cut and depth == 1 and id_member and state in (_COLON, _VALUE):
        # The window ends between the "id" key and its value: the frame's id is unknown.
        return _UNKNOWN
    return found


def _may_be_id_key(key: bytes) -> bool:
    """True for the start of an "id" key (or of an escaped key, which might spell it)."""
    return _ID_KEY.startswith(key) or b"\\" in key


def _is_id_key(key: bytes) -> bool:
    """True for the key "id", however escaped (`"\\u0069d"` is "id" too)."""
    if key == _ID_KEY:
        return True
    if b"\\" not in key:
        return False
    with contextlib.suppress(msgspec.DecodeError):
        return bool(msgspec.json.decode(key) == "id")
    return False


def _scalar(text: bytes) -> object:
    """A string or integer token as its value; None for anything else."""
    if text[:1] == b'"':
        with contextlib.suppress(msgspec.DecodeError):
            return msgspec.json.decode(text)
    elif _INTEGER.fullmatch(text):
        return int(text)
    return None


# A JSON integer: a fraction, an exponent, a leading zero or a lone `-` is no integer id.
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)")


def classify(message: object) -> Request | Notification | Response | Rejected:
    """Classify one decoded JSON value as a request, a notification or an invalid request."""
    if type(message) is not dict:
        if type(message) is list:
            return Rejected(INVALID_REQUEST, "Invalid Request: batches are not supported")
        return Rejected(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    raw_id = message.get("id")
    readable_id = raw_id if is_mcp_id(raw_id) else None
    method = message.get("method")
    if message.get("jsonrpc") != "2.0":
        return Rejected(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', readable_id)
    if type(method) is not str:
        if "result" in message or "error" in message:
            # A stray response (we never send requests): ignored, as the MCP SDK's server
            # does; answering it could start an error ping-pong with a confused peer.
            return Response(readable_id)
        return Rejected(INVALID_REQUEST, 'Invalid Request: "method" must be a string', readable_id)
    params = message.get("params")
    if params is not None and type(params) is not dict and type(params) is not list:
        return Rejected(
            INVALID_REQUEST, 'Invalid Request: "params" must be an object or an array', readable_id
        )
    if "params" in message and params is None:
        return Rejected(INVALID_REQUEST, 'Invalid Request: "params" must not be null', readable_id)
    extra = message.keys() - {"jsonrpc", "id", "method", "params"}
    if extra:
        names = ", ".join(sorted(extra))
        return Rejected(INVALID_REQUEST, f"Invalid Request: unknown members: {names}", readable_id)
    if "id" not in message:
        return Notification(method, params)
    if readable_id is None:
        return Rejected(
            INVALID_REQUEST,
            'Invalid Request: "id" must be a string or an integer',
            bad_id=True,
            method=method,
        )
    return Request(readable_id, method, params)


_encode = msgspec.json.Encoder().encode


def encode_result(request_id: Id, result: object) -> bytes:
    """One response frame carrying `result`."""
    return _encode({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n"


def encode_raw_result(request_id: Id, result_json: bytes) -> bytes:
    """One response frame whose result is already-encoded JSON (cached answers)."""
    return b'{"jsonrpc":"2.0","id":' + _encode(request_id) + b',"result":' + result_json + b"}\n"


def encode_error(request_id: Id | None, code: int, message: str, data: object = None) -> bytes:
    """One error response frame; `data` is omitted when None.

    Every error answer is encoded here, so here its message is bounded (`errors.bounded`):
    one that quotes the peer's text (a method, a member name) is never longer than 1,024.
    """
    error: dict[str, object] = {"code": code, "message": bounded(message)}
    if data is not None:
        error["data"] = data
    return _encode({"jsonrpc": "2.0", "id": request_id, "error": error}) + b"\n"


def encode_duplicate(request_id: Id) -> bytes:
    """The answer to a request reusing the id of one still in flight: `"id": null`.

    Under its own id the refusal would be taken for the original's answer (a client matches
    answers by id) and the original's real answer dropped; JSON-RPC 2.0 answers a request
    whose id cannot be told apart with null. The id is named in the message instead.
    """
    return encode_error(
        None,
        INVALID_REQUEST,
        f"Invalid Request: id {_encode(request_id).decode()} is already in flight; this "
        "request was not served, and the request in flight is answered under that id",
    )


def encode_notification(method: str, params: object) -> bytes:
    """One notification frame."""
    return _encode({"jsonrpc": "2.0", "method": method, "params": params}) + b"\n"


def encode_json(value: object) -> bytes:
    """Encode a value once, for answers that are cached as bytes."""
    return _encode(value)
