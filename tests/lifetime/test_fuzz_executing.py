"""Hypothesis over a real `jigcmd serve` with executing calls mixed in.

Each example is one FLOW Run/1 session: valid `capability/call` frames that really run a
candidate (operation ids drawn from a small pool, so replays and conflicts happen), mutated
call frames, pings, `request/cancel` for live, finished and unknown ids, and garbage lines.
Frames go out in chunks; a chunk ending with an executing call is answered before the next
is sent, so calls execute one after another instead of being refused as concurrent. After
EOF: the server exited 0 without an internal error, stdout held only JSON-RPC frames, every
request was answered exactly once, and nothing of any run was left on the host.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jigcmd.errors import Code
from tests.lifetime.candidates import QUICK
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

_CODES = {code.value for code in Code}
_EVIDENCE_FIELDS = 10


@dataclass(frozen=True)
class Frame:
    """One line to send; `request_id` when it is a request that must be answered once."""

    data: bytes
    request_id: str | int | None = None
    executes: bool = False


def _line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _request(request_id: str | int, method: str, params: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _call_params(operation: str, variant: int, deadline_ms: int | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "operationId": operation,
        "slot": "command",
        "method": "run",
        "input": {"command": "cli", "files": {"src/cli.ts": QUICK}, "args": [f"v{variant}"]},
    }
    if deadline_ms is not None:
        params["deadlineUnixMs"] = max(0, time.time_ns() // 1_000_000 + deadline_ms)
    return params


# Safe integers only: a frame holding one beyond ±(2^53-1) anywhere is not a request under
# strict JSON/1 (it is answered as a parse error with id null, see tests/jsonio), so the
# call it was drawn for would never be answered under its id.
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutate(draw: st.DrawFn, params: dict[str, Any]) -> dict[str, Any]:
    """A call's params broken in one of the ways a confused or hostile caller would."""
    mutated: dict[str, Any] = json.loads(json.dumps(params))
    kind = draw(
        st.sampled_from(["drop", "retype", "command", "path", "extra", "channels", "method"])
    )
    if kind == "drop":
        del mutated[draw(st.sampled_from(sorted(mutated)))]
    elif kind == "retype":
        mutated[draw(st.sampled_from(sorted(mutated)))] = draw(_json_values)
    elif kind == "command":
        mutated["input"]["command"] = draw(st.text(max_size=10))
    elif kind == "path":
        path = draw(st.sampled_from(["../x.ts", "/abs.ts", "src/../../x.ts", "", "a\0b"]))
        mutated["input"]["files"] = {path: "x", **mutated["input"]["files"]}
    elif kind == "extra":
        mutated[draw(st.text(min_size=1, max_size=8))] = draw(_json_values)
    elif kind == "channels":
        mutated["channels"] = {"events": {}}
    else:
        mutated["method"] = draw(st.sampled_from(["stop", "", "RUN"]))
    return mutated


_GARBAGE = st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b" ")),
    st.text(max_size=40).map(lambda t: t.replace("\n", " ").encode()),
    st.sampled_from(
        [
            b"[]",
            b'[{"jsonrpc":"2.0","id":"b","method":"ping"}]',
            b'{"jsonrpc":"2.0"}',
            b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
            b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
            b'{"jsonrpc":"2.0","method":5}',
            b'{"a":1,"a":2}',
            b"\xef\xbb\xbf{}",
            b"\xff\xfe",
            b"[" * 500,
            b"",
        ]
    ),
)


