"""The real `jigcmd jarvis`: a caller that left while its `run.create` waited for a slot gets
no run, whatever HTTP/1.x it spoke and whether it read an interim answer before it left.

The one envelope slot is held by the test (as another jigcmd on the state directory would),
so each call waits; each argv is unique, so the audit tells the calls apart.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from jigcmd.journal.reservations import Reservations
from tests.jarvis.edge_wire import ANSWER_S, ROW_S, audit, request
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis

_LEFT = "cancelled: the caller left while it waited for an envelope slot; nothing ran"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_WAITING = "waiting: for an envelope slot"


@pytest.fixture(scope="module")
def jarvis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JarvisChild]:
    """One real jarvis child with one envelope slot, waiting up to 60 s for it."""
    machine_runs_jarvis()
    args = ("--max-envelopes", "1", "--queue-wait", "60")
    with JarvisChild(tmp_path_factory.mktemp("jarvis"), args) as child:
        yield child


@pytest.fixture
def slot_held(jarvis: JarvisChild) -> Iterator[None]:
    """The only envelope slot, held by the test while it runs."""
    held = Reservations(jarvis.state_dir, 1).acquire("jigcmd test")
    assert held is not None
    try:
        yield
    finally:
        held.release()


def _create(jarvis: JarvisChild, word: str, version: str) -> bytes:
    call = {"tool": "jarvis.run.create", "args": {"argv": ["echo", word]}}
    body = json.dumps(call).encode()
    return request(jarvis.port, "/tools/jarvis.run.create", version=version, body=body)


def _outcomes(jarvis: JarvisChild, word: str) -> list[str]:
    """The audited outcomes of the calls of `echo word`, in order, but the rows that only say
    a call began to wait for a slot (its decision, audited before the wait)."""
    rows = [json.loads(line) for line in audit(jarvis).splitlines()]
    said = [row["outcome"] for row in rows if row["argv"] == ["echo", word]]
    return [outcome for outcome in said if not outcome.startswith(_WAITING)]


def _cancelled(jarvis: JarvisChild, word: str) -> None:
    """The call of `echo word` is audited as its caller's leaving, and never ran."""
    deadline = time.monotonic() + ROW_S
    while not (outcomes := _outcomes(jarvis, word)):
        assert time.monotonic() < deadline, audit(jarvis)
        time.sleep(0.1)
    assert outcomes == [_LEFT], outcomes


@pytest.mark.usefixtures("slot_held")
@pytest.mark.parametrize("version", ["HTTP/1.0", "HTTP/1.1", "HTTP/1.2"])
def test_a_caller_that_closed_gets_no_run(jarvis: JarvisChild, version: str) -> None:
    """A client that sent its call and closed (as curl --max-time does) left: no run."""
    word = f"closed-{version}"
    with socket.create_connection(("127.0.0.1", jarvis.port), timeout=ANSWER_S) as sock:
        sock.sendall(_create(jarvis, word, version))
    _cancelled(jarvis, word)


@pytest.mark.usefixtures("slot_held")
def test_a_half_closed_http10_caller_is_taken_as_gone(jarvis: JarvisChild) -> None:
    """HTTP/1.0 may be sent no 1xx, so its end of stream cannot be told from a close: no run."""
    word = "half-closed-HTTP/1.0"
    with socket.create_connection(("127.0.0.1", jarvis.port), timeout=ANSWER_S) as sock:
        sock.sendall(_create(jarvis, word, "HTTP/1.0"))
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(65536) == b""
    _cancelled(jarvis, word)


@pytest.mark.usefixtures("slot_held")
@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.2"])
def test_a_caller_that_half_closed_read_an_interim_then_closed_gets_no_run(
    jarvis: JarvisChild, version: str
) -> None:
    """The interim answer it read is not the last: the next one draws its kernel's reset."""
    word = f"half-then-closed-{version}"
    with socket.create_connection(("127.0.0.1", jarvis.port), timeout=ANSWER_S) as sock:
        sock.sendall(_create(jarvis, word, version))
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while len(received) < len(_CONTINUE):
            chunk = sock.recv(len(_CONTINUE) - len(received))
            assert chunk, received
            received += chunk
        assert received == _CONTINUE
    _cancelled(jarvis, word)


def test_a_half_closed_caller_that_stays_gets_its_run_after_interims(
    jarvis: JarvisChild,
) -> None:
    """Several interim answers while it waits, then its run's answer (a 1xx may repeat)."""
    held = Reservations(jarvis.state_dir, 1).acquire("jigcmd test")
    assert held is not None
    word = "half-closed-stayed"
    try:
        with socket.create_connection(("127.0.0.1", jarvis.port), timeout=ANSWER_S) as sock:
            sock.sendall(_create(jarvis, word, "HTTP/1.1"))
            sock.shutdown(socket.SHUT_WR)
            received = b""
            while received.count(_CONTINUE) < 2:
                chunk = sock.recv(65536)
                assert chunk, received
                received += chunk
            held.release()
            while chunk := sock.recv(65536):
                received += chunk
    finally:
        held.release()
    head, _, body = received.replace(_CONTINUE, b"").partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), received
    assert json.loads(body)["stdout"]["text"] == f"{word}\n"
    assert _outcomes(jarvis, word)[0].startswith("started run "), audit(jarvis)


def test_a_caller_that_closed_as_its_slot_came_gets_no_run(jarvis: JarvisChild) -> None:
    """Closed between two polls, just before the slot is freed: asked again as the slot
    comes, so no run (several times over: a poll may come first, either way none runs)."""
    for attempt in range(5):
        held = Reservations(jarvis.state_dir, 1).acquire("jigcmd test")
        assert held is not None
        word = f"closed-as-the-slot-came-{attempt}"
        try:
            with socket.create_connection(("127.0.0.1", jarvis.port), timeout=ANSWER_S) as sock:
                sock.sendall(_create(jarvis, word, "HTTP/1.1"))
                sock.shutdown(socket.SHUT_WR)
                assert sock.recv(len(_CONTINUE), socket.MSG_WAITALL) == _CONTINUE
        finally:
            held.release()
        _cancelled(jarvis, word)


def _sent_then_half_closed(jarvis: JarvisChild, data: bytes) -> bytes:
    """`data` and the end of stream in one segment (corked), then all the client reads."""
    with socket.create_connection(("127.0.0.1", jarvis.port), timeout=ANSWER_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_a_half_closed_http10_caller_with_a_free_slot_gets_no_run(jarvis: JarvisChild) -> None:
    """A slot free at once: its end of stream is still seen before the run would start."""
    word = "half-closed-free-slot-HTTP/1.0"
    assert _sent_then_half_closed(jarvis, _create(jarvis, word, "HTTP/1.0")) == b""
    _cancelled(jarvis, word)


def test_an_http10_call_pipelined_behind_an_http11_one_then_half_closed_gets_no_run(
    jarvis: JarvisChild,
) -> None:
    """The HTTP/1.1 call is answered; the HTTP/1.0 one read with it is its caller's gone."""
    first, second = "pipelined-first-HTTP/1.1", "pipelined-second-HTTP/1.0"
    data = _create(jarvis, first, "HTTP/1.1") + _create(jarvis, second, "HTTP/1.0")
    received = _sent_then_half_closed(jarvis, data).replace(_CONTINUE, b"")
    assert received.count(b"HTTP/1.1 200 ") == 1 and first.encode() in received, received
    _cancelled(jarvis, second)
    assert _outcomes(jarvis, first)[0].startswith("started run "), audit(jarvis)
