"""JSON text for people: reports, schema files and the demo's account (never digests or frames).

Non-ASCII characters are written as themselves (the output is UTF-8); `indent` and `sort_keys`
mean what they mean for the standard library, whose encoder this is: the one module that
imports it, so that nobody else decodes JSON with a parser that accepts duplicate keys.
"""

from __future__ import annotations

import json

__all__ = ["dumps"]


def dumps(value: object, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """`value` as JSON text, UTF-8 characters as they are."""
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys)
