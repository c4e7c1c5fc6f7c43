"""A connection that gives way to a newcomer is answered 503, never closed without a word.

The real `jigcmd jarvis` with a small `--max-connections`: python-utcp's calls in a burst
larger than the cap, from a client whose event loop is busy (as python-utcp's own per-call
work keeps it on a loaded machine), so that connections jarvis accepted carry no request for
longer than their fair chance; and an idle keep-alive connection, which still gives way.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.jarvis.http11 import GAVE_WAY
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN
from tests.jarvis.utcp_setup import body, manual_template, utcp_client

# Longer than a connection's fair chance to send its head (0.5 s), shorter than the time a
# connection that gave way waits for its client's request before its end of stream (1 s).
_CLIENT_BUSY_S = 0.6
# A failsafe for one answer or one end of stream, far above what either takes.
_WITHIN_S = 10.0


@pytest.fixture
def jarvis(tmp_path: Path) -> Iterator[JarvisChild]:
    """A real jarvis child holding at most 8 connections, logging at -v."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, ["-v", "--max-connections", "8"]) as child:
        yield child


async def _burst(base: str, calls: int) -> list[str]:
    """`calls` python-utcp calls at once, the client's loop busy now and then: each outcome."""
    client = await utcp_client()
    await client.register_manual(manual_template(base))

    async def one(i: int) -> str:
        args = body("jarvis.policy.check", argv=["echo", str(i)])
        try:
            await client.call_tool("jarvis.policy.check", args)
        except Exception as exc:  # noqa: BLE001 -- every failure is an outcome to count
            return f"{type(exc).__name__}: {exc}"
        return "ok"

    async def busy() -> None:
        while True:
            # The client's own work, holding its loop (a blocking call is the point here).
            time.sleep(_CLIENT_BUSY_S)  # noqa: ASYNC251
            await asyncio.sleep(0.001)

    hog = asyncio.create_task(busy())
    try:
        return await asyncio.gather(*(one(i) for i in range(calls)))
    finally:
        hog.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await hog


@pytest.mark.slow  # the busy client takes seconds
def test_a_python_utcp_burst_past_the_cap_gets_every_call_answered(jarvis: JarvisChild) -> None:
    """40 calls on 8 connections: each is answered, its result or 503 saying nothing ran."""
    logging.getLogger("utcp").setLevel(logging.WARNING)
    outcomes = asyncio.run(_burst(jarvis.base, 40))
    unanswered = collections.Counter(
        outcome for outcome in outcomes if outcome != "ok" and GAVE_WAY[:60] not in outcome
    )
    assert not unanswered, f"{unanswered}; jarvis said: {jarvis.stderr()}"
    assert "gave way to a new connection: answered 503" in jarvis.stderr()


def _request(port: int) -> bytes:
    """A whole keep-alive `policy.check` request."""
    content = b'{"args": {"argv": ["echo", "keep", "idle"]}}'
    return (
        f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(content)}\r\n\r\n"
    ).encode() + content


def _answer(sock: socket.socket) -> bytes:
    """One whole answer (its head and the length its head declares), or what came first."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


def test_an_idle_keep_alive_connection_gives_way_with_a_503_then_its_end_of_stream(
    tmp_path: Path,
) -> None:
    """At the cap (1), an idle authorized keep-alive connection gives way to a newcomer."""
    machine_runs_jarvis()
    with (
        JarvisChild(tmp_path, ["-v", "--max-connections", "1"]) as jarvis,
        socket.create_connection(("127.0.0.1", jarvis.port), timeout=_WITHIN_S) as idle,
    ):
        idle.sendall(_request(jarvis.port))
        assert _answer(idle).startswith(b"HTTP/1.1 200 ")
        with socket.create_connection(("127.0.0.1", jarvis.port), timeout=_WITHIN_S) as newcomer:
            newcomer.sendall(_request(jarvis.port))
            assert _answer(newcomer).startswith(b"HTTP/1.1 200 ")
        gave_way = _answer(idle)
        assert gave_way.startswith(b"HTTP/1.1 503 "), gave_way
        assert b"retry-after: 1\r\n" in gave_way
        assert GAVE_WAY.encode() in gave_way
        assert idle.recv(65536) == b""  # the end of stream follows within the linger
    assert "answered 503 to one idle after its answer" in jarvis.stderr()
