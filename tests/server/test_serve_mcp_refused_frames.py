"""Frames refused before any dialect reads them are answered with the request's id.

What Node's `JSON.stringify` writes for a string cut inside an emoji is a lone surrogate
escape, and an SDK waits for its id until its timeout (60 s): so a `tools/call` whose
arguments hold one is the tool's own `INVALID_INPUT` naming the JSON pointer, a lone
surrogate elsewhere is -32700 with the id, and a frame over 16 MiB is -32600 with the id
its first 64 KiB or its last member name (the SDK writes `id` last). Driven in raw frames
on the real `jigcmd serve`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.protocol.framing import MAX_FRAME_BYTES
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

_HELLO = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize",'
    b'"params":{"protocolVersion":"2025-11-25","capabilities":{}}}\n'
)


def _call(request_id: int, arguments: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"cli","arguments":'
        % request_id
        + arguments
        + b"}}\n"
    )


def test_refused_frames_are_answered_with_their_requests_id(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    with ServeChild(binding, ["--state-dir", str(tmp_path / "state")]) as server:
        server.send_bytes(_HELLO)
        assert "result" in server.answer(0)
        server.send_bytes(_call(1, b'{"files":{"src/cli.ts":"console.log(\'cut \\ud83d\')"}}'))
        server.send_bytes(_call(2, b'{"files":{"src/cli.ts":"1"},"args":["\\udc00"]}'))
        server.send_bytes(_call(3, b'{"files":{"src/\\ud83d.ts":"1"}}'))
        for request_id, pointer, escape in (
            (1, "/files/src~1cli.ts", "\\ud83d"),
            (2, "/args/0", "\\udc00"),
        ):
            result = server.answer(request_id)["result"]
            assert result["isError"] is True
            assert result["_meta"]["jigcmd/error"] == {
                "code": "INVALID_INPUT",
                "details": {"pointer": pointer, "rule": "strict-json"},
            }
            text = result["content"][0]["text"]
            assert text == (
                f"INVALID_INPUT: {pointer}: lone surrogate escape {escape}; "
                "input must be strict JSON"
            )
        # A key is named with its lone surrogate escaped, so the answer encodes.
        named = server.answer(3)["result"]["_meta"]["jigcmd/error"]["details"]["pointer"]
        assert named == "/files/src~1\\ud83d.ts"
        # Outside the arguments: -32700, still with the id.
        server.send_bytes(
            b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cli\\ud83d"}}\n'
        )
        refused = server.answer(4)["error"]
        assert refused["code"] == -32700 and "lone surrogate" in refused["message"]
        server.send_bytes(_call(5, b'{"files":{"src/cli.ts":"' + b"x" * MAX_FRAME_BYTES + b'"}}'))
        too_large = server.answer(5)["error"]
        assert too_large["code"] == -32600 and "exceeds the limit" in too_large["message"]
        # As the TypeScript SDK writes it (JSON.stringify): the id last, 17 MB after the start.
        big = b'{"files":{"src/cli.ts":"' + b"x" * MAX_FRAME_BYTES + b'"}}'
        server.send_bytes(
            b'{"method":"tools/call","params":{"name":"cli","arguments":'
            + big
            + b'},"jsonrpc":"2.0","id":"last"}\n'
        )
        assert server.answer("last")["error"]["code"] == -32600
        server.send_bytes(_call(6, b'{"files":{"src/cli.ts":"console.log(6)"}}'))
        assert server.answer(6)["result"]["structuredContent"]["stdout"]["head"] == "6\n"
        assert server.close_input() == 0
