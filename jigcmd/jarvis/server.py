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
import socket
import time

import anyio
import uvicorn
from starlette.types import ASGIApp

from jigcmd.jarvis.auth import Credentials
from jigcmd.jarvis.connections import DEFAULT_LIMITS, ConnectionLimits, Connections, fd_capacity
from jigcmd.jarvis.http11 import BoundedH11Protocol, bounded_protocol, raw_error

__all__ = ["LoopbackError", "bind_loopback", "serve"]

logger = logging.getLogger("jigcmd.jarvis")

_BACKLOG = 128
# accept() errors that mean "no descriptor (or memory) for one more connection now".
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
# After such an error: retry at once when a waiting connection made room, else a little later.
_RETRY_S = 0.0
_IDLE_RETRY_S = 0.05
_WARN_EVERY_S = 10.0
_SETTLE_S = 1e-6


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


class _Server(uvicorn.Server):
    """uvicorn's server without its own listener: `_accept` feeds it the connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.accepting = anyio.Event()
        self.accept_scope = anyio.CancelScope()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """The lifespan starts; no listener is created (the accept loop is ours)."""
        await super().startup(sockets=[])
        if self.started:
            self.accepting.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop accepting first, then uvicorn's graceful drain."""
        self.accept_scope.cancel()
        await super().shutdown(sockets)


async def serve(
    app: ASGIApp,
    sock: socket.socket,
    credentials: Credentials,
    *,
    limits: ConnectionLimits = DEFAULT_LIMITS,
    log_level: str = "warning",
    stop: anyio.Event | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (handled by uvicorn) or until `stop` is set; then drain."""
    held: Connections[BoundedH11Protocol] = Connections(lambda: fd_capacity(limits))
    config = uvicorn.Config(
        app,
        http=bounded_protocol(limits, held, credentials),
        log_level=log_level,
        # The access log carries paths and statuses only; still off unless asked for.
        access_log=log_level in ("debug", "info"),
        server_header=False,
        proxy_headers=False,
        lifespan="on",
        timeout_graceful_shutdown=15,
        # Idle after an answer: the same bound as the wait for a first head.
        timeout_keep_alive=max(1, int(limits.header_timeout_s)),
    )
    server = _Server(config)
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
    loop = asyncio.get_running_loop()
    config = server.config

    def factory() -> asyncio.Protocol:
        return config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state, app_state=server.lifespan.state
        )

    sock.setblocking(False)
    warned = -math.inf
    with server.accept_scope:
        while True:
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
            if len(held) >= held.capacity():
                # At the cap a waiting connection may give way; first let the loop read what
                # the waiting ones already sent (a timer fires after the loop's I/O), so one
                # whose head is in the socket buffer counts as busy and is not pushed out.
                await anyio.sleep(_SETTLE_S)
            admitted, making_room = held.admit()
            if making_room is not None:
                making_room.give_way()
            if not admitted:
                _refuse(conn, len(held))
                continue
            try:
                await loop.connect_accepted_socket(factory, conn)
            except OSError:
                conn.close()


async def _short_of_descriptors(held: Connections[BoundedH11Protocol]) -> None:
    """No descriptor for a new connection: one that waits gives way, then try again."""
    _, making_room = held.admit(force=True)
    if making_room is not None:
        making_room.give_way()
    # The closed descriptor is freed on the loop's next turn.
    await anyio.sleep(_RETRY_S if making_room is not None else _IDLE_RETRY_S)


def _refuse(conn: socket.socket, held: int) -> None:
    """The excess connection: a 503 (if the socket takes it at once) and closed."""
    conn.setblocking(False)
    with contextlib.suppress(OSError):
        conn.send(
            raw_error(
                503,
                "Service Unavailable",
                f"jarvis holds {held} connections, each with a request in progress; retry",
                extra="retry-after: 1\r\n",
            )
        )
    conn.close()
