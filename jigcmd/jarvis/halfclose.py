"""A client's end of stream, on uvicorn's h11 protocol: a half-close is answered.

uvicorn's `eof_received` returns None, so asyncio closes the transport as soon as the
client ends its stream: a client that only half-closed (`shutdown(SHUT_WR)` after a complete
request, legal HTTP/1.1) read no answer though its call ran, and would run it again. Here a
request read whole is still answered, then the connection closed; one not complete never
will be, and is closed at once. A client that closed its socket ends its stream the same
way, and is told apart by the reset its kernel answers an interim `100 Continue` with.
"""

from __future__ import annotations

import logging
import socket

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HalfClose"]

logger = logging.getLogger("jigcmd.jarvis")
# How often a half-closed connection whose answer has not begun asks the kernel for a reset.
_RESET_POLL_S = 0.1


class HalfClose(H11Protocol):
    """uvicorn's h11 protocol, answering a request its client half-closed after."""

    # The client ended its stream.
    _eof = False

    def _request_in_progress(self) -> bool:
        """A request is read whole and not yet answered (the subclass knows its phases)."""
        raise NotImplementedError

    def eof_received(self) -> bool:  # type: ignore[override]
        """The client's end of stream: a request it completed is still answered, then closed.

        A half-close (`shutdown(SHUT_WR)`, as `nc -N` does) ends what the client sends, not
        what it reads: a client told nothing would retry a call that ran. A request not
        complete (head or body) never will be: closed at once.
        """
        self._eof = True
        if not self._request_in_progress():
            return False
        self._probe()
        # True: asyncio keeps the transport open for the answer (uvicorn's returns None).
        return True

    def _probe(self) -> None:
        """Tell a closed client from a half-closed one: both end their stream alike.

        An interim `100 Continue` (every HTTP/1.1 client must parse a 1xx, RFC 9110 §15.2)
        is read by a half-closed client and ignored; a closed one's kernel answers it with
        a reset (`_after_probe`), a disconnect for the application (a `run.create` waiting
        for a slot then gets no run). An HTTP/1.0 client may be sent no 1xx: it is taken as
        listening.
        """
        cycle = self.cycle
        if cycle is None or cycle.response_started or self.conn.our_state is not h11.SEND_RESPONSE:
            return
        if cycle.scope["http_version"] != "1.1":
            return
        self.transport.write(
            self.conn.send(
                h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
            )
        )
        self._after_probe()

    def _after_probe(self) -> None:
        """Until the answer starts: a reset (the socket's pending error) is a disconnect.

        asyncio reads no more after an end of stream, so it would learn of the reset only
        when the answer is written: the kernel is asked.
        """
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or cycle.response_started:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            logger.info("the client closed its connection before its answer was written")
            self.transport.abort()
            return
        self.loop.call_later(_RESET_POLL_S, self._after_probe)

    def on_response_complete(self) -> None:
        """uvicorn's (the next pipelined request is read); after an end of stream, the close
        once nothing read is left to answer."""
        super().on_response_complete()
        if self._eof and not self._request_in_progress() and not self.transport.is_closing():
            self.transport.close()
