"""The real `jigcmd jarvis` and request framing over raw sockets: what h11 refuses and why,
a chunked body refused midway, Content-Length with Transfer-Encoding, and a half-close."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.jarvis.edge_wire import ANSWER_S, Answer, exchange, request, until_audited
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis

_CALL = b'{"tool":"jarvis.policy.check","args":{"argv":["echo","framing"]}}'
_CHUNKED = "Transfer-Encoding: chunked"


@pytest.fixture(scope="module")
def jarvis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JarvisChild]:
    """One real jarvis child for the module."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path_factory.mktemp("jarvis")) as child:
        yield child


def _chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("chunks", "said"),
    [
        pytest.param(b"zz\r\n" + _CALL + b"\r\n0\r\n\r\n", "illegal chunk header", id="header"),
        pytest.param(b"f" * 40 + b"\r\n" + _CALL, "illegal chunk header", id="size"),
        pytest.param(_chunked(_CALL)[:-7] + b"XX0\r\n\r\n", "malformed chunk footer", id="footer"),
    ],
)
def test_a_chunked_body_refused_midway_is_audited_with_its_answer(
    jarvis: JarvisChild, chunks: bytes, said: str
) -> None:
    """The 400 names h11's reason, and the call's audit row says that answer, not a close."""
    data = request(jarvis.port, body=b"", headers=(_CHUNKED,)) + chunks
    answer = Answer(exchange(jarvis.port, data))
    assert (answer.status, answer.body) == (400, {"error": f"malformed request: {said}"})
    shown = until_audited(jarvis, f"refused: malformed request: {said}")
    assert "connection closed before the request body was complete" not in shown, shown


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param((), id="no-token"),
        pytest.param(("Authorization: Bearer wrongwrongwrongwrong",), id="wrong-token"),
    ],
)
def test_a_bad_first_chunk_sent_with_the_head_is_not_read_before_the_token(
    jarvis: JarvisChild, authorization: tuple[str, ...]
) -> None:
    """The token is checked as soon as the head is in: 403, not h11's 400 for a body byte
    that arrived in the same write, and the body is never parsed."""
    head = request(jarvis.port, token=False, body=b"", headers=(_CHUNKED, *authorization))
    answer = Answer(exchange(jarvis.port, head + b"zz\r\n"))
    assert answer.status == 403, answer.raw
    assert isinstance(answer.body, dict)
    assert str(answer.body["error"]).startswith("forbidden: "), answer.raw
    assert answer.headers["connection"] == "close"


_LENGTH = f"Content-Length: {len(_CALL)}"


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        pytest.param("Content-Type", _LENGTH, f"{_LENGTH}\r\nContent-Type: text/plain", id="type"),
        pytest.param("Content-Length", _LENGTH, f"{_LENGTH}\r\n{_LENGTH}", id="length-equal"),
        pytest.param("Content-Length", _LENGTH, f"{_LENGTH}, {len(_CALL)}", id="length-list"),
    ],
)
@pytest.mark.parametrize("token", [True, False], ids=["token", "no-token"])
def test_a_singleton_header_sent_twice_is_refused_like_two_host_headers(
    jarvis: JarvisChild, name: str, old: str, new: str, token: bool
) -> None:
    """Two Content-Type (or Content-Length, even equal) headers: 400, neither one taken."""
    data = request(jarvis.port, body=_CALL, token=token).replace(old.encode(), new.encode(), 1)
    answer = Answer(exchange(jarvis.port, data))
    said = f"malformed request: more than one {name} header"
    assert (answer.status, answer.body) == (400, {"error": said}), answer.raw
    if token:
        until_audited(jarvis, f"refused: {said}")


@pytest.mark.parametrize(
    ("extra", "status", "said"),
    [
        pytest.param(
            ("Content-Length: 5",),
            400,
            "malformed request: conflicting Content-Length headers",
            id="two-lengths",
        ),
        pytest.param(
            ("Transfer-Encoding: gzip, chunked",),
            501,
            "malformed request: Only Transfer-Encoding: chunked is supported",
            id="gzip",
        ),
        pytest.param(
            (_CHUNKED, _CHUNKED),
            501,
            "malformed request: multiple Transfer-Encoding headers",
            id="te-twice",
        ),
        pytest.param(("X A: b",), 400, "malformed request: illegal header line", id="name-space"),
        pytest.param(("X-A: b\0c",), 400, "malformed request: illegal header line", id="nul"),
        pytest.param(("Host : x",), 400, "malformed request: illegal header line", id="colon"),
    ],
)
def test_a_head_h11_refuses_is_answered_with_its_reason(
    jarvis: JarvisChild, extra: tuple[str, ...], status: int, said: str
) -> None:
    """h11's own reason, not uvicorn's "Invalid HTTP request received.", and no client bytes."""
    data = request(jarvis.port, headers=extra)
    if any(line.startswith("Transfer-Encoding") for line in extra):
        data = request(jarvis.port, body=b"", headers=extra) + _chunked(_CALL)
    answer = Answer(exchange(jarvis.port, data))
    assert (answer.status, answer.body) == (status, {"error": said}), answer.raw


