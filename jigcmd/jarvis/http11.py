"""uvicorn's h11 protocol with the bounds it leaves out, for a server any local process reaches.

uvicorn arms its keep-alive timer only after an answer and disarms it on every byte, so a
connection that never completes its request head is held forever (uvicorn issue #160), and
its `limit_concurrency` answers 503 only once a head is complete. Each connection here:

- must complete its request head within `header_timeout_s` of its accept or of its previous
  answer (a deadline, not reset by a trickle of bytes): a head begun (a byte of it, sent
  alone or with the request before) is then answered 408 and closed; a connection that sent
  no byte of one, never used or idle after its answer, is closed without a word (as uvicorn
  and nginx close an idle one: nobody asked anything, and a 408 could be read as the answer
  to a request written just then);
- may send a head of at most `max_head_bytes`, however it arrives (`headsize.py`; h11 bounds
  only an incomplete one): otherwise 400 and closed, like a request h11 cannot parse (both
  as JSON errors, the one shape jarvis answers in);
- must then deliver its body within `body_timeout_s`: otherwise 408 (when no answer began)
  and closed;
- must take each answer: once what jarvis writes no longer fits in the socket, the client
  has `write_timeout_s` to take all of it (a deadline, not reset by reading a byte now and
  then), or the connection is dropped (reset); while so stalled it may give way to a
  newcomer, whatever its request's state. An answer handed to the kernel whole is not
  destroyed while the client is within that bound: an idle connection whose last answer the
  kernel still holds unacknowledged at its header deadline is kept (stalled, reading no
  more requests) until its client took it, then closed, and reset only once
  `write_timeout_s` have passed since that answer was handed over (a client that never
  reads must not pin kernel memory);
- has its bearer token checked as soon as the head is in (`tokengate.py`), before the
  application sees the request: a wrong one is a 403 JSON error (two `Authorization`
  headers a 400) and the connection is closed, its body unread, and the refusal is counted
  for the audit (`refused`, see jarvis/refusals.py); a right one leaves its actor in the
  request's scope (`auth.AUTHORISED_ACTOR`), so that what the application refuses of it is
  audited as that actor's;
- is held in `Connections`, which chooses who gives way when the cap is reached; one that
  gives way while it waits for a request is answered 503 (`GAVE_WAY`, `Retry-After: 1`),
  never closed without a word: its client may have sent its request, or be about to send
  it, and must learn that nothing ran. Its end of stream follows the client's request, or
  `leaving_linger_s`, whichever comes first (a client that saw the end of stream before it
  wrote would fail to write, not knowing why), and at most `max_leaving` linger at once;
- has a request h11 refuses answered with h11's reason (`h11parser.py`), and its version
  and framing checked before the token (`requestline.py`), each audited as its actor's when
  the token is valid (`attribution.py`);
- is never handed to a WebSocket protocol, and has a request it half-closed after answered
  (`halfclose.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import socket
import struct
import termios
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Literal, cast

import h11
from uvicorn.config import Config
from uvicorn.server import ServerState

from jigcmd.jarvis.app import MAX_BODY_BYTES
from jigcmd.jarvis.attribution import head_attribution, unaudited
from jigcmd.jarvis.auth import CONNECTION_ANSWER, Credentials
from jigcmd.jarvis.connections import ConnectionLimits, Connections
from jigcmd.jarvis.h11parser import Parser
from jigcmd.jarvis.headsize import MAX_HEAD_BYTES, HeadSize
from jigcmd.jarvis.rawanswers import raw_error, reason_phrase
from jigcmd.jarvis.tokengate import TokenGate
from jigcmd.jarvis.tools import ToolError

__all__ = ["GAVE_WAY", "BoundedH11Protocol", "bounded_protocol"]

Phase = Literal["head", "body", "request"]

logger = logging.getLogger("jigcmd.jarvis")
# SO_LINGER on, 0 s: close() resets the connection and discards what it had yet to send.
_RESET = struct.pack("ii", 1, 0)
# How often an idle connection closing with its last answer unread asks the kernel again.
_UNACKNOWLEDGED_POLL_S = 0.1
# The 503 of a connection that gave way before a request on it was read.
GAVE_WAY = (
    "jarvis needed this connection for a newer one before it read a request on it "
    "(at most --max-connections are held); nothing ran; retry"
)


class BoundedH11Protocol(TokenGate):
    """One connection: its deadlines, its token check (`TokenGate`) and its place among the
    held ones."""

    limits: ClassVar[ConnectionLimits]
    held: ClassVar[Connections[BoundedH11Protocol]]
    # Told what `TokenGate.audited` is (actor, tool, refusal) of a head h11 refused, from a
    # callback that cannot await (`headaudits.py`).
    head_refused: ClassVar[staticmethod[[str, str, ToolError], None]]
    # The connections that gave way and linger with their 503 (oldest first).
    leaving: ClassVar[dict[BoundedH11Protocol, None]]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # uvicorn's parser, with uvicorn's bound, but keeping why it refused a request.
        limit = config.h11_max_incomplete_event_size
        self.conn = Parser(h11.SERVER, limit if limit is not None else MAX_HEAD_BYTES)
        self._deadline: asyncio.TimerHandle | None = None
        # Armed while an answer waits in the transport for the client to read (`pause_writing`).
        self._write_deadline: asyncio.TimerHandle | None = None
        self._stalled = False
        # When the last answer was handed whole to the kernel (the idle close's write deadline).
        self._handed_at = self.loop.time()
        self._head = HeadSize(self.limits.max_head_bytes)
        self._phase: Phase = "request"
        # Gave way: answered 503, reading only to discard, until the end of stream.
        self._leaving = False
        # How many times it waited for a request head (more than once: it answered one).
        self._heads = 0
        self.app = self._token_checked(self.app)

    # -- the connection's life ------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection waits for its first head, under the header deadline."""
        super().connection_made(transport)
        # Told (`pause_writing`) as soon as a byte waits in the transport, not after 64 KiB
        # more than the socket holds: a client that does not read is seen at once, its
        # write deadline starts, and each answer waits in jarvis until the last one left.
        transport.set_write_buffer_limits(high=0)
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        """Closed: no deadline, no longer held."""
        self._disarm()
        self._disarm_write()
        self.held.remove(self)
        self.leaving.pop(self, None)
        super().connection_lost(exc)

    def _request_in_progress(self) -> bool:
        """A request is read whole and not yet answered (`HalfClose`)."""
        return self._phase == "request" and not self._leaving

    def _should_upgrade(self) -> bool:
        """Never hand the connection to a WebSocket protocol (`ws="none"` in server.py, and
        here too): it would skip the token, the deadlines and the count of held connections.
        An Upgrade request is a request like any other (app.py refuses a WebSocket one)."""
        return False

    def data_received(self, data: bytes) -> None:
        """The head's bytes are measured before h11 parses them."""
        if self._leaving:
            # The request that arrives after the 503 is not read: its client has the answer,
            # and now the end of stream after it.
            if not self.transport.is_closing() and self.transport.can_write_eof():
                self.transport.write_eof()
            return
        if self._phase == "head" and not self._head.feed(data):
            self._head_too_large()
            return
        super().data_received(data)

    def handle_events(self) -> None:
        """uvicorn's parsing, then the phase (head, body, request) the connection is in now.

        Also where a pipelined request's head, read with the previous one, is parsed once
        that one is answered: the phase is followed first, so that head is measured too.
        """
        self._follow()
        if self.transport.is_closing():
            return
        super().handle_events()
        self._follow()

    def give_way(self, *, at_once: bool = False) -> None:
        """Make room for a new connection: a waiting one is answered 503, a stalled one dropped.

        An answer its client has not taken is dropped with it (a plain close would keep the
        socket until the client reads it). `at_once` (no descriptor left): the 503 is followed
        by the end of stream at once, the socket not left to linger.
        """
        self._disarm()
        if self.transport.is_closing():
            return
        if self.transport.get_write_buffer_size() or _unacknowledged(self.transport):
            logger.info(
                "gave way to a new connection: dropped one whose client had not taken its answer"
            )
            self._drop()
        elif self._stalled:
            logger.info(
                "gave way to a new connection: closed one whose client took its answer late"
            )
            self.transport.close()
        else:
            logger.info(
                "gave way to a new connection: answered 503 to one %s",
                "idle after its answer"
                if self._heads > 1
                else "that sent no complete request head",
            )
            self._leave(at_once=at_once)

    def _leave(self, *, at_once: bool) -> None:
        """Answer 503 and linger, the end of stream after the client's request (or the linger)."""
        self._leaving = True
        self.transport.write(
            raw_error(503, "Service Unavailable", GAVE_WAY, extra="retry-after: 1\r\n")
        )
        if at_once:
            self.transport.close()
            return
        self._deadline = self.loop.call_later(self.limits.leaving_linger_s, self.transport.close)
        self.leaving[self] = None
        while len(self.leaving) > self.limits.max_leaving:
            oldest = next(iter(self.leaving))
            self.leaving.pop(oldest)
            oldest.transport.close()

    def pause_writing(self) -> None:
        """An answer waits for the client to read: its write deadline runs, it may give way."""
        super().pause_writing()
        self._stalled = True
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(
                self.limits.write_timeout_s, self._write_expired
            )
        if not self.transport.is_closing() and not self._leaving:
            self.held.stalled(self)

    def resume_writing(self) -> None:
        """The client took everything written: held as its request's phase says again."""
        super().resume_writing()
        self._handed_at = self.loop.time()
        self._stalled = False
        self._disarm_write()
        if not self.transport.is_closing():
            self._hold()

    def _write_expired(self) -> None:
        self._write_deadline = None
        logger.info(
            "dropped a connection whose client did not take its answer within %g s",
            self.limits.write_timeout_s,
        )
        self._drop()

    def _drop(self) -> None:
        """Reset the connection: what waits for the client, in jarvis and in the kernel, goes.

        A plain close would leave the kernel sending the socket's full buffer (megabytes) to
        a client that does not read, the socket orphaned but alive, for minutes.
        """
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        self.transport.abort()

    def _disarm_write(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    # -- phases and deadlines -------------------------------------------------------------

    def _follow(self) -> None:
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            phase: Phase = "head"
        elif state is h11.SEND_BODY:
            phase = "body"
        else:
            phase = "request"
        if phase == self._phase:
            return
        self._phase = phase
        self._disarm()
        if not self._stalled:
            self._hold()
        if phase == "head":
            self._heads += 1
            self._handed_at = self.loop.time()
            self._arm(self.limits.header_timeout_s)
            self._head.reset()
            pending, _ = self.conn.trailing_data
            if pending and not self._head.feed(pending):
                self._head_too_large()
        elif phase == "body":
            self._arm(self.limits.body_timeout_s)

    def _hold(self) -> None:
        """Held as the phase says: waiting for a head (may give way), else busy."""
        if self._leaving:
            return
        if self._phase == "head":
            self.held.waiting(self, authorized=self._authorized)
        else:
            self.held.busy(self)

    def _arm(self, seconds: float) -> None:
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == "head":
            self._head_expired()
            return
        if self.cycle is not None and not self.cycle.response_started:
            message = f"request body not complete within {self.limits.body_timeout_s:g} s"
            # The application, told of the disconnect, audits the call with this answer.
            cast("dict[str, Any]", self.cycle.scope)[CONNECTION_ANSWER] = message
            self.transport.write(raw_error(408, "Request Timeout", message))
        self.transport.close()

    def _head_expired(self) -> None:
        """The header deadline: a head begun is answered 408 and closed; a connection that
        sent no byte of one (never used, or idle after its answer) is closed without a word.

        Its bytes are those h11 holds, however they came: alone, or read with the request
        before (pipelined), the same partial head either way. Here a blank line before a
        request line (RFC 9112 §2.2) begins none; h11 itself refuses some (400) before this
        deadline comes, an older edge this does not change.
        """
        pending, _ = self.conn.trailing_data
        if not pending.lstrip(b"\r\n"):
            self._close_idle()
            return
        self._disarm()
        self.transport.write(
            raw_error(
                408,
                "Request Timeout",
                f"request head not complete within {self.limits.header_timeout_s:g} s",
            )
        )
        self.transport.close()

    def timeout_keep_alive_handler(self) -> None:
        """uvicorn's idle timer, armed with the same bound after each answer: the header
        deadline's (`_head_expired`), whichever of the two fires first. No byte after the
        answer disarms it when the next head's first bytes came with the request before."""
        if not self.transport.is_closing() and not self._leaving:
            self._head_expired()

    def _close_idle(self) -> None:
        """Close an idle connection, without a word, once its client took its last answer.

        While the kernel holds some of that answer unacknowledged the client is still within
        its write deadline (`write_timeout_s` from the hand-over): the connection waits,
        stalled (it may give way) and reading nothing, and is reset only past that deadline,
        since a plain close would leave the kernel sending to a client that does not read.
        """
        self._disarm()
        if self.transport.is_closing():
            return
        if self.transport.get_write_buffer_size():
            self._drop()
            return
        if not _unacknowledged(self.transport):
            self.transport.close()
            return
        if self.loop.time() - self._handed_at >= self.limits.write_timeout_s:
            logger.info(
                "dropped an idle connection whose client did not take its last answer within %g s",
                self.limits.write_timeout_s,
            )
            self._drop()
            return
        if not self._stalled:
            self._stalled = True
            self.transport.pause_reading()
            self.held.stalled(self)
        # The kernel does not tell when its peer acknowledged the last byte: it is asked.
        self._deadline = self.loop.call_later(_UNACKNOWLEDGED_POLL_S, self._close_idle)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot parse, in the one JSON error shape, with
        h11's reason (`h11parser.py`); a call whose body it was is audited with that answer."""
        self._disarm()
        status, message = 400, f"malformed request: {msg}"
        refusal = self.conn.refusal if isinstance(self.conn, Parser) else None
        if refusal is not None and refusal.status == 413:
            status, message = 413, f"request body larger than {MAX_BODY_BYTES} bytes"
        elif refusal is not None:
            status, message = refusal.status, refusal.message
        if self.cycle is not None and not self.cycle.response_started:
            # The application, told of the disconnect, audits the call with this answer.
            cast("dict[str, Any]", self.cycle.scope)[CONNECTION_ANSWER] = message
        head = self.conn.refused_head if isinstance(self.conn, Parser) else None
        found = head_attribution(self.credentials, head) if head is not None else None
        if found is not None:
            self.head_refused(*found, ToolError(status, message))
        self.transport.write(raw_error(status, reason_phrase(status), message))
        self.transport.close()

    def _head_too_large(self) -> None:
        self._disarm()
        message = f"request head larger than {self.limits.max_head_bytes} bytes"
        self.transport.write(raw_error(400, "Bad Request", message))
        self.transport.close()


def _unacknowledged(transport: asyncio.Transport) -> int:
    """The bytes the kernel holds for the socket that its peer has not acknowledged."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        held = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, bytes(4))
    except OSError:
        return 0
    count: int = struct.unpack("i", held)[0]
    return count


def bounded_protocol(
    limits: ConnectionLimits,
    held: Connections[BoundedH11Protocol],
    credentials: Credentials,
    refused: Callable[[str], None] = lambda reason: None,
    audited: Callable[[str, str, ToolError], Awaitable[None]] | None = None,
    *,
    head_refused: Callable[[str, str, ToolError], None] = lambda actor, tool, refusal: None,
) -> type[BoundedH11Protocol]:
    """The protocol class of one server: its limits, its held connections, its token, and
    whom it tells of each request refused for the token (`refused`) or, its token valid,
    before the application (`audited`; `head_refused` for a head h11 refused)."""

    class Bounded(BoundedH11Protocol):
        pass

    Bounded.limits = limits
    Bounded.held = held
    Bounded.credentials = credentials
    Bounded.refused = staticmethod(refused)
    Bounded.audited = staticmethod(audited or unaudited)
    Bounded.head_refused = staticmethod(head_refused)
    Bounded.leaving = {}
    return Bounded
