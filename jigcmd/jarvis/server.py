"""Binding the loopback socket and serving the app with uvicorn.

The socket is bound and listening before uvicorn starts, so the actual port (for `--port 0`)
is known when the manual and the allowed `Host` values are built, and a client that
connects early waits in the backlog instead of failing.
"""

from __future__ import annotations

import ipaddress
import socket

import anyio
import uvicorn
from starlette.types import ASGIApp

__all__ = ["LoopbackError", "bind_loopback", "serve"]

_BACKLOG = 128


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


async def serve(
    app: ASGIApp,
    sock: socket.socket,
    *,
    log_level: str = "warning",
    stop: anyio.Event | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (handled by uvicorn) or until `stop` is set; then drain."""
    config = uvicorn.Config(
        app,
        log_level=log_level,
        # The access log carries paths and statuses only; still off unless asked for.
        access_log=log_level in ("debug", "info"),
        server_header=False,
        proxy_headers=False,
        lifespan="on",
        timeout_graceful_shutdown=15,
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        if stop is not None:

            async def stop_when_asked() -> None:
                await stop.wait()
                server.should_exit = True

            tg.start_soon(stop_when_asked)
        await server.serve(sockets=[sock])
        tg.cancel_scope.cancel()
