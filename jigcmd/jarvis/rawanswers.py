"""The answers jarvis's connection writes itself, each in the one JSON error shape.

Before any request (a 503 at accept, or to a connection that gave way), for a request h11
refused or whose head, body or token the connection refused before the application saw it.
"""

from __future__ import annotations

import msgspec
from uvicorn._types import ASGISendCallable

__all__ = ["raw_error", "reason_phrase", "refused_answer"]

_REASONS = {400: "Bad Request", 413: "Content Too Large", 501: "Not Implemented"}


def reason_phrase(status: int) -> str:
    """The reason phrase of a refusal's status (of those a parser refusal is answered with)."""
    return _REASONS.get(status, "Bad Request")


def raw_error(status: int, reason: str, message: str, extra: str = "") -> bytes:
    """A complete `Connection: close` JSON error response, for a connection without a request."""
    body = msgspec.json.encode({"error": message})
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    ).encode() + body


async def refused_answer(send: ASGISendCallable, status: int, message: str) -> None:
    """A JSON error sent through ASGI, `Connection: close`: a request refused before the app."""
    body = msgspec.json.encode({"error": message})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