@pytest.mark.parametrize(
    ("length", "status", "said"),
    [
        pytest.param("+94", 400, "malformed request: bad Content-Length", id="plus"),
        pytest.param("-1", 400, "malformed request: bad Content-Length", id="negative"),
        pytest.param("0x5e", 400, "malformed request: bad Content-Length", id="hex"),
        pytest.param("9" * 30, 413, "request body larger than 65536 bytes", id="absurd"),
    ],
)
def test_a_bad_content_length_is_told_apart_from_a_huge_one(
    jarvis: JarvisChild, length: str, status: int, said: str
) -> None:
    """Not a number: 400. A number too long for h11 (past 20 digits): a body too large, 413."""
    data = request(jarvis.port, body=_CALL).replace(
        f"Content-Length: {len(_CALL)}".encode(), f"Content-Length: {length}".encode()
    )
    answer = Answer(exchange(jarvis.port, data))
    assert (answer.status, answer.body) == (status, {"error": said}), answer.raw


def test_content_length_with_transfer_encoding_is_refused_and_closed(
    jarvis: JarvisChild,
) -> None:
    """RFC 9112 §6.3: ambiguous framing is refused; the request pipelined after it is not read."""
    smuggled = request(jarvis.port, body=b"", headers=("Content-Length: 1", _CHUNKED))
    data = smuggled + _chunked(_CALL) + request(jarvis.port)
    raw = exchange(jarvis.port, data)
    answer = Answer(raw)
    said = "malformed request: both Content-Length and Transfer-Encoding"
    assert (answer.status, answer.body) == (400, {"error": said}), raw
    assert answer.headers["connection"] == "close"
    assert raw.count(b"HTTP/1.1 ") == 1, raw


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.2"])
def test_a_half_closed_client_gets_its_answer(jarvis: JarvisChild, version: str) -> None:
    """The client ended its sending, not its reading: the answer is written, then the close
    (HTTP/1.0 cannot be told from a client that left: test_jarvis_gone_by_version.py)."""
    answer = Answer(exchange(jarvis.port, request(jarvis.port, version=version), half_close=True))
    assert answer.status == 200, answer.raw
    assert isinstance(answer.body, dict)
    assert answer.body["decision"] == "allow", answer.raw


def test_a_half_closed_run_create_gets_its_run_and_answer(jarvis: JarvisChild) -> None:
    """The call that ran is answered (a client told nothing would run it again)."""
    call = b'{"tool":"jarvis.run.create","args":{"argv":["echo","half-closed"]}}'
    data = request(jarvis.port, "/tools/jarvis.run.create", body=call)
    answer = Answer(exchange(jarvis.port, data, half_close=True))
    assert answer.status == 200, answer.raw
    assert isinstance(answer.body, dict)
    assert (answer.body["status"], answer.body["stdout"]["text"]) == ("exited", "half-closed\n")


def test_pipelined_requests_then_a_half_close_are_all_answered(jarvis: JarvisChild) -> None:
    """Each request read before the end of stream is answered, in order."""
    raw = exchange(jarvis.port, request(jarvis.port) * 3, half_close=True)
    assert raw.count(b"HTTP/1.1 200 ") == 3, raw


def test_a_half_close_before_the_body_is_complete_closes_without_an_answer(
    jarvis: JarvisChild,
) -> None:
    """A request that never completes is not answered as if it had: closed (nothing ran)."""
    data = request(jarvis.port)[:-10]
    assert exchange(jarvis.port, data, half_close=True) == b""
    until_audited(jarvis, "refused: connection closed before the request body was complete")


def test_the_module_leaves_the_child_serving(jarvis: JarvisChild) -> None:
    """No request above took the server down or left a traceback."""
    with httpx.Client(timeout=ANSWER_S) as client:
        assert jarvis.check(client).status_code == 200
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()
