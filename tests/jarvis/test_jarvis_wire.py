"""The real server in-process, over raw loopback sockets: bodies cut short, heads, h11's errors.

The bounded protocol and uvicorn are the real ones (`live_server`); the executor is a spy.
Bounds named in the tests are failsafes, never timing claims.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anyio
import pytest

from jigcmd.jarvis.connections import DEFAULT_LIMITS, ConnectionLimits
from tests.jarvis.jarvis_harness import TOKEN, SpyExecutor, live_server, make_service, until

FAILSAFE_S = 30.0


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record of jarvis and of uvicorn (whose own loggers do not propagate)."""
    caplog.set_level(logging.INFO)
    uvicorn = logging.getLogger("uvicorn.error")
    uvicorn.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        uvicorn.removeHandler(caplog.handler)


def _head(port: int, length: int) -> bytes:
    return (
        f"POST /tools/invoke HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def _until_closed(stream: anyio.abc.ByteStream) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = bytearray()
    with anyio.fail_after(FAILSAFE_S):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return bytes(received)


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


@pytest.mark.parametrize("ending", ["client-closes", "body-deadline"])
async def test_a_body_that_never_completes_is_one_info_line_not_a_traceback(
    ending: str, server_log: pytest.LogCaptureFixture
) -> None:
    """Cut short by the client, or ended by the body deadline (408): one line, no ERROR."""
    limits = DEFAULT_LIMITS
    if ending == "body-deadline":
        limits = ConnectionLimits(body_timeout_s=0.2)
    async with live_server(make_service(SpyExecutor()), limits=limits) as base:
        port = _port(base)
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(_head(port, 100) + b'{"tool":')
            if ending == "body-deadline":
                answer = await _until_closed(stream)
                assert answer.startswith(b"HTTP/1.1 408 "), answer
        await until(lambda: "before the request body was complete" in server_log.text)
    (line,) = [r for r in server_log.records if "request body" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        "POST /tools/invoke: connection closed before the request body was complete"
    )
    assert [r for r in server_log.records if r.levelno >= logging.ERROR] == []
