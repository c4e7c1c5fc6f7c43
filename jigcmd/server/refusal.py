"""A server that cannot start still answers what its peer asks, before the EOF.

When `jigcmd serve` fails at start (the journal unusable, the Binding unreadable), a peer that
had begun its session gets one JSON-RPC error per request naming the reason, instead of a bare
EOF it would have to guess about. Each request is answered as it arrives, and the wait starts
again after each answer: a client that reads the first error and then asks again (the MCP
SDKs' `server/discover`, then `initialize` on any error) gets the reason a second time, not a
closed pipe. Notifications and unreadable frames are not answered; end of input ends it at
once, and a bound on time, frames and bytes ends it however the peer keeps asking.
"""

from __future__ import annotations

import os
import select
import time
from typing import Final

from jigcmd.errors import Code, JigError
from jigcmd.fdwait import readable, writable
from jigcmd.protocol import flow, jsonrpc
from jigcmd.protocol.framing import Frame, LineFramer

__all__ = ["GRACE_S", "LIMIT_S", "REPLY_GRACE_S", "answer_pending"]

# How long a refusing server waits for requests already on their way.
GRACE_S: Final = 0.2
# After an answer: how long it waits for the peer's next request, sent on reading that
# answer (a peer's reaction, on a loaded host, not a pipe's latency: longer than GRACE_S).
REPLY_GRACE_S: Final = 1.0
# However the peer keeps asking, a refusing server is gone this long after it began to.
LIMIT_S: Final = 5.0
# At most this many frames and this much input are taken in: the refusal is cheap.
_MAX_FRAMES: Final = 256
_MAX_INPUT: Final = 1 << 20
_READ_SIZE: Final = 1 << 16
# Each write is at most this long: a pipe that polls writable takes it without blocking, so
# a peer that never reads its answers cannot hold the refusing server past LIMIT_S.
_WRITE_SIZE: Final = select.PIPE_BUF


def answer_pending(reason: str, *, read_fd: int = 0, write_fd: int = 1) -> int:
    """Answer each request that arrives in time with an error naming `reason`; how many were."""
    framer = LineFramer()
    start = time.monotonic()
    end, quiet = start + LIMIT_S, start + GRACE_S
    answered = frames = seen = 0
    while seen < _MAX_INPUT and frames < _MAX_FRAMES:
        chunk = _read(read_fd, min(quiet, end) - time.monotonic())
        if chunk is None:
            break
        seen += len(chunk)
        events = framer.feed(chunk) if chunk else framer.close()
        received = [event.data for event in events if type(event) is Frame][: _MAX_FRAMES - frames]
        frames += len(received)
        answers = [answer for data in received if (answer := _refusal(data, reason))]
        # The peer may be gone already; the stderr line still says why.
        if answers and not _write(write_fd, b"".join(answers), end):
            break
        answered += len(answers)
        if answers:
            quiet = time.monotonic() + REPLY_GRACE_S
        if not chunk:
            break
    return answered


def _read(fd: int, timeout: float) -> bytes | None:
    """What `fd` holds within `timeout` (b"" at its end); None when nothing came or it fails."""
    try:
        if not readable(fd, max(0.0, timeout)):
            return None
        return os.read(fd, _READ_SIZE)
    except (OSError, ValueError):
        return None


def _write(fd: int, data: bytes, end: float) -> bool:
    """Write `data` to `fd` before the monotonic `end`; whether it all went."""
    try:
        for offset in range(0, len(data), _WRITE_SIZE):
            if not writable(fd, max(0.0, end - time.monotonic())):
                return False
            os.write(fd, data[offset : offset + _WRITE_SIZE])
    except (OSError, ValueError):
        return False
    return True


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
