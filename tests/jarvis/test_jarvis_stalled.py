"""Clients that never read their answers, against the real `jigcmd jarvis`: bounded, given way.

The tester's attack: connections that pipeline calls whose answers are large and never read
a byte, so that every answer waits in jarvis. They may give way to authorized callers once
stalled, and the write deadline drops each one that stays so. Bounds in the assertions are
failsafes, never timing claims.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN, auth, invoke_body

pytestmark = pytest.mark.envelope

# Failsafes: one answer, and a server that must close or stop.
ANSWER_S = 10.0
CLOSE_S = 60.0
# linux/tcp_states.h: the state of a socket the peer reset.
_TCP_CLOSE = 7
POLICY = """
search_path = ["/usr/bin", "/bin"]

[[rule]]
name = "zeros"
decision = "allow"
argv0 = ["head", "echo"]
"""


def _large_run(jarvis: JarvisChild) -> int:
    """A run whose record is large: 65,536 NUL characters, each `\\u0000` in JSON (~390 KB)."""
    with httpx.Client(timeout=ANSWER_S) as client:
        answer = client.post(
            f"{jarvis.base}/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["head", "-c", "65536", "/dev/zero"]),
            headers=auth(),
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "exited", answer.text
    assert len(answer.json()["stdout"]["text"]) == 65536
    run_id = answer.json()["run_id"]
    assert isinstance(run_id, int)
    return run_id


@contextlib.contextmanager
def _no_readers(
    port: int, run_id: int, count: int, pipelined: int = 50
) -> Iterator[list[socket.socket]]:
    """`count` connections, each pipelining `run.get` of `run_id` and never reading."""
    body = json.dumps(invoke_body("jarvis.run.get", run_id=run_id)).encode()
    request = (
        f"POST /tools/jarvis.run.get HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
            sock.connect(("127.0.0.1", port))
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                for _ in range(pipelined):
                    sock.send(request)
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def _dropped(sock: socket.socket) -> bool:
    """Whether the server reset `sock`: its TCP state is CLOSE (a plain close is CLOSE_WAIT)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == _TCP_CLOSE


def test_clients_that_never_read_do_not_lock_authorized_callers_out(tmp_path: Path) -> None:
    """--max-connections 4, six connections stalled writing: authorized calls are answered."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, ["--max-connections", "4"], policy=POLICY) as jarvis:
        run_id = _large_run(jarvis)
        with _no_readers(jarvis.port, run_id, 6), httpx.Client(timeout=ANSWER_S) as client:
            deadline = time.monotonic() + CLOSE_S
            # While the no-read connections are still busy answering, a newcomer may be
            # refused (503, a full house of busy connections); once they stall they give way.
            while (answer := jarvis.check(client)).status_code == 503:
                assert time.monotonic() < deadline, answer.text
            answers = [answer, *(jarvis.check(client) for _ in range(5))]
        assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()


@pytest.mark.slow  # waits out the write deadline
def test_a_client_that_never_reads_is_dropped_and_a_stop_waits_for_none(tmp_path: Path) -> None:
    """The write deadline resets a stalled connection; SIGTERM with one open: exit 0, no trace."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, policy=POLICY) as jarvis:
        run_id = _large_run(jarvis)
        with _no_readers(jarvis.port, run_id, 2) as (first, _):
            deadline = time.monotonic() + CLOSE_S
            while not _dropped(first):
                assert time.monotonic() < deadline, "the stalled connection was never dropped"
                time.sleep(0.1)
            with _no_readers(jarvis.port, run_id, 1):
                jarvis.signal(signal.SIGTERM)
                assert jarvis.wait(CLOSE_S) == 0, jarvis.stderr()
        stderr = jarvis.stderr()
    assert "Traceback" not in stderr, stderr
    assert "Exception in ASGI application" not in stderr, stderr
    assert "graceful shutdown exceeded" not in stderr, stderr


@pytest.mark.slow  # waits out the header deadline
def test_an_idle_connection_whose_last_answer_is_unread_is_reset(tmp_path: Path) -> None:
    """One small answer the kernel holds unread: at the idle close the connection is reset,
    not left to the kernel to send to a client that does not read."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, policy=POLICY) as jarvis:
        with httpx.Client(timeout=ANSWER_S) as client:
            created = client.post(
                f"{jarvis.base}/tools/jarvis.run.create",
                json=invoke_body("jarvis.run.create", argv=["echo", "hi"]),
                headers=auth(),
            )
        assert created.status_code == 200, created.text
        # Its record (with its signed statement) is larger than the client's window.
        assert len(created.content) > 2048
        with _no_readers(jarvis.port, created.json()["run_id"], 1, pipelined=1) as (sock,):
            deadline = time.monotonic() + CLOSE_S
            while not _dropped(sock):
                assert time.monotonic() < deadline, "the idle connection was never reset"
                time.sleep(0.1)
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()
