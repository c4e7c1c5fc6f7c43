"""The zygote's messages to the server: queued, written as the socket takes them, never waited for.

One zygote supervises every envelope of its server from one loop, so a write that waits for
the server stalls every envelope: no deadline is enforced, no run's end is reported while it
waits. The server reads the control socket only when it warms the pool or launches; a burst
of preparations (each named by a `Ready`) can fill the socket, and a blocking write then
waits for a server that is itself waiting for those envelopes' reports.

So the zygote never writes to the control socket with a blocking call. A message is queued
here, written at once as far as the socket takes it (`MSG_DONTWAIT`), the rest when the
socket turns writable again (the loop's `want_writable`). What is queued is bounded by what
is alive: each message belongs to one envelope, and a message not yet begun is withdrawn
when its envelope is gone (a `Ready` for an envelope that no longer exists would only make
the server name it in a launch, which then prepares cold). At most one message per live
envelope waits here, and one begun message whose envelope is gone (a frame is never cut).
"""

from __future__ import annotations

import socket
from collections import OrderedDict

__all__ = ["Outbox"]


class Outbox:
    """Frames for the server, each keyed by the envelope it is about, written without waiting."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        # The rest of a frame the socket took only part of: written first, whatever happens.
        self.begun = b""
        # Frames not yet begun, oldest first, by envelope.
        self.waiting: OrderedDict[str, bytes] = OrderedDict()

    def __len__(self) -> int:
        """How many frames are queued (a begun one included)."""
        return len(self.waiting) + (1 if self.begun else 0)

    def put(self, key: str, data: bytes) -> None:
        """Queue `data` (one whole frame) about envelope `key`, after everything queued."""
        self.waiting[key] = data

    def withdraw(self, key: str) -> None:
        """Envelope `key` is gone: its frame goes nowhere, unless it is already begun."""
        self.waiting.pop(key, None)

    def flush(self) -> bool:
        """Write what the socket takes now; whether anything is left (raises OSError when the
        server is gone: EPIPE, ECONNRESET)."""
        while self.begun or self.waiting:
            if not self.begun:
                _key, self.begun = self.waiting.popitem(last=False)
            try:
                sent = self.sock.send(self.begun, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return True
            self.begun = self.begun[sent:]
        return False

    def clear(self) -> None:
        """Drop everything: the server is gone."""
        self.begun = b""
        self.waiting.clear()
