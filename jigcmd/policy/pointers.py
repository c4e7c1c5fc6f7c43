"""How refusals name places and values: RFC 6901 JSON pointer tokens, and a value's kind."""

from __future__ import annotations

__all__ = ["escape", "kind"]


def escape(token: str) -> str:
    """One JSON pointer reference token (RFC 6901: `~` → `~0`, `/` → `~1`)."""
    return token.replace("~", "~0").replace("/", "~1")


def kind(value: object) -> str:
    """A JSON-ish name for what `value` is, for messages like "must be a string, not null"."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__
