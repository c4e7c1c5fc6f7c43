"""Binding the loopback socket and serving the app with uvicorn.

The socket is bound and listening before uvicorn starts, so the actual port (for `--port 0`)
is known when the manual and the allowed `Host` values are built, and a client that
connects early waits in the backlog instead of failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import math
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any

import anyio
import uvicorn
import uvicorn.server
from starlette.types import ASGIApp

from jigcmd.cancel import CancelSignal
from jigcmd.jarvis.auth import Credentials
from jigcmd.jarvis.connections import DEFAULT_LIMITS, ConnectionLimits, Connections, fd_capacity
from jigcmd.jarvis.http11 import BoundedH11Protocol, bounded_protocol
from jigcmd.jarvis.rawanswers import raw_error
from jigcmd.jarvis.tools import ToolError
from jigcmd.server import residency
from jigcmd.server.stopsignals import STOP_SIGNALS

__all__ = ["LoopbackError", "StopRequest", "bind_loopback", "serve"]

logger = logging.getLogger("jigcmd.jarvis")

_BACKLOG = 128
# accept() errors that mean "no descriptor (or memory) for one more connection now".
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
# After such an error: retry at once when a waiting connection made room, else a little later.
_RETRY_S = 0.0
_IDLE_RETRY_S = 0.05
_WARN_EVERY_S = 10.0
# How often a full house looks again for room (a connection closed or may give way).
_FULL_POLL_S = 0.01
_DRAIN_BYTES = 1 << 16
_ONE_TURN_S = 1e-6


class LoopbackError(ValueError):
    """Raised when asked to bind anything but a loopback address."""


def _loopback_address(host: str) -> str:
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise LoopbackError(
            f"--host {host!r} is not an IP address; jarvis binds loopback addresses only "
            "(127.0.0.1, ::1 or localhost)"
        ) from None
    if not address.is_loopback:
        raise LoopbackError(f"--host {host!r} is not a loopback address; jarvis refuses to bind it")
    return str(address)


def bind_loopback(host: str, port: int) -> socket.socket:
    """A listening TCP socket on a loopback address; raises `LoopbackError` or `OSError`."""
    address = _loopback_address(host)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit it: without it a keep-alive client waits out a delayed ACK
        # (~40 ms) on every response uvicorn writes in two segments.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((address, port))
        sock.listen(_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


class StopRequest:
    """A stop signal arriving while uvicorn does not listen for it (starting, ending): kept.

    Held (`with`) around the whole front: a signal then never kills the process mid-start,
    the server stops as soon as it has started, and the previous handlers come back after.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum


class _Server(uvicorn.Server):
    """uvicorn's server without its own listener: `_accept` feeds it the connections."""

    def __init__(
        self,
        config: uvicorn.Config,
        limits: ConnectionLimits,
        early: StopRequest | None,
        on_stop: Callable[[], None] | None,
    ) -> None:
        super().__init__(config)
        self.limits = limits
        self.accepting = anyio.Event()
        self.accept_scope = anyio.CancelScope()
        self._early = early
        self._on_stop = on_stop

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """The lifespan starts; no listener is created (the accept loop is ours)."""
        await super().startup(sockets=[])
        if self._early is not None and self._early.signum is not None:
            self.should_exit = True
        if self.started:
            self.accepting.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's SIGINT and SIGTERM, and the other stop signals (SIGHUP) the same way."""
        extra = [signum for signum in STOP_SIGNALS if signum not in uvicorn.server.HANDLED_SIGNALS]
        with super().capture_signals():
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = {signum: signal.signal(signum, self.handle_exit) for signum in extra}
            try:
                yield
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A stop signal: uvicorn's graceful stop, ending in exit 0 (it would re-raise it)."""
        super().handle_exit(sig, frame)
        # uvicorn raises each captured signal again once it has stopped, so the process
        # died of it (-15); for jarvis a graceful stop is its own clean end.
        self._captured_signals.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop accepting, fence what runs (`on_stop`), then uvicorn's drain of the answers."""
        self.accept_scope.cancel()
        if self._on_stop is not None:
            self._on_stop()
        await super().shutdown(sockets)


