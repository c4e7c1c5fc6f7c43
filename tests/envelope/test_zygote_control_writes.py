"""The zygote toward its server: failed preparations back off, and no write ever waits.

Driven on a real `_Zygote` loop over a socketpair standing in for the server, with stand-in
envelopes (no namespaces, no root): what is checked is the zygote's bookkeeping. A
preparation that failed on its way (pid 1 reporting a failed step) used to be retried at
once, in a loop, each attempt named to the server with a `Ready`; the server reads those only
when it launches, so the socket filled and the zygote blocked in `sendto`, and with it the
supervision of every envelope.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from typing import cast

import pytest

from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.envelope.lifecycle import Envelope
from jigcmd.envelope.marshalcodec import MARSHAL
from jigcmd.envelope.messages import FrameReader, Ready
from jigcmd.envelope.outbox import Outbox
from jigcmd.envelope.refill import RETRY_PREPARE_S
from jigcmd.envelope.zygote import _Zygote

MS = 0.001


class _StandIn:
    """An envelope as the loop sees it once it is finished with: its id, whether it failed."""

    def __init__(self, run_id: str, *, failed: bool) -> None:
        self.run_id = run_id
        self.failed = failed
        self.timer: float | None = None


@pytest.fixture
def server_and_zygote() -> Iterator[tuple[socket.socket, _Zygote]]:
    server, control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    zygote = _Zygote(control, cast("CgroupBackend", None), None)
    zygote.watch(control.fileno(), lambda: None)
    zygote.refill.warmed(2, 0.03)
    yield server, zygote
    zygote.close()
    server.close()
    control.close()


def _finished(zygote: _Zygote, run_id: str, *, failed: bool) -> None:
    """A preparation ahead of any request comes to its end (`Loop.done`)."""
    envelope = cast("Envelope", _StandIn(run_id, failed=failed))
    zygote.envelopes.add(envelope)
    zygote.preparing = envelope
    zygote.prepared[run_id] = envelope
    zygote.done(envelope)


def _idle_wants(zygote: _Zygote, now: float) -> bool:
    return zygote.refill.wanted(now, ready=len(zygote.prepared), running=0, starting=False)


def test_a_preparation_that_fails_on_its_way_holds_the_next_back(
    server_and_zygote: tuple[socket.socket, _Zygote],
) -> None:
    """Pid 1's failed step ends a preparation: the next waits RETRY_PREPARE_S, not a turn."""
    _server, zygote = server_and_zygote
    before = time.monotonic()
    _finished(zygote, "a" * 16, failed=True)
    retry_at = zygote.refill.retry_at
    assert retry_at >= before + RETRY_PREPARE_S
    assert not _idle_wants(zygote, retry_at - MS)
    assert _idle_wants(zygote, retry_at)


def test_a_preparation_torn_down_on_purpose_holds_nothing_back(
    server_and_zygote: tuple[socket.socket, _Zygote],
) -> None:
    """A teardown (a new shape, the server gone) is no failure: the refill goes on at once."""
    _server, zygote = server_and_zygote
    _finished(zygote, "b" * 16, failed=False)
    assert zygote.refill.retry_at == 0.0
    assert _idle_wants(zygote, time.monotonic())


def _ready(envelope_id: str) -> Ready:
    return Ready(envelope_id=envelope_id, supervisor=None, cgroup_paths=("/sys/fs/cgroup/x",))


def test_naming_envelopes_to_a_server_that_does_not_read_never_blocks(
    server_and_zygote: tuple[socket.socket, _Zygote],
) -> None:
    """With the socket full, `Ready`s wait in the zygote, only those of live envelopes, and
    reach the server whole and in order once it reads."""
    server, zygote = server_and_zygote
    # A small socket, so that a few frames fill it: the server reads none of them yet.
    zygote.control.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    # A write that waits fails (EAGAIN) after 5 s here, instead of hanging the test.
    zygote.control.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 5, 0))
    live = [f"{index:016x}" for index in range(40)]
    for envelope_id in live:
        zygote._tell(envelope_id, _ready(envelope_id))  # returns: nothing waits
    assert zygote.control.fileno() in zygote.writers
    waiting = len(zygote.outbox)
    assert waiting > 0
    # Half of them are gone before the server reads: the names not yet sent never are.
    gone = live[1::2]
    for envelope_id in gone:
        _finished(zygote, envelope_id, failed=True)
    assert len(zygote.outbox) < waiting
    # The server reads everything; the loop writes the rest as the socket takes it.
    reader = FrameReader(MARSHAL)
    server.setblocking(False)
    while True:
        with contextlib.suppress(BlockingIOError):
            while data := server.recv(1 << 20):
                reader.feed(data)
        if not zygote.outbox:
            break
        zygote.turn((time.monotonic() + 1.0,))
    assert zygote.control.fileno() not in zygote.writers
    named: list[str] = []
    while (message := reader.next()) is not None:
        assert isinstance(message, Ready)
        named.append(message.envelope_id)
    kept = [envelope_id for envelope_id in live if envelope_id not in gone]
    # Each live one once, in order; of the gone ones only those sent before they went.
    assert [envelope_id for envelope_id in named if envelope_id in kept] == kept
    assert len(named) == len(set(named))
    assert len(named) < len(live)


def test_an_outbox_writes_a_begun_frame_whole_even_when_its_envelope_goes() -> None:
    """A frame the socket took part of is finished first: the server never reads half a frame."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        outbox = Outbox(ours)
        big = b"\1" * (1 << 20)
        outbox.put("one", big)
        outbox.put("two", b"\2" * 16)
        assert outbox.flush() is True
        outbox.withdraw("one")
        outbox.withdraw("two")
        assert len(outbox) == 1
        received = bytearray()
        theirs.setblocking(False)
        while outbox.flush():
            with contextlib.suppress(BlockingIOError):
                received += theirs.recv(1 << 20)
        theirs.setblocking(True)
        while len(received) < len(big):
            received += theirs.recv(1 << 20)
        assert bytes(received) == big
    finally:
        ours.close()
        theirs.close()