@st.composite
def sessions(draw: st.DrawFn) -> list[Frame]:
    """A session's frames: executing calls, mutated calls, pings, cancels and garbage."""
    frames: list[Frame] = []
    operations = [f"op-{name}" for name in "abc"]
    sent_calls: list[str] = []
    for serial in range(1, draw(st.integers(3, 12)) + 1):
        request_id = f"q-{serial}"
        kind = draw(
            st.sampled_from(["call", "call", "mutated", "ping", "cancel", "garbage", "badid"])
        )
        if kind == "call":
            deadline = draw(st.none() | st.none() | st.integers(-1000, 20_000))
            params = _call_params(
                draw(st.sampled_from(operations)), draw(st.integers(0, 1)), deadline
            )
            message = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "capability/call",
                "params": params,
            }
            frames.append(Frame(_line(message), request_id, executes=True))
            sent_calls.append(request_id)
        elif kind == "mutated":
            params = _mutate(draw, _call_params(f"op-m{serial}", 0, None))
            method = draw(st.sampled_from(["capability/call", "effect/call"]))
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            frames.append(Frame(_line(message), request_id))
        elif kind == "ping":
            frames.append(
                Frame(_line({"jsonrpc": "2.0", "id": request_id, "method": "ping"}), request_id)
            )
        elif kind == "cancel":
            target = draw(st.sampled_from([*sent_calls, "q-unknown"]))
            message = {
                "jsonrpc": "2.0",
                "method": "request/cancel",
                "params": {"requestId": target},
            }
            # Sometimes right behind the call it cancels, in the same write.
            if frames and frames[-1].executes and draw(st.booleans()):
                last = frames.pop()
                frames.append(Frame(last.data + _line(message), last.request_id, executes=True))
            else:
                frames.append(Frame(_line(message)))
        elif kind == "badid":
            # A string outside the request-id grammar, or an integer (valid JSON-RPC only).
            drawn = draw(st.sampled_from([f"bad id {serial}", str(serial * 1000 + 7)]))
            bad_id: str | int = int(drawn) if drawn.isdigit() else drawn
            params = _call_params(draw(st.sampled_from(operations)), 0, None)
            frames.append(Frame(_line(_request(bad_id, "capability/call", params)), bad_id))
        else:
            frames.append(Frame(draw(_GARBAGE) + b"\n"))
    return frames


def _check_frame(line: bytes) -> dict[str, Any]:
    """Every stdout line is one JSON-RPC 2.0 response with a well-formed result or error."""
    message = json.loads(line)
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line
    assert "id" in message and ("result" in message) != ("error" in message), line
    if "error" in message:
        error = message["error"]
        assert isinstance(error["code"], int) and 1 <= len(error["message"]) <= 1024, line
        if error["code"] == -32000:
            assert set(error["data"]) <= {"code", "details"}, line
            assert error["data"]["code"] in _CODES, line
    elif isinstance(message["result"], dict) and "value" in message["result"]:
        assert list(message["result"]) == ["value"], line
        assert len(message["result"]["value"]) == _EVIDENCE_FIELDS, line
    return message


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(frames=sessions(), prefix=st.uuids())
def test_a_real_server_survives_executing_fuzzed_sessions_and_leaves_nothing(
    rig: Rig, frames: list[Frame], prefix: object
) -> None:
    """No crash, only valid frames on stdout, each request answered once, nothing left."""
    server = rig.serve(protocol="flow")
    tag = f"{prefix}".replace("-", "")[:12]
    requests: list[str | int] = []
    for frame in frames:
        # Operation ids are per example: the state directory is shared by all examples.
        server.send_bytes(frame.data.replace(b'"op-', f'"{tag}-op-'.encode()))
        if frame.request_id is not None:
            requests.append(frame.request_id)
        if frame.executes:
            for request_id in requests:
                server.response(request_id)
            requests = []
    for request_id in requests:
        server.response(request_id)
    assert server.close_input() == 0, server.stderr()
    stderr = server.stderr()
    assert "protocol core failed" not in stderr and "command backend failed" not in stderr, stderr
    answered = [_check_frame(line)["id"] for line in server.lines]
    sent = [f.request_id for f in frames if f.request_id is not None]
    for request_id in sent:
        assert answered.count(request_id) == 1, (request_id, server.lines)
    others = [a for a in answered if a not in sent and not str(a).startswith("ready-")]
    assert all(a is None for a in others), others
    rig.assert_nothing_left()
