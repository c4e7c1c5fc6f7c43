"""Hypothesis against the real process: arbitrary and mutated input never breaks the wire."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jigcmd.jsonio.strict import loads
from tests.server.wire_process import ServerProcess

CORPUS = [
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tests","arguments":{"files":{"a.ts":"x"}}}}',
    b'{"jsonrpc":"2.0","id":"r","method":"capability/call","params":{"operationId":"o","slot":"s","method":"run","input":{"command":"cli","files":{"a":"b"}}}}',
    b'{"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"r"}}',
    b'{"jsonrpc":"2.0","id":"p","method":"ping"}',
]
_sentinels = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = ServerProcess()
    yield process
    process.stop()


def mutated(data: st.DataObject) -> bytes:
    text = bytearray(data.draw(st.sampled_from(CORPUS)))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        end = position + data.draw(st.integers(0, 4))
        text[position:end] = data.draw(st.binary(max_size=3))
    return bytes(text)


def assert_only_frames_until_sentinel(server: ServerProcess, sentinel: str) -> None:
    """Read answers up to the sentinel ping's; each must be one strict JSON-RPC object."""
    while True:
        line = server.read_line()
        assert line.endswith(b"\n"), f"server stopped or wrote a partial line: {line!r}"
        message = loads(line[:-1])
        assert isinstance(message, dict)
        assert message["jsonrpc"] == "2.0"
        if message.get("id") == sentinel:
            assert message["result"] == {}
            return


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_arbitrary_and_mutated_input_yields_only_valid_frames(
    server: ServerProcess, data: st.DataObject
) -> None:
    """Whatever arrives, the server stays up and stdout carries only JSON-RPC frames."""
    payload = data.draw(st.binary(max_size=200)) if data.draw(st.booleans()) else mutated(data)
    sentinel = f"sentinel-{next(_sentinels)}"
    server.send(
        payload + b"\n" + b'{"jsonrpc":"2.0","id":"' + sentinel.encode() + b'","method":"ping"}\n'
    )
    assert_only_frames_until_sentinel(server, sentinel)
    assert server.process.poll() is None
