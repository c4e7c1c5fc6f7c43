"""A client's end of stream, on uvicorn's h11 protocol: a half-close is answered.

uvicorn's `eof_received` returns None, so asyncio closes the transport as soon as the
client ends its stream: a client that only half-closed (`shutdown(SHUT_WR)` after a complete
request, legal HTTP/1.1) read no answer though its call ran, and would run it again. Here a
request read whole is still answered, then the connection closed; one not complete never
will be, and is closed at once. A client that closed its socket ends its stream the same
way, and is told apart by the reset its kernel answers an interim `100 Continue` with, sent
again at each poll until the answer starts; an HTTP/1.0 client, which may be sent no 1xx,
cannot be told apart, and is taken as gone (a call not yet started then runs not): its end
of stream is looked for in the kernel as its slot comes (`_not_ended`), since asyncio may
not have read it yet when a free slot is taken in the same turn the request was read.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from jigcmd.jarvis.auth import CALLER_CHECK

__all__ = ["HalfClose"]

logger = logging.getLogger("jigcmd.jarvis")
# How often a half-closed connection whose answer has not begun asks the kernel for a reset.
_RESET_POLL_S = 0.1
_CONTINUE = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")


class HalfClose(H11Protocol):
    """uvicorn's h11 protocol, answering a request its client half-closed after."""

    # The client ended its stream.
    _eof = False
    # The next `_poll` of a half-closed connection whose answer has not begun.
    _next_poll: asyncio.TimerHandle | None = None

    def _request_in_progress(self) -> bool:
        """A request is read whole and not yet answered (the subclass knows its phases)."""
        raise NotImplementedError

    def _undecided(self) -> bool:
        """A request's head is in but what follows it is not parsed yet (`TokenGate`): an
        end of stream meanwhile is judged once it is (`_judge_end`)."""
        return False

    def handle_events(self) -> None:
        """uvicorn's; an HTTP/1.0 request is then told how to ask whether its caller ended."""
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and not _takes_interim(cycle.scope["http_version"]):
            cast("dict[str, Any]", cycle.scope).setdefault(CALLER_CHECK, self._not_ended)

    def _not_ended(self) -> bool:
        """Whether an HTTP/1.0 client has not ended its stream (the kernel peeked too: the
        end may wait there unread behind a request read and handled in the same turn)."""
        if self._eof or self.transport.is_closing():
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        # A duplicate of the descriptor: asyncio's wrapper lends no recv.
        with socket.fromfd(sock.fileno(), sock.family, sock.type) as peer:
            try:
                return peer.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
            except BlockingIOError:
                return True
            except OSError:
                return False

    def eof_received(self) -> bool:  # type: ignore[override]
        """The client's end of stream: a request it completed is still answered, then closed.

        A half-close (`shutdown(SHUT_WR)`, as `nc -N` does) ends what the client sends, not
        what it reads: a client told nothing would retry a call that ran. A request not
        complete (head or body) never will be: closed at once. So is one whose client cannot
        be told apart from one that left (`_probe`): a call that has not started runs not.
        """
        self._eof = True
        # True: asyncio keeps the transport open for the answer (uvicorn's returns None).
        return self._undecided() or (self._request_in_progress() and self._probe())

    def _probe(self) -> bool:
        """Tell a closed client from a half-closed one (both end their stream alike); False
        when it cannot be told, the client then taken as gone.

        An interim `100 Continue` (every HTTP/1.x client, x ≥ 1, must parse a 1xx, RFC 9110
        §15.2) is read by a half-closed client and ignored; a closed one's kernel answers it
        with a reset (`_still_there`), a disconnect for the application (a `run.create` waiting for
        a slot then gets no run). An HTTP/1.0 client may be sent no 1xx: it cannot be told.
        """
        cycle = self.cycle
        if cycle is None or cycle.response_started or self.conn.our_state is not h11.SEND_RESPONSE:
            # Its answer is being written (or it has none to get): nothing left to decide.
            return True
        if not _takes_interim(cycle.scope["http_version"]):
            logger.info("an HTTP/1.0 client ended its stream before its answer: taken as gone")
            return False
        cast("dict[str, Any]", cycle.scope)[CALLER_CHECK] = self._still_there
        self._poll()
        return True

    def _poll(self) -> None:
        """Until the answer starts, ask whether the client is there (`_still_there`) again."""
        self._next_poll = None
        cycle = self.cycle
        if cycle is None or cycle.response_started or not self._still_there():
            return
        self._next_poll = self.loop.call_later(_RESET_POLL_S, self._poll)

    def _still_there(self) -> bool:
        """Another interim answer, then the kernel asked for a reset; False once gone.

        asyncio reads no more after an end of stream, so it would learn of the reset only
        when the answer is written: the kernel is asked. Each time another interim is sent:
        a client that read the first one and closed after it sends nothing more, and only
        data it is sent draws its kernel's reset (RFC 9110 §15.2 allows many 1xx). On
        loopback the reset is there as the write returns: a call asks as its slot comes.
        """
        cycle = self.cycle
        if self.transport.is_closing():
            return False
        if cycle is None or cycle.response_started:
            return True
        self.transport.write(self.conn.send(_CONTINUE))
        sock = self.transport.get_extra_info("socket")
        try:
            reset = sock is None or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0
        except OSError:
            reset = True
        if reset:
            # No socket to ask (or no answer) cannot be told from a reset: taken as gone.
            logger.info("the client closed its connection before its answer was written")
            self.transport.abort()
        return not reset

    def on_response_complete(self) -> None:
        """uvicorn's (the next pipelined request is read); after an end of stream, the close
        once nothing read is left to answer."""
        super().on_response_complete()
        if not self._eof or self.transport.is_closing():
            return
        if self._next_poll is not None:
            self._next_poll.cancel()
            self._next_poll = None
        if not self._undecided():
            self._judge_end()

    def _judge_end(self) -> None:
        """After the client's end of stream, the request read next: probed in its turn when
        whole (a request pipelined before the end), else the connection closed."""
        if not self._request_in_progress() or not self._probe():
            self.transport.close()


def _takes_interim(version: str) -> bool:
    """Whether a client of this HTTP version must parse a 1xx (1.1 and any later 1.x)."""
    major, _, minor = version.partition(".")
    return major == "1" and minor.isdigit() and int(minor) >= 1
