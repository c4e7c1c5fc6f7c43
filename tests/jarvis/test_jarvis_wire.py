"""The real server in-process, over raw loopback sockets: bodies cut short, heads, h11's errors.

The bounded protocol and uvicorn are the real ones (`live_server`); the executor is a spy.
Bounds named in the tests are failsafes, never timing claims.
"""

from __future__ import annotations

import json
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
        f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
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


@pytest.mark.parametrize(
    ("ending", "said"),
    [
        ("client-closes", "connection closed before the request body was complete"),
        ("body-deadline", "request body not complete within 0.2 s"),
    ],
)
async def test_a_body_that_never_completes_is_one_info_line_and_one_row_saying_its_answer(
    ending: str, said: str, server_log: pytest.LogCaptureFixture
) -> None:
    """Cut short by the client, or ended by the body deadline (408): one line, no ERROR, and
    one audit row, each saying what was answered (the 408's own words) or that nobody was."""
    limits = DEFAULT_LIMITS
    if ending == "body-deadline":
        limits = ConnectionLimits(body_timeout_s=0.2)
    service = make_service(SpyExecutor())
    async with live_server(service, limits=limits) as base:
        port = _port(base)
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(_head(port, 100) + b'{"tool":')
            if ending == "body-deadline":
                answer = await _until_closed(stream)
                assert answer.startswith(b"HTTP/1.1 408 "), answer
                assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"error": said}
        await until(lambda: said in server_log.text)
        await until(lambda: len(service.store.audit_rows(10)) == 1)
    (line,) = [r for r in server_log.records if "request body" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert line.getMessage() == f"POST /tools/jarvis.policy.check: {said}"
    assert [r for r in server_log.records if r.levelno >= logging.ERROR] == []
    (row,) = service.store.audit_rows(10)
    assert (row.tool, row.decision, row.outcome) == (
        "jarvis.policy.check",
        "invalid",
        f"refused: {said}",
    )


_CHECK = b'{"tool":"jarvis.policy.check","args":{"argv":["echo","x"]}}'


def _request(port: int, head_bytes: int, *, close: bool = False) -> bytes:
    """A whole `policy.check` request whose head is exactly `head_bytes` long."""
    extra = b"Connection: close\r\n" if close else b""
    head = _head(port, len(_CHECK)).replace(b"\r\n\r\n", b"\r\n" + extra + b"X-Pad: \r\n\r\n")
    padded = head.replace(b"X-Pad: ", b"X-Pad: " + b"a" * (head_bytes - len(head)))
    assert len(padded) == head_bytes
    return padded + _CHECK


async def _answers(port: int, data: bytes) -> bytes:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(data)
        return await _until_closed(stream)


@pytest.mark.parametrize("head_bytes", [16 * 1024 + 1, 60_000, 120_000])
async def test_a_head_past_16_kib_read_whole_is_a_400_json_error_and_closed(
    head_bytes: int,
) -> None:
    """h11 bounds only a head it still waits for; one that arrives whole is bounded too."""
    spy = SpyExecutor()
    async with live_server(make_service(spy)) as base:
        port = _port(base)
        answer = await _answers(port, _request(port, head_bytes))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer
    assert b"content-type: application/json" in head
    assert b"connection: close" in head
    assert body == b'{"error":"request head larger than 16384 bytes"}'


async def test_a_head_of_exactly_16_kib_is_answered() -> None:
    """The bound itself is allowed."""
    async with live_server(make_service(SpyExecutor())) as base:
        port = _port(base)
        answer = await _answers(port, _request(port, 16 * 1024, close=True))
    assert answer.startswith(b"HTTP/1.1 200 "), answer


async def test_a_pipelined_head_past_the_bound_is_refused_after_the_first_answer() -> None:
    """Read with the request before it, the second head is measured once its turn comes."""
    async with live_server(make_service(SpyExecutor())) as base:
        port = _port(base)
        answer = await _answers(port, _request(port, 200) + _request(port, 20_000))
    first, _, second = answer.partition(b"HTTP/1.1 400 ")
    assert first.startswith(b"HTTP/1.1 200 "), answer
    assert second.endswith(b'{"error":"request head larger than 16384 bytes"}'), answer


async def test_the_connection_refuses_a_wrong_token_before_the_app_reads_the_host() -> None:
    """The order app.py states: a foreign Host with a wrong token is 403, with the right one 421."""
    async with live_server(make_service(SpyExecutor())) as base:
        port = _port(base)
        request = _request(port, 300, close=True).replace(
            f"Host: 127.0.0.1:{port}".encode(), b"Host: attacker.example"
        )
        wrong = await _answers(port, request.replace(TOKEN.encode(), b"jv_wrong-token-0123456789"))
        right = await _answers(port, request)
    assert wrong.startswith(b"HTTP/1.1 403 "), wrong
    assert right.startswith(b"HTTP/1.1 421 "), right


@pytest.mark.parametrize(
    ("garbage", "said"),
    [
        pytest.param(b"NOT HTTP AT ALL\r\n\r\n", "illegal request line", id="request-line"),
        pytest.param(
            b"POST /tools/invoke HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n",
            "illegal header line",
            id="header",
        ),
    ],
)
async def test_a_request_h11_cannot_parse_is_a_400_json_error_and_closed(
    garbage: bytes, said: str
) -> None:
    """h11's own refusals are answered in the one JSON error shape too, never plain text, with
    h11's reason (not the client's bytes it quotes)."""
    async with live_server(make_service(SpyExecutor())) as base:
        answer = await _answers(_port(base), garbage)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body) == {"error": f"malformed request: {said}"}


@pytest.mark.parametrize(
    ("head", "said"),
    [
        pytest.param(b"GET /utcp HTTP/1.1\r\n\r\n", "the Host header is required (HTTP/1.1)"),
        pytest.param(
            b"GET /utcp HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "more than one Host header"
        ),
    ],
    ids=["missing", "twice"],
)
async def test_an_http11_request_without_one_host_is_told_so(head: bytes, said: str) -> None:
    """HTTP/1.1 requires exactly one Host header: the 400 says which way it is missing."""
    async with live_server(make_service(SpyExecutor())) as base:
        answer = await _answers(_port(base), head)
    head_, _, body = answer.partition(b"\r\n\r\n")
    assert head_.startswith(b"HTTP/1.1 400 "), answer
    assert json.loads(body) == {"error": f"malformed request: {said}"}


@pytest.mark.parametrize(
    ("status", "change"),
    [
        pytest.param(413, (b"Content-Length: 10", b"Content-Length: 70000"), id="413-declared"),
        pytest.param(415, (b"application/json", b"text/plain"), id="415"),
        pytest.param(404, (b"jarvis.policy.check", b"jarvis.no.such"), id="404-tool"),
    ],
)
async def test_an_answer_before_the_body_is_read_says_connection_close_and_closes(
    status: int, change: tuple[bytes, bytes]
) -> None:
    """The body never read would be taken as the next request: closed at once, and said so."""
    # Past the failsafe: without the close, the connection would wait for the body.
    limits = ConnectionLimits(body_timeout_s=4 * FAILSAFE_S)
    async with live_server(make_service(SpyExecutor()), limits=limits) as base:
        port = _port(base)
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(_head(port, 10).replace(*change))
            answer = await _until_closed(stream)
    head, _, _ = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), answer
    assert b"connection: close" in head.lower(), answer
