"""Hypothesis: no frame makes the sans-IO session raise or emit anything but JSON-RPC frames."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jigcmd.errors import Code, JigError
from jigcmd.jsonio.strict import loads
from jigcmd.policy.digests import operation_signature
from jigcmd.protocol.commands import Recorded, RunResult
from jigcmd.protocol.session import Dispatch, Lookup, Send, Session
from tests.protocol.fake_server import REPORT, TOOLS, canned_evidence

VALID_FRAMES = [
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cli","arguments":{"files":{"a.ts":"x"}},"_meta":{"progressToken":1}}}',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}',
    b'{"jsonrpc":"2.0","id":"r","method":"capability/call","params":{"operationId":"o","slot":"s","method":"run","input":{}}}',
    b'{"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"r"}}',
    b'{"jsonrpc":"2.0","id":"p","method":"ping"}',
    # MCP 2026-07-28: discover, a list, a task call, its polling and cancel, an old version.
    b'{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
    b'{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
    b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"cli","arguments":{"files":{"a.ts":"x"}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}',
    b'{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"task-00000000000000000000000000000001","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}',
    b'{"jsonrpc":"2.0","id":7,"method":"tasks/cancel","params":{"taskId":"task-00000000000000000000000000000001","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}',
    b'{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}',
]


def mutate(frame: bytes, data: st.DataObject) -> bytes:
    text = bytearray(frame)
    for _ in range(data.draw(st.integers(0, 4))):
        position = data.draw(st.integers(0, len(text)))
        insert = data.draw(st.binary(max_size=3) | st.sampled_from([b'"', b"{", b"}", b":", b","]))
        end = position + data.draw(st.integers(0, 3))
        text[position:end] = insert
    return bytes(text)


def assert_frames(data: bytes) -> None:
    """Every emitted line is a strict JSON-RPC 2.0 object."""
    assert data == b"" or data.endswith(b"\n")
    for line in data.splitlines():
        message = loads(line)
        assert isinstance(message, dict)
        assert message["jsonrpc"] == "2.0"
        assert ("id" in message) != ("method" in message)
        if "id" in message:
            assert ("result" in message) != ("error" in message)


@given(st.lists(st.sampled_from(VALID_FRAMES) | st.binary(max_size=40), max_size=12), st.data())
def test_any_frame_sequence_yields_only_json_rpc_frames(
    frames: list[bytes], data: st.DataObject
) -> None:
    """Arbitrary and mutated frames never raise and only ever produce valid frames."""
    # With a run id, per-request calls that declare the Tasks extension become tasks.
    root_run = data.draw(st.sampled_from(["", "run-fuzz"]))
    session = Session(TOOLS, signature=operation_signature, root_run=root_run)
    for raw in frames:
        frame = mutate(raw, data) if data.draw(st.booleans()) else raw
        for action in session.receive(frame):
            if isinstance(action, Send):
                assert_frames(action.data)
            elif isinstance(action, Lookup):
                found = data.draw(
                    st.sampled_from(
                        [
                            None,
                            Recorded(True, 1, 2),
                            Recorded(False, 1, 2, JigError(Code.UNCERTAIN, "u")),
                        ]
                    )
                )
                assert_frames(session.recorded(action, found))
            elif isinstance(action, Dispatch):
                if data.draw(st.booleans()):
                    assert_frames(session.owned(action.call, 1))
                assert_frames(session.progress(action.call, "working"))
                outcome = (
                    RunResult(canned_evidence("cli"), REPORT)
                    if data.draw(st.booleans())
                    else JigError(Code.INVALID_INPUT, "bad")
                )
                assert_frames(session.finish(action.call, outcome))
