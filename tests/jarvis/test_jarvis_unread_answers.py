"""Honest clients that take their answers late, against the real `jigcmd jarvis`: never reset.

The reviewer's cases: an answer handed whole to the kernel (loopback takes it all, so jarvis
never sees a stall) and read after the 5 s header deadline but within the 10 s write
deadline; and an authorized client reading its pipelined answers late while unauthenticated
connections arrive. Each must get every byte. Pauses are set-up, never timing claims.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path

import h11
import httpx
import pytest

from jigcmd.jarvis.connections import DEFAULT_LIMITS
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN, auth, invoke_body

pytestmark = pytest.mark.envelope

ANSWER_S = 30.0
POLICY = """
search_path = ["/usr/bin", "/bin"]

[[rule]]
name = "zeros"
decision = "allow"
argv0 = ["sh", "echo"]
"""
# 64 KiB of NULs on each stream: a record of ~790 KB (each NUL is `\\u0000` in JSON).
_ZEROS = "head -c 65536 /dev/zero; head -c 65536 /dev/zero >&2"


def _large_run(jarvis: JarvisChild) -> int:
    with httpx.Client(timeout=ANSWER_S) as client:
        answer = client.post(
            f"{jarvis.base}/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["sh", "-c", _ZEROS]),
            headers=auth(),
        )
    assert answer.status_code == 200, answer.text
    run_id = answer.json()["run_id"]
    assert isinstance(run_id, int)
    return run_id


def _requests(port: int, run_id: int, count: int) -> bytes:
    """`count` pipelined authorized `run.get` requests of `run_id`."""
    body = json.dumps(invoke_body("jarvis.run.get", run_id=run_id)).encode()
    request = (
        f"POST /tools/jarvis.run.get HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    return request * count


def _expect(parser: h11.Connection) -> None:
    """Tell the client-side parser a request was sent, so it parses the next answer."""
    parser.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    parser.send(h11.EndOfMessage())


def _read_answers(sock: socket.socket, count: int) -> list[int]:
    """Read `count` whole answers off `sock`: each one's status; a reset raises."""
    sock.settimeout(ANSWER_S)
    parser = h11.Connection(h11.CLIENT)
    _expect(parser)
    statuses: list[int] = []
    whole = 0
    while whole < count:
        event = parser.next_event()
        if event is h11.NEED_DATA:
            data = sock.recv(1 << 20)
            assert data, f"closed after {whole} of {count} answers"
            parser.receive_data(data)
        elif isinstance(event, h11.Response):
            statuses.append(event.status_code)
        elif isinstance(event, h11.EndOfMessage):
            whole += 1
            if whole < count:
                parser.start_next_cycle()
                _expect(parser)
    return statuses


@pytest.mark.slow  # waits out the header deadline
def test_an_answer_read_after_the_header_deadline_but_within_the_write_one_is_whole(
    tmp_path: Path,
) -> None:
    """One run.get, read only after the 5 s header deadline: every byte, no reset."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, policy=POLICY) as jarvis:
        run_id = _large_run(jarvis)
        with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
            sock.sendall(_requests(jarvis.port, run_id, 1))
            time.sleep(DEFAULT_LIMITS.header_timeout_s + 1)
            assert _read_answers(sock, 1) == [200]
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()


def test_unauthenticated_newcomers_do_not_push_out_a_caller_reading_late(tmp_path: Path) -> None:
    """An authorized client reads its six pipelined answers late; nine plain connections
    without a token arrive meanwhile (--max-connections 8): it still gets all six."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, ["--max-connections", "8"], policy=POLICY) as jarvis:
        run_id = _large_run(jarvis)
        with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
            sock.sendall(_requests(jarvis.port, run_id, 6))
            # Long enough for jarvis to have answered into a full socket and stalled.
            time.sleep(1.5)
            with contextlib.ExitStack() as stack:
                for _ in range(9):
                    stack.enter_context(socket.create_connection(("127.0.0.1", jarvis.port)))
                    time.sleep(0.02)
                time.sleep(1.0)
                assert _read_answers(sock, 6) == [200] * 6
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()
