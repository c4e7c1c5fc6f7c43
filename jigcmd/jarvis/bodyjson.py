"""A request body as strict JSON, or the 400 that says which rule it breaks and where. Pure.

`jsonio.strict` names the JSON pointer of every fault but one: an integer literal too long
for msgspec to decode at all, which it can only call out of range. jarvis has it found
(`faults.long_integer`: the body is at most 64 KiB), so that a 5000-digit `run_id` is
refused in the words of a 20-digit one, never in the decoder's own.
"""

from __future__ import annotations

from jigcmd.jarvis.tools import ToolError
from jigcmd.jsonio.faults import long_integer
from jigcmd.jsonio.strict import IntegerTooLong, StrictJSONError, loads

__all__ = ["body_json"]


def body_json(data: bytes) -> object:
    """The body's value; a `ToolError` 400 when it is not one strict JSON/1 text."""
    try:
        return loads(data)
    except IntegerTooLong:
        found = long_integer(data) or "an integer literal too long to decode is beyond ±(2^53-1)"
        raise ToolError(400, f"request body is not strict JSON: {found}") from None
    except StrictJSONError as exc:
        raise ToolError(400, f"request body is not strict JSON: {exc}") from None
