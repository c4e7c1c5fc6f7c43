"""A server that cannot start still answers what its peer already asked, before the EOF.

When `jigcmd serve` fails at start (the journal unusable, the Binding unreadable), a peer that
had begun its session (its first requests are already in the pipe) gets one JSON-RPC error
per request naming the reason, instead of a bare EOF it would have to guess about. Only what
arrives within a short grace is answered; notifications and unreadable frames are not.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Final

from jigcmd.errors import Code, JigError
from jigcmd.fdwait import readable
from jigcmd.protocol import flow, jsonrpc
from jigcmd.protocol.framing import Frame, LineFramer

__all__ = ["GRACE_S", "answer_pending"]

# How long a refusing server waits for requests already on their way.
GRACE_S: Final = 0.2
_READ_SIZE: Final = 1 << 16
# At most this much input is read: the refusal is cheap, whatever the peer sends.
_MAX_INPUT: Final = 1 << 20


def answer_pending(reason: str, *, read_fd: int = 0, write_fd: int = 1) -> int:
    """Answer every request that arrives within `GRACE_S` with an error; how many were."""
    framer = LineFramer()
    frames: list[Frame] = []
    deadline = time.monotonic() + GRACE_S
    seen = 0
    while seen < _MAX_INPUT:
        timeout = max(0.0, deadline - time.monotonic())
        try:
            ready = readable(read_fd, timeout)
        except (OSError, ValueError):
            break
        if not ready:
            break
        try:
            chunk = os.read(read_fd, _READ_SIZE)
        except OSError:
            break
        if not chunk:
            frames += [e for e in framer.close() if type(e) is Frame]
            break
        seen += len(chunk)
        frames += [e for e in framer.feed(chunk) if type(e) is Frame]
    answers = [answer for frame in frames if (answer := _refusal(frame.data, reason))]
    # The peer may be gone already; the stderr line still says why.
    if answers:
        with contextlib.suppress(OSError):
            os.write(write_fd, b"".join(answers))
    return len(answers)


def _refusal(frame: bytes, reason: str) -> bytes:
    message = jsonrpc.parse(frame)
    if type(message) is not jsonrpc.Request:
        return b""
    text = f"jigcmd cannot serve: {reason}"
    if message.method in flow.CALL_METHODS:
        return flow.encode_failure(message.id, JigError(Code.UNAVAILABLE, text))
    # JSON-RPC's name for the code leads, as in every -32603 this server sends (and
    # `Invalid params: …` for -32602); a Run/1 failure carries its kind in data.code instead.
    return jsonrpc.encode_error(message.id, jsonrpc.INTERNAL_ERROR, f"Internal error: {text}")
