"""The real `jigcmd jarvis` against hostile local neighbours: bounded connections, answered calls.

Every test drives the child over loopback sockets the way a neighbour would: connections that
never finish their headers, wrong tokens, more connections than the cap. The bounds named in
the assertions are failsafes far above the expected answer (the server under test answers in
milliseconds), never timing claims.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.jarvis.jarvis_child import JarvisChild, half_open, machine_runs_jarvis, open_fds
from tests.jarvis.jarvis_harness import TOKEN

# A failsafe for one answer: far above what a call takes, far below a starved server's wait.
ANSWER_S = 5.0
# How long a test waits for the server to close a connection it should close.
CLOSE_S = 30.0


@pytest.fixture
def jarvis(tmp_path: Path) -> Iterator[JarvisChild]:
    """A real jarvis child on a free loopback port."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as child:
        yield child


def _read_until_closed(sock: socket.socket, within: float = CLOSE_S) -> bytes:
    """Everything the server sends on `sock` until it closes it (or `within` passes)."""
    sock.setblocking(True)
    sock.settimeout(within)
    received = bytearray()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        received += chunk
    return bytes(received)


@contextlib.contextmanager
def _descriptors_for(count: int) -> Iterator[None]:
    """This test process may hold `count` more sockets (the soft limit raised to the hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < count + 256:
        pytest.skip(f"the descriptor hard limit {hard} is too low for {count} connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_thousand_half_open_connections_leave_authorized_calls_answered(
    jarvis: JarvisChild,
) -> None:
    """fd limit 256, 1,000 connections that never finish their heads: calls still answered."""
    resource.prlimit(jarvis.pid, resource.RLIMIT_NOFILE, (256, 256))
    with _descriptors_for(1000):
        flood = half_open(jarvis.port, 1000)
        try:
            with httpx.Client(timeout=ANSWER_S) as client:
                answers = [jarvis.check(client) for _ in range(5)]
            assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
            assert all(a.json()["decision"] == "allow" for a in answers)
            # Bounded by the cap within its descriptor limit, not by the flood.
            assert open_fds(jarvis.pid) < 256
        finally:
            for sock in flood:
                sock.close()
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()


@pytest.mark.slow  # waits out the server's own timeout
def test_a_connection_that_never_finishes_its_head_is_closed_with_a_408(
    jarvis: JarvisChild,
) -> None:
    """The header deadline ends it (a trickle of bytes does not extend it)."""
    (sock,) = half_open(jarvis.port, 1)
    try:
        received = _read_until_closed(sock)
    finally:
        sock.close()
    assert received.startswith(b"HTTP/1.1 408 "), received
    assert b"request head not complete within 5 s" in received


@pytest.mark.slow  # waits out the server's own timeout
def test_a_next_head_begun_in_the_same_write_as_a_request_gets_a_408_after_the_answer(
    jarvis: JarvisChild,
) -> None:
    """A partial head read with the request before it is a head begun like any other: the
    answer, then 408 at the header deadline, not a close without a word."""
    call = b'{"tool":"jarvis.policy.check","args":{"argv":["echo","hi"]}}'
    with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
        sock.sendall(
            (
                f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{jarvis.port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(call)}\r\n\r\n"
            ).encode()
            + call
            + b"POST /to"
        )
        received = _read_until_closed(sock)
    first, _, rest = received.partition(b"HTTP/1.1 408 ")
    assert first.startswith(b"HTTP/1.1 200 "), received
    assert b"request head not complete within 5 s" in rest, received


@pytest.mark.slow  # waits out the server's own timeout
def test_a_connection_that_never_sends_a_byte_is_closed_without_a_word(
    jarvis: JarvisChild,
) -> None:
    """No head begun, nothing to answer (a client's spare or pre-opened connection): the
    header deadline closes it silently, as an idle keep-alive connection is."""
    with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
        assert _read_until_closed(sock) == b""
    with httpx.Client(timeout=ANSWER_S) as client:
        assert jarvis.check(client).status_code == 200


@pytest.mark.slow  # waits out the server's own timeout
def test_a_body_that_never_arrives_is_closed_with_a_408(jarvis: JarvisChild) -> None:
    """An authorized head declaring a body that never comes: 408 once the body deadline passes."""
    with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
        sock.sendall(
            (
                f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{jarvis.port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n{"
            ).encode()
        )
        received = _read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 408 "), received
    assert b"request body not complete within 10 s" in received


def test_a_wrong_token_is_refused_when_the_head_is_in_and_the_connection_closed(
    jarvis: JarvisChild,
) -> None:
    """403 before the body is read, with `Connection: close`, then the server closes."""
    with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
        sock.sendall(
            (
                f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{jarvis.port}\r\n"
                "Authorization: Bearer not-the-token\r\nContent-Type: application/json\r\n"
                "Content-Length: 1000\r\n\r\n"
            ).encode()
        )
        received = _read_until_closed(sock)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 "), received
    assert b"connection: close" in head.lower()
    assert body.startswith(b'{"error":"forbidden: '), body


def test_past_the_cap_with_every_connection_busy_the_newcomer_is_refused_with_503(
    tmp_path: Path,
) -> None:
    """--max-connections 2, both busy with a request: the third gets 503 and Retry-After."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, ["--max-connections", "2"]) as jarvis:
        head = (
            f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{jarvis.port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n"
        ).encode()
        busy = [socket.create_connection(("127.0.0.1", jarvis.port)) for _ in range(2)]
        try:
            for sock in busy:
                sock.sendall(head)
            with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
                refused = _read_until_closed(sock)
        finally:
            for sock in busy:
                sock.close()
        assert refused.startswith(b"HTTP/1.1 503 "), refused
        assert b"retry-after: 1" in refused.lower()
        # Once the busy connections are gone, calls are answered again.
        with httpx.Client(timeout=ANSWER_S) as client:
            deadline = time.monotonic() + CLOSE_S
            while (answer := jarvis.check(client)).status_code == 503:
                assert time.monotonic() < deadline, answer.text
            assert answer.status_code == 200, answer.text
