"""How long a request head is, measured on the bytes as they arrive. Pure (sans-IO).

h11 bounds only a head it is still waiting for the end of: one that arrives whole in a
single read (asyncio reads up to 256 KiB) is parsed whatever its size. `HeadSize` is fed
every byte of the head phase, in the pieces the connection reads them, and says as soon as
the head, complete or not, is larger than the bound: each byte is looked at once (the end
of a head may straddle two pieces), so a head trickled byte by byte costs no more than one
read whole. A head ends at its first empty line, `\\r\\n` or a bare `\\n` as h11 reads them.
"""

from __future__ import annotations

import re

__all__ = ["MAX_HEAD_BYTES", "HeadSize"]

# h11's own bound on an incomplete head (its default), now on every head.
MAX_HEAD_BYTES = 16 * 1024
_END = re.compile(rb"\n\r?\n")
# The most of a head's end that the previous piece can hold: `\n\r` of `\n\r\n`.
_KEPT = 2


class HeadSize:
    """The size of one request head so far, against `limit`; `reset` for the next head."""

    def __init__(self, limit: int = MAX_HEAD_BYTES) -> None:
        self.limit = limit
        self._seen = 0
        self._tail = b""
        self._complete = False

    def reset(self) -> None:
        """A new head begins (a new connection, or the previous request answered)."""
        self._seen = 0
        self._tail = b""
        self._complete = False

    def feed(self, data: bytes) -> bool:
        """Take the next bytes read; False once the head is known to be larger than `limit`.

        Bytes after the head's end (the body, a pipelined request) are not counted.
        """
        if self._complete:
            return True
        window = self._tail + data
        end = _END.search(window)
        if end is not None:
            self._complete = True
            return self._seen + end.end() - len(self._tail) <= self.limit
        self._seen += len(data)
        self._tail = window[-_KEPT:]
        return self._seen <= self.limit
