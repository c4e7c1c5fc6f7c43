"""Sans-IO line framing: bytes in, complete LF-terminated frames (or "oversized" events) out.

Frames are split on b"\\n" only; a b"\\r" before it stays part of the frame (JSON treats it as
whitespace). A frame longer than the limit is not buffered: its bytes are dropped as they arrive
until the next b"\\n", one `Oversized` event is reported (with the frame's first 64 KiB and its last
4 KiB, where a request's id is: JSON.stringify writes an SDK's `id` last), and framing
continues after it.
"""

from __future__ import annotations

import msgspec

__all__ = ["HEAD_BYTES", "MAX_FRAME_BYTES", "TAIL_BYTES", "Frame", "LineFramer", "Oversized"]

MAX_FRAME_BYTES = 16 * 1024 * 1024
# How much of an oversized frame is kept to answer it: what `jsonrpc.leading_id` scans,
# and the end where `jsonrpc.trailing_id` looks (an id is a short string or a number).
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 4 * 1024


class Frame(msgspec.Struct, frozen=True):
    """One complete frame, without its terminating b"\\n"."""

    data: bytes


class Oversized(msgspec.Struct, frozen=True):
    """A frame exceeded the limit and was discarded; `size` counts the bytes seen (at least).

    `head` is its first `HEAD_BYTES`, `tail` its last `TAIL_BYTES` (bounded: the rest is
    dropped as it arrives).
    """

    size: int
    head: bytes = b""
    tail: bytes = b""


class LineFramer:
    """Accumulates received bytes and yields frames; never holds more than the limit."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._max = max_frame_bytes
        self._buffer = bytearray()
        # Bytes of the current oversized frame dropped so far; -1 when not discarding.
        self._discarded = -1
        # The first and the last bytes of the oversized frame being discarded.
        self._head = b""
        self._tail = b""

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame currently buffered."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame | Oversized]:
        """Consume `data` and return the frames (and oversize events) it completed, in order."""
        events: list[Frame | Oversized] = []
        start = 0
        end = len(data)
        if self._discarded >= 0:
            newline = data.find(b"\n")
            if newline < 0:
                self._discarded += end
                self._tail = _last(self._tail, data)
                return events
            tail = _last(self._tail, data[:newline])
            events.append(Oversized(self._discarded + newline, self._head, tail))
            self._discarded = -1
            self._head = self._tail = b""
            start = newline + 1
        while start < end:
            newline = data.find(b"\n", start)
            if newline < 0:
                self._buffer += data[start:] if start else data
                if len(self._buffer) > self._max:
                    self._discarded = len(self._buffer)
                    self._head = bytes(self._buffer[:HEAD_BYTES])
                    self._tail = bytes(self._buffer[-TAIL_BYTES:])
                    self._buffer.clear()
                return events
            if self._buffer:
                self._buffer += data[start:newline]
                frame = bytes(self._buffer)
                self._buffer.clear()
            else:
                frame = data[start:newline]
            if len(frame) > self._max:
                events.append(Oversized(len(frame), frame[:HEAD_BYTES], frame[-TAIL_BYTES:]))
            else:
                events.append(Frame(frame))
            start = newline + 1
        return events

    def close(self) -> list[Frame | Oversized]:
        """Report what the peer left unterminated at end of input."""
        # An unterminated trailing frame is still a frame the peer sent; answer it rather than
        # dropping it silently.
        if self._discarded >= 0:
            events: list[Frame | Oversized] = [Oversized(self._discarded, self._head, self._tail)]
        elif self._buffer.strip():
            events = [Frame(bytes(self._buffer))]
        else:
            events = []
        self._buffer.clear()
        self._discarded = -1
        self._head = self._tail = b""
        return events


def _last(tail: bytes, data: bytes) -> bytes:
    """The last `TAIL_BYTES` of `tail` followed by `data` (copying at most that much)."""
    return (tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]