async def serve(
    app: ASGIApp,
    sock: socket.socket,
    credentials: Credentials,
    *,
    limits: ConnectionLimits = DEFAULT_LIMITS,
    log_level: str = "warning",
    stop: anyio.Event | CancelSignal | None = None,
    early: StopRequest | None = None,
    on_stop: Callable[[], None] | None = None,
    refused: Callable[[str], None] = lambda reason: None,
    audited: Callable[[str, str, ToolError], Awaitable[None]] | None = None,
    head_refused: Callable[[str, str, ToolError], None] = lambda actor, tool, refusal: None,
) -> None:
    """Serve until a stop signal (SIGINT, SIGTERM, SIGHUP) or until `stop` is set (jarvis sets
    it when its journal is lost); then drain.

    On the way out `on_stop` runs first (jarvis fences its runs there, so the calls waiting
    for them are answered at once), then uvicorn drains the answers for up to 15 s; a signal
    is not raised again after it. `refused` is told of every request refused for its token
    (`JarvisService.audit_unauthenticated`), `audited` of every one refused, its token
    valid, before the application (`JarvisService.audit_refusal`; a head h11 refused:
    `head_refused`, `JarvisService.audit_refused_head`).
    """
    held: Connections[BoundedH11Protocol] = Connections(
        lambda: fd_capacity(limits), limits.min_wait_s
    )
    config = uvicorn.Config(
        app,
        http=bounded_protocol(
            limits, held, credentials, refused, audited, head_refused=head_refused
        ),
        log_level=log_level,
        # jigcmd's own stderr handler (`server/stderrlog.py`) stays the only one: uvicorn's
        # default dictConfig would close it, silencing every later jarvis log line.
        log_config=None,
        # The access log carries paths and statuses only; still off unless asked for.
        access_log=log_level in ("debug", "info"),
        server_header=False,
        proxy_headers=False,
        lifespan="on",
        # No WebSocket protocol, whatever is installed ("auto" takes `websockets` or
        # `wsproto` if importable): an upgraded connection would leave the token check, the
        # deadlines and the held count behind (http11.py refuses to hand one over too).
        ws="none",
        timeout_graceful_shutdown=15,
        # h11's bound on an incomplete head is the bound on every head (http11.py).
        h11_max_incomplete_event_size=limits.max_head_bytes,
        # Idle after an answer: the same bound as the wait for a first head.
        timeout_keep_alive=max(1, int(limits.header_timeout_s)),
    )
    server = _Server(config, limits, early, on_stop)
    async with anyio.create_task_group() as tg:
        if stop is not None:

            async def stop_when_asked() -> None:
                await stop.wait()
                server.should_exit = True

            tg.start_soon(stop_when_asked)
        tg.start_soon(_accept, sock, server, held)
        await server.serve(sockets=[])
        tg.cancel_scope.cancel()


async def _accept(
    sock: socket.socket, server: _Server, held: Connections[BoundedH11Protocol]
) -> None:
    """Accept one connection at a time, each admitted by `held` or refused at once (503).

    One at a time (asyncio's own listener takes up to its backlog per wake-up before any
    protocol runs), so the descriptors in use never pass the cap by more than one.
    """
    await server.accepting.wait()
    # Started: the library pages the imports mapped and no call uses go (see residency.py).
    residency.release_after_start(logger)
    loop = asyncio.get_running_loop()
    config = server.config

    def factory() -> asyncio.Protocol:
        return config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state, app_state=server.lifespan.state
        )

    sock.setblocking(False)
    full = _FullHouse(held, server.limits.refuse_after_s)
    warned = -math.inf
    with server.accept_scope:
        while True:
            room = await full.room()
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                if exc.errno not in _OUT_OF_DESCRIPTORS:
                    raise
                if time.monotonic() - warned > _WARN_EVERY_S:
                    warned = time.monotonic()
                    logger.warning(
                        "accept failed (%s) with %d connections held; the longest waiting "
                        "one gives way",
                        exc.strerror,
                        len(held),
                    )
                await _short_of_descriptors(held)
                continue
            admitted, making_room = held.admit() if room else (False, None)
            if making_room is not None:
                making_room.give_way()
            if not admitted:
                _refuse(conn, len(held))
                continue
            try:
                await loop.connect_accepted_socket(factory, conn)
            except OSError:
                conn.close()


class _FullHouse:
    """When every held connection stays busy, newcomers wait in the backlog, then get 503."""

    def __init__(self, held: Connections[BoundedH11Protocol], refuse_after_s: float) -> None:
        self._held = held
        self._refuse_after = refuse_after_s
        self._since: float | None = None

    async def room(self) -> bool:
        """Whether the next newcomer may be held: at once, or once a connection may give way.

        A house full for `refuse_after_s` refuses every newcomer (False) until it has room.
        """
        while not self._held.has_room():
            now = time.monotonic()
            if self._since is None:
                self._since = now
            if now - self._since >= self._refuse_after:
                # One turn of the loop first (a timer fires after its I/O): a connection
                # that closed meanwhile makes room instead of a refusal.
                await anyio.sleep(_ONE_TURN_S)
                if self._held.has_room():
                    break
                return False
            await anyio.sleep(_FULL_POLL_S)
        self._since = None
        return True


async def _short_of_descriptors(held: Connections[BoundedH11Protocol]) -> None:
    """No descriptor for a new connection: one that waits gives way, then try again."""
    _, making_room = held.admit(force=True)
    if making_room is not None:
        making_room.give_way(at_once=True)
    # The closed descriptor is freed on the loop's next turn.
    await anyio.sleep(_RETRY_S if making_room is not None else _IDLE_RETRY_S)


def _refuse(conn: socket.socket, held: int) -> None:
    """The excess connection: a 503 (if the socket takes it at once) and closed.

    What the client sent already is read first: closing with unread bytes would reset the
    connection, and the client would lose the 503.
    """
    conn.setblocking(False)
    with contextlib.suppress(OSError):
        conn.recv(_DRAIN_BYTES)
    with contextlib.suppress(OSError):
        conn.send(
            raw_error(
                503,
                "Service Unavailable",
                f"jarvis holds {held} connections, each with a request in progress; retry",
                extra="retry-after: 1\r\n",
            )
        )
        conn.shutdown(socket.SHUT_WR)
    conn.close()
