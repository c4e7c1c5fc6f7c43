"""What the connection refuses or rewrites of a parsed request before its token is checked.

h11 parses any `HTTP/<digit>.<digit>` and takes a Transfer-Encoding over a Content-Length;
uvicorn routes an absolute-form target as if it were a path. Here, on the request's ASGI scope:

- a major version other than 1 (an HTTP/2 prior-knowledge preface, `PRI * HTTP/2.0`, among
  them) is refused 505; a higher minor one (`HTTP/1.2`) is served as HTTP/1.1, as RFC 9112
  §2.3 asks of a recipient;
- Content-Length together with Transfer-Encoding is refused 400 (RFC 9112 §6.3 allows either
  that or an answer followed by a close; a refusal leaves no framing two parsers could read
  two ways);
- an absolute-form target (`http://127.0.0.1:PORT/tools/…`), which RFC 9112 §3.2.2 says a
  server must accept, is served as its path, and its authority replaces the `Host` header
  (as §3.2.2 asks), which the application then checks like any Host (a foreign one is 421).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

__all__ = ["framing_refusal", "origin_form"]

_ABSOLUTE = "http://"


def framing_refusal(scope: dict[str, Any]) -> tuple[int, str, str] | None:
    """The refusal of a request's version or framing, if refused: its status, its fixed
    reason (the audit counts by it) and its words."""
    version: str = scope["http_version"]
    if not version.startswith("1."):
        words = f"HTTP/{version} is not supported: jarvis speaks HTTP/1.1 (and 1.0)"
        return 505, "HTTP version not supported", words
    names = {name for name, _ in scope["headers"]}
    if b"content-length" in names and b"transfer-encoding" in names:
        reason = "both Content-Length and Transfer-Encoding"
        return 400, reason, f"malformed request: {reason}"
    return None


def origin_form(scope: dict[str, Any]) -> None:
    """Rewrite an absolute-form `http://` target to its path, its authority as the Host."""
    raw: bytes = scope["raw_path"]
    if raw[: len(_ABSOLUTE)].lower() != _ABSOLUTE.encode():
        return
    authority, slash, rest = raw[len(_ABSOLUTE) :].partition(b"/")
    raw_path = slash + rest or b"/"
    scope["raw_path"] = raw_path
    scope["path"] = unquote(raw_path.decode("ascii"))
    headers = [(name, value) for name, value in scope["headers"] if name != b"host"]
    scope["headers"] = [(b"host", authority), *headers]
