"""Input that is not strict JSON/1 is the call's own `INVALID_INPUT`, answered under its id.

A duplicate key, a lone surrogate, NaN or an unsafe integer inside a Run/1 call's `input`
(spec-notes §4: "is invalid too") or a `tools/call`'s `arguments` is refused naming its JSON
pointer, rule `strict-json`: a Flow runtime's pending call never settles on `"id": null`.
Elsewhere in the frame it is -32700 with the id; only a fault in the id itself leaves the
id unknown. Raw frames, as a peer writes them, on the real `jigcmd serve`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

_FILES = b'"files":{"src/cli.ts":"console.log(1)"'


def _flow(request_id: bytes, input_members: bytes, params: bytes = b"") -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":"' + request_id + b'","method":"capability/call","params":'
        b'{"operationId":"op-'
        + request_id
        + b'","slot":"command","method":"run",'
        + params
        + b'"input":{'
        + input_members
        + b"}}}\n"
    )


@pytest.mark.parametrize(
    ("members", "pointer", "problem"),
    [
        (_FILES + b',"src/cli.ts":"x"},"command":"cli"', "/files/src~1cli.ts", "duplicate key"),
        (b'"command":"cli","command":"tests",' + _FILES + b"}", "/command", "duplicate key"),
        (b'"command":"cli","stdin":"\\ud83d",' + _FILES + b"}", "/stdin", "lone surrogate"),
        (b'"command":"cli","stdin":NaN,' + _FILES + b"}", "/stdin", "NaN and Infinity"),
        (b'"command":"cli","args":[9007199254740993],' + _FILES + b"}", "/args/0", "integer"),
    ],
)
def test_a_run1_input_that_is_not_strict_json_is_invalid_input_under_the_calls_id(
    tmp_path: Path, members: bytes, pointer: str, problem: str
) -> None:
    """The id is answered, with INVALID_INPUT naming where the input breaks the rule."""
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--protocol", "flow"]
    with ServeChild(binding, args) as server:
        server.send_bytes(_flow(b"d1", members))
        error = server.answer("d1")["error"]
        assert error["code"] == -32000
        assert error["data"] == {
            "code": "INVALID_INPUT",
            "details": {"pointer": pointer, "rule": "strict-json"},
        }
        assert error["message"].startswith(f"{pointer}: {problem}")
        assert error["message"].endswith("; input must be strict JSON")
        assert server.close_input() == 0


def test_a_repeated_key_elsewhere_is_a_parse_error_with_the_id_unless_it_is_the_id(
    tmp_path: Path,
) -> None:
    """-32700 names the pointer; a repeated "id" is the one that leaves the id unknown."""
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--protocol", "flow"]
    with ServeChild(binding, args) as server:
        server.send_bytes(_flow(b"d2", _FILES + b'},"command":"cli"', b'"slot":"command",'))
        error = server.answer("d2")["error"]
        assert error == {
            "code": -32700,
            "message": "Parse error: duplicate key \"slot\" at '/params/slot'",
        }
        server.send_bytes(b'{"jsonrpc":"2.0","id":"d3","id":"d4","method":"ping"}\n')
        error = server.answer(None)["error"]
        assert error == {"code": -32700, "message": "Parse error: duplicate key \"id\" at '/id'"}
        assert server.close_input() == 0


def test_a_repeated_key_in_tools_call_arguments_is_the_tools_invalid_input(
    tmp_path: Path,
) -> None:
    """As a lone surrogate there: an `isError` result naming the pointer, never run."""
    binding = admit_example(tmp_path)
    with ServeChild(binding, ["--state-dir", str(tmp_path / "state")]) as server:
        server.send_bytes(
            b'{"jsonrpc":"2.0","id":0,"method":"initialize",'
            b'"params":{"protocolVersion":"2025-11-25","capabilities":{}}}\n'
        )
        assert "result" in server.answer(0)
        server.send_bytes(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cli",'
            b'"arguments":{' + _FILES + b',"src/cli.ts":"x"}}}}\n'
        )
        result = server.answer(1)["result"]
        assert result["isError"] is True
        assert result["_meta"]["jigcmd/error"] == {
            "code": "INVALID_INPUT",
            "details": {"pointer": "/files/src~1cli.ts", "rule": "strict-json"},
        }
        text = result["content"][0]["text"]
        assert text == (
            'INVALID_INPUT: /files/src~1cli.ts: duplicate key "src/cli.ts"; '
            "input must be strict JSON"
        )
        assert server.close_input() == 0


def test_frames_broken_in_their_bytes_or_ids_are_answered_as_the_docs_say(tmp_path: Path) -> None:
    """A repeated id is null whatever else is wrong; a BOM is the frame's fault, under the id;
    a repeated lone-surrogate key in a top-level array is answered in words that encode."""
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--protocol", "flow"]
    with ServeChild(binding, args) as server:
        server.send_bytes(b'{"jsonrpc":"2.0","id":"A","id":"B","method":"ping","x":"\xff"}\n')
        assert server.answer(None)["error"] == {
            "code": -32700,
            "message": "Parse error: invalid UTF-8 at byte 56",
        }
        server.send_bytes(b"\xef\xbb\xbf" + _flow(b"b1", b'"command":"cli","command":"cli"'))
        assert server.answer("b1")["error"] == {
            "code": -32700,
            "message": "Parse error: byte order mark is not allowed (byte 0)",
        }
        server.send_bytes(b'[{"\\ud800":1,"\\ud800":2}]\n')
        assert server.answer(None)["error"] == {
            "code": -32700,
            "message": "Parse error: lone surrogate escape \\ud800 at '/0/\\ud800'",
        }
        server.ping("p1")
        assert server.close_input() == 0
        assert "protocol core failed" not in server.stderr()
