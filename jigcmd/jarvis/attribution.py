"""Whose request it was that the connection refused before the application saw it.

A request refused for its version or framing (`requestline.py`), or whose head h11 refused
(`h11parser.py`: 400, 413, 501), carried a bearer token all the same: when that token is
valid the refusal is one audit row of its actor, the tool its target named, as the
application's own refusals of an authenticated request are; without a valid one it is only
counted (`refusals.py`). A head h11 refused is read for this alone: its request line's
target and its `Authorization` lines, nothing of it served.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote

from jigcmd.jarvis.app import tool_of
from jigcmd.jarvis.auth import AuthError, Credentials
from jigcmd.jarvis.tools import ToolError

__all__ = ["actor_of", "head_attribution", "unaudited"]

_AUTHORIZATION = re.compile(rb"^authorization[ \t]*:[ \t]*([^\r\n]*?)[ \t]*\r?$", re.I | re.M)
_ABSOLUTE = re.compile(rb"^https?://[^/]*", re.I)
# The head's end, its first blank line: what follows (a body, the next pipelined request) was
# read with it but is not its.
_HEAD_END = re.compile(rb"\n\r?\n")


def actor_of(credentials: Credentials, authorization: Sequence[str]) -> str | None:
    """The actor of a request's `Authorization` values when they pass the check, else None."""
    try:
        return credentials.check_all(authorization)
    except AuthError:
        return None


def head_attribution(credentials: Credentials, head: bytes) -> tuple[str, str] | None:
    """The actor and the tool of a request head h11 refused, when its token is valid."""
    end = _HEAD_END.search(head)
    head = head[: end.start()] if end is not None else head
    found = [value.decode("latin-1") for value in _AUTHORIZATION.findall(head)]
    actor = actor_of(credentials, found)
    if actor is None:
        return None
    line = head.split(b"\n", 1)[0].split(b" ")
    target = _ABSOLUTE.sub(b"", line[1]) if len(line) == 3 else b""
    path = unquote(target.partition(b"?")[0].decode("latin-1"))
    return actor, tool_of(path)[:128]


async def unaudited(actor: str, tool: str, refusal: ToolError) -> None:
    """No audit trail (a server without a service behind it)."""
