"""The token, as soon as the head is in: what a connection puts before jarvis's application.

Layered on uvicorn's h11 protocol (as `halfclose.py` is) and under the connection's bounds
(`http11.py`). Each request's version and framing are checked first (`requestline.py`), then
its bearer token, before the application sees it: a wrong token is a 403 JSON error (two
`Authorization` headers a 400), counted for the audit (`refused`, see jarvis/refusals.py); a
refusal of the framing is audited as the actor's when the token is valid (`attribution.py`).
A right token leaves its actor in the request's scope (`auth.AUTHORISED_ACTOR`), so that what
the application refuses of it is audited as that actor's, and lets what followed the head be
parsed: until then none of it is, whether or not it came in the same read as the head. An
answer the application begins before the request body is in says `Connection: close`
(`_closing_unread`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ClassVar, cast

import h11
from uvicorn._types import (
    ASGI3Application,
    ASGIReceiveCallable,
    ASGISendCallable,
    ASGISendEvent,
    Scope,
)

from jigcmd.jarvis.app import tool_of
from jigcmd.jarvis.attribution import actor_of
from jigcmd.jarvis.auth import AUTHORISED_ACTOR, AuthError, Credentials
from jigcmd.jarvis.h11parser import Parser
from jigcmd.jarvis.halfclose import HalfClose
from jigcmd.jarvis.rawanswers import refused_answer
from jigcmd.jarvis.requestline import framing_refusal, origin_form
from jigcmd.jarvis.tools import ToolError

__all__ = ["TokenGate"]

_CLOSE = (b"connection", b"close")


class TokenGate(HalfClose):
    """uvicorn's h11 protocol, checking each request's framing and token before the application."""

    credentials: ClassVar[Credentials]
    # Told each refusal of a request without the token (its fixed reason), for the audit.
    # A staticmethod: a plain function set on the class would be bound to each instance.
    refused: ClassVar[staticmethod[[str], None]]
    # Told each refusal, before the application, of a request whose token is valid: its
    # actor, the tool its target named, the refusal (`attribution.py`).
    audited: ClassVar[staticmethod[[str, str, ToolError], Awaitable[None]]]
    # A request on this connection carried the valid token: while it waits for its next
    # one, it is among the last to give way (`Connections.waiting`).
    _authorized = False

    def _token_checked(self, app: ASGI3Application) -> ASGI3Application:
        async def checked(
            scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
        ) -> None:
            if scope["type"] == "http":
                found = [
                    value.decode("latin-1")
                    for name, value in scope["headers"]
                    if name == b"authorization"
                ]
                framing = framing_refusal(cast("dict[str, Any]", scope))
                if framing is not None:
                    status, reason, message = framing
                    actor = actor_of(self.credentials, found)
                    if actor is None:
                        self.refused(reason)
                    else:
                        refusal = ToolError(status, message)
                        await self.audited(actor, tool_of(scope["path"]), refusal)
                    await refused_answer(send, status, message)
                    return
                origin_form(cast("dict[str, Any]", scope))
                try:
                    actor = self.credentials.check_all(found)
                except AuthError as exc:
                    self.refused(str(exc))
                    await refused_answer(send, exc.status, exc.message)
                    return
                self._authorized = True
                # The application audits its own refusals of this request as the actor's.
                cast("dict[str, Any]", scope)[AUTHORISED_ACTOR] = actor
                self._let_in()
            await app(scope, receive, self._closing_unread(send))

        return checked

    def handle_events(self) -> None:
        """uvicorn's parsing, stopped at each request head until its token is checked.

        The parser holds what followed the head (`Parser.holding`), and no more is read
        meanwhile: a refusal, even of a body sent in the same write as its head, is the
        token's (403), never the body's, and the body is not read. A refused request's
        connection closes, the rest unread.
        """
        super().handle_events()
        if isinstance(self.conn, Parser) and self.conn.holding:
            self.flow.pause_reading()

    def _undecided(self) -> bool:
        """A request head is held for its token: whether it is whole is not known yet."""
        return isinstance(self.conn, Parser) and self.conn.holding

    def _let_in(self) -> None:
        """The token passed: what followed the head is read and parsed now; a client's end
        of stream meanwhile is judged then (`HalfClose._judge_end`)."""
        if not isinstance(self.conn, Parser) or not self.conn.holding:
            return
        self.conn.let_in()
        self.flow.resume_reading()
        self.handle_events()
        if self._eof and not self.transport.is_closing():
            self._judge_end()

    def _closing_unread(self, send: ASGISendCallable) -> ASGISendCallable:
        """`send`, saying `Connection: close` on an answer begun before the request body was in.

        An answer that needs no body (413 by its declared length, 415, 404) leaves the rest
        of it on the wire, where uvicorn would wait for it until the body deadline and no
        next request could be read: the connection is closed with the answer instead, as
        the token's refusal is, and says so.
        """

        async def sending(message: ASGISendEvent) -> None:
            if message["type"] == "http.response.start" and self.conn.their_state is h11.SEND_BODY:
                start = cast("dict[str, Any]", message)
                headers = list(start.get("headers", ()))
                if not any(name.lower() == b"connection" for name, _ in headers):
                    message = cast("ASGISendEvent", {**start, "headers": [*headers, _CLOSE]})
            await send(message)

        return sending
