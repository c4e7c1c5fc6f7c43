"""Where a JSON text that is JSON's syntax breaks a strict JSON/1 rule.

`jsonio.strict` refuses such a text and says which rule it broke; a JSON-RPC layer still
wants the rest of it (the request's id, its method) and a pointer to the fault, so that the
refusal can be the call's own (`INVALID_INPUT` naming the place) rather than a parse error
nobody can match to a request. `decode` takes the text as the stdlib parser does, keeping
every fault marked (a repeated key, a lone surrogate, NaN/Infinity, an unsafe integer) and
`first_fault` finds the first one. The value `decode` returns is for reading only: a
repeated key's last value is kept, and a lone surrogate cannot be encoded.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from jigcmd.jsonio.strict import MAX_DEPTH, MAX_SAFE_INTEGER

__all__ = ["Fault", "decode", "first_fault", "plain", "repeats"]

# In a decoded `str` a valid pair is one character: any surrogate left is a lone one.
_LONE = re.compile("[\ud800-\udfff]")


class Fault(msgspec.Struct, frozen=True):
    """The first strict JSON/1 rule a decoded value breaks, and the JSON pointer where."""

    pointer: str
    problem: str


class _Object(dict[str, Any]):
    """An object as the text wrote it; `repeated` are its keys written twice, first first."""

    repeated: tuple[str, ...] = ()


class _NotANumber:
    """NaN or Infinity, kept as written (no JSON number is either)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    found = _Object(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        repeated: list[str] = []
        for key, _ in pairs:
            if key in seen and key not in repeated:
                repeated.append(key)
            seen.add(key)
        found.repeated = tuple(repeated)
    return found


def decode(data: bytes) -> object | None:
    """The text with its faults marked, or None when it is not JSON's syntax at all."""
    try:
        value: object = json.loads(data, object_pairs_hook=_pairs, parse_constant=_NotANumber)
    except (ValueError, RecursionError):
        return None
    return value


def first_fault(value: object, skip: str | None = None) -> Fault | None:
    """The first fault of a `decode`d value in document order, not looking at `skip`.

    A repeated key is the fault of the object holding it: a member `skip` names twice is
    still found.
    """
    stack: list[tuple[str, object, int]] = [("", value, 0)]
    while stack:
        pointer, item, depth = stack.pop()
        if pointer == skip:
            continue
        fault = _own_fault(pointer, item)
        if fault is not None:
            return fault
        if isinstance(item, dict | list) and depth == MAX_DEPTH:
            return Fault(pointer, f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend(
                (f"{pointer}/{_token(k)}", v, depth + 1) for k, v in reversed(item.items())
            )
        elif isinstance(item, list):
            stack.extend(
                (f"{pointer}/{i}", v, depth + 1) for i, v in reversed(list(enumerate(item)))
            )
    return None


def repeats(value: object, key: str) -> bool:
    """True when `value` is an object that writes `key` more than once."""
    return isinstance(value, _Object) and key in value.repeated


def plain(value: object) -> object:
    """A `decode`d value as plain dicts and lists, NaN and Infinity as None (for reading)."""
    root: list[Any] = [value]
    stack: list[dict[str, Any] | list[Any]] = [root]
    while stack:
        holder = stack.pop()
        keys = list(holder) if isinstance(holder, dict) else range(len(holder))
        for key in keys:
            item = holder[key]  # type: ignore[index]  # a key of this very holder
            if isinstance(item, dict):
                item = holder[key] = dict(item)  # type: ignore[index]
            if isinstance(item, dict | list):
                stack.append(item)
            elif type(item) is _NotANumber:
                holder[key] = None  # type: ignore[index]
    return root[0]


def _own_fault(pointer: str, item: object) -> Fault | None:
    """A fault of this value itself (not of what it holds)."""
    if isinstance(item, _Object):
        for key in item:
            if _LONE.search(key):
                return Fault(f"{pointer}/{_token(key)}", _lone(key))
        if item.repeated:
            key = item.repeated[0]
            return Fault(
                f"{pointer}/{_token(key)}", f"duplicate key {json.dumps(key, ensure_ascii=False)}"
            )
    elif type(item) is str:
        if _LONE.search(item):
            return Fault(pointer, _lone(item))
    elif type(item) is _NotANumber:
        return Fault(pointer, "NaN and Infinity are not JSON numbers")
    elif type(item) is float:
        if not math.isfinite(item):
            return Fault(pointer, "number out of range: non-finite numbers are not allowed")
    elif type(item) is int and not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
        return Fault(pointer, f"integer {item} is beyond ±(2^53-1)")
    return None


def _lone(text: str) -> str:
    found = _LONE.search(text)
    assert found is not None
    return f"lone surrogate escape \\u{ord(found.group()):04x}"


def _token(key: str) -> str:
    """A pointer token, its own lone surrogates shown as `\\uXXXX` so the pointer encodes."""
    escaped = key.replace("~", "~0").replace("/", "~1")
    return _LONE.sub(lambda lone: f"\\u{ord(lone.group()):04x}", escaped)
