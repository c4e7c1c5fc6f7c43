"""h11's server side, keeping why it refused a request, and the answer jarvis gives for it.

uvicorn answers every request h11 cannot parse with the same "Invalid HTTP request received."
The client is told h11's own reason instead, without the bytes it quotes (a client's bytes
are never echoed): `illegal header line`, `illegal chunk header`, `conflicting Content-Length
headers`, `Only Transfer-Encoding: chunked is supported` (501, as RFC 9112 §6.1 asks of a
transfer coding the server does not implement). A head with two `Content-Type` or two
`Content-Length` headers, which h11 would take, is refused here as h11 refuses two `Host`
headers: 400 `more than one … header`. A Content-Length that is a number too long
for h11 (more than 20 digits) is a body too large: 413, like any declared length past the
bound.
"""

from __future__ import annotations

import re

import h11

__all__ = ["Parser", "Refusal"]

# h11's words for a request's Host headers (h11/_events.py), and jarvis's for each.
_HOST_REFUSALS = {
    "Missing mandatory Host: header": "the Host header is required (HTTP/1.1)",
    "Found multiple Host: headers": "more than one Host header",
}
# Where h11 starts quoting the client's bytes (`"illegal header line: {!r}"`).
_QUOTED = re.compile(r": (?:bytearray\()?b['\"]")
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE | re.M)
# A head's end, its first blank line (h11 takes a bare LF too).
_HEAD_END = re.compile(rb"\n\r?\n")


def _repeated(request: h11.Request, head: bytes) -> str | None:
    """Why a request is refused for a header RFC 9110 allows once, sent more than once.

    h11 refuses two `Host` headers itself, but keeps the first of two `Content-Type` ones
    and merges equal `Content-Length` values (`5` and `5`, or `5, 5`) into one: a proxy in
    front may have read either differently, so neither is taken (as two `Authorization`
    headers are not, `auth.py`). The lengths are counted in the head's own bytes, up to its
    end (what follows is a body or the next request).
    """
    types = [name for name, _ in request.headers if name == b"content-type"]
    if len(types) > 1:
        return "more than one Content-Type header"
    end = _HEAD_END.search(head)
    values = _CONTENT_LENGTH.findall(head[: end.start()] if end is not None else head)
    if sum(len(value.split(b",")) for value in values) > 1:
        return "more than one Content-Length header"
    return None


class Refusal:
    """The status and words of jarvis's answer to a request h11 refused."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message


class Parser(h11.Connection):
    """h11's server side, remembering why it refused a request (uvicorn's 400 names none).

    The bytes of the head being read are kept (at most `limit`), so that a Content-Length
    h11 calls bad can be told apart: a number too long is a body too large (413).

    Each request head it returns holds the bytes after it (`holding`): none of them (its
    body, a request pipelined after it) is parsed until the head is let through (`let_in`),
    so a body byte read in the same write as its head is not judged before its token.
    """

    def __init__(self, our_role: type[h11.SERVER], limit: int) -> None:
        super().__init__(our_role, limit)
        self._limit = limit
        self._head = bytearray()
        self.refusal: Refusal | None = None
        # The head h11 refused (its bytes, up to the bound), when the refusal was of a head.
        self.refused_head: bytes | None = None
        # A request head was returned and not yet let through: what follows it waits unparsed.
        self.holding = False

    def receive_data(self, data: bytes) -> None:
        """h11's; while a head is awaited its bytes are kept too (up to the head bound)."""
        if self.their_state is h11.IDLE and len(self._head) <= self._limit:
            self._head += data[: self._limit + 1 - len(self._head)]
        super().receive_data(data)

    def start_next_cycle(self) -> None:
        """h11's; the next head starts with what was read after the previous request."""
        super().start_next_cycle()
        self._head = bytearray(self.trailing_data[0][: self._limit + 1])

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        """h11's next event (none while a head is held); a refusal's answer is kept, then
        the error raised."""
        if self.holding:
            return h11.NEED_DATA
        reading_head = self.their_state is h11.IDLE
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = self._answer(str(exc), exc.error_status_hint)
            self.refused_head = bytes(self._head) if reading_head else None
            raise
        if isinstance(event, h11.Request):
            twice = _repeated(event, bytes(self._head))
            if twice is not None:
                self.refusal = Refusal(400, twice, f"malformed request: {twice}")
                self.refused_head = bytes(self._head)
                raise h11.RemoteProtocolError(twice, error_status_hint=400)
            self._head.clear()
            self.holding = True
        return event

    def let_in(self) -> None:
        """The request whose head was returned may be read on: its token passed."""
        self.holding = False

    def _answer(self, reason: str, hint: int) -> Refusal:
        if reason == "bad Content-Length" and self._too_long_a_length():
            return Refusal(413, reason, "")
        words = _HOST_REFUSALS.get(reason) or _QUOTED.split(reason, maxsplit=1)[0]
        return Refusal(501 if hint == 501 else 400, reason, f"malformed request: {words}")

    def _too_long_a_length(self) -> bool:
        """Whether a Content-Length of the head read is a plain number (h11 takes 20 digits)."""
        values = _CONTENT_LENGTH.findall(bytes(self._head))
        lengths = [item.strip() for value in values for item in value.split(b",")]
        return any(length.isdigit() and len(length) > 20 for length in lengths)
