"""Where a JSON text that is JSON's syntax breaks a strict JSON/1 rule.

`jsonio.strict` refuses such a text and says which rule it broke; a JSON-RPC layer still
wants the rest of it (the request's id, its method) and a pointer to the fault, so that the
refusal can be the call's own (`INVALID_INPUT` naming the place) rather than a parse error
nobody can match to a request. `decode` takes the text as the stdlib parser does, keeping
every fault marked (a repeated key, a lone surrogate, NaN/Infinity, an unsafe integer, one
too long to convert) and setting aside a fault of the bytes (a BOM, invalid UTF-8, whose
bytes become lone surrogates); `first_fault` finds the first marked one. Both cost the
number of values in time, and `decode` refuses a text of more than `MAX_VALUES`: a refused
frame is taken apart at a bounded cost or not at all. The value `decode` returns is for
reading only: a repeated key's last value is kept, and a lone surrogate cannot be encoded.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from jigcmd.jsonio.pointer import Path, pointer, walk
from jigcmd.jsonio.strict import MAX_DEPTH, MAX_SAFE_INTEGER, duplicate_key

__all__ = [
    "MAX_VALUES",
    "Decoded",
    "Fault",
    "decode",
    "first_fault",
    "long_integer",
    "plain",
    "repeats",
]

# In a decoded `str` a valid pair is one character: any surrogate left is a lone one.
_LONE = re.compile("[\ud800-\udfff]")
# How many -NaN a text may hold and still be taken apart: each costs one more parse.
_MINUS_NANS = 4
# Integer literals this long are beyond ±(2^53-1) whatever their digits.
_LONG_INTEGER = 20
# Digits of a long integer literal `long_integer` shows; the rest is cut, its length said.
_SHOWN_DIGITS = 24
# Values a refused frame may hold and still be taken apart to find its fault (and id).
MAX_VALUES = 1_000_000


class Fault(msgspec.Struct, frozen=True):
    """The first strict JSON/1 rule a decoded value breaks, and the JSON pointer where."""

    pointer: str
    problem: str


class Decoded(msgspec.Struct, frozen=True):
    """A text `decode` could read: its value, and a fault of its bytes no value shows."""

    value: object
    # A byte order mark or invalid UTF-8: a fault of the frame, at no JSON pointer.
    bytes_fault: str | None = None


class _Object(dict[str, Any]):
    """An object as the text wrote it; `repeated` are its keys written twice, first first."""

    repeated: tuple[str, ...] = ()


class _Kept:
    """A number no JSON/1 value may be (NaN, Infinity, a huge integer), kept as its fault."""

    def __init__(self, problem: str, literal: str | None = None) -> None:
        self.problem = problem
        # An integer's literal, as written, when that is the fault.
        self.literal = literal


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    found = _Object(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        repeated: dict[str, None] = {}  # a set that keeps order
        for key, _ in pairs:
            if key in seen:
                repeated[key] = None
            seen.add(key)
        found.repeated = tuple(repeated)
    return found


def _not_a_number(name: str) -> _Kept:
    return _Kept("NaN and Infinity are not JSON numbers")


def _integer(text: str) -> int | _Kept:
    # 20 characters are beyond 2^53 whatever they are; longer ones are never converted
    # (the stdlib refuses over 4,300 digits, and converting costs the square of the length).
    if len(text) < _LONG_INTEGER:
        return int(text)
    return _Kept(f"integer {text} is beyond ±(2^53-1)", text)


def long_integer(data: bytes) -> str | None:
    """The first integer literal of 20 digits or more in `data` and where, worded as
    `strict` words one it decoded (`integer 18446744073709551616 at '/a' is beyond
    ±(2^53-1)`), a literal past `_SHOWN_DIGITS` cut and its length said; None when there
    is none, or the text cannot be taken apart (`decode`)."""
    decoded = decode(data)
    if decoded is None:
        return None
    for path, item in walk(decoded.value):
        if type(item) is _Kept and item.literal is not None:
            literal = item.literal
            digits = len(literal.lstrip("-"))
            if digits > _SHOWN_DIGITS:
                literal = f"{literal[: len(literal) - digits + _SHOWN_DIGITS]}… ({digits} digits)"
            return f"integer {literal} at '{pointer(path)}' is beyond ±(2^53-1)"
    return None


def decode(data: bytes) -> Decoded | None:
    """The text with its faults marked, or None when it is not JSON's syntax or too large.

    Too large is more than `MAX_VALUES` values (counted from commas and opening brackets,
    strings included, so it may overcount): what a refused frame may cost to take apart.
    """
    if data.count(b",") + data.count(b"{") + data.count(b"[") >= MAX_VALUES:
        return None
    bytes_fault = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bytes_fault = f"invalid UTF-8 at byte {exc.start}"
        # Bad bytes become lone surrogates: a string holding one is never a sound id.
        text = data.decode("utf-8", "surrogateescape")
    if text.startswith("\ufeff"):
        bytes_fault = "byte order mark is not allowed (byte 0)"
        text = text[1:]
    for _ in range(_MINUS_NANS + 1):
        try:
            value: object = json.loads(
                text, object_pairs_hook=_pairs, parse_constant=_not_a_number, parse_int=_integer
            )
        except json.JSONDecodeError as exc:
            if not text.startswith("-NaN", exc.pos):
                return None
            # The stdlib takes -Infinity but not -NaN: read it as NaN, the same fault.
            text = f"{text[: exc.pos]} {text[exc.pos + 1 :]}"
            continue
        except (ValueError, RecursionError):
            return None
        return Decoded(value, bytes_fault)
    return None


def first_fault(value: object, skip: Path | None = None) -> Fault | None:
    """The first fault of a `decode`d value in document order, not looking at `skip` (a path).

    A repeated key is the fault of the object holding it: a member `skip` names twice is
    still found. Memory is the depth; only the fault's pointer is built.
    """
    for path, item in walk(value, skip):
        fault = _own_fault(item)
        if fault is not None:
            key, problem = fault
            return Fault(pointer(path if key is None else [*path, key]), problem)
        if len(path) == MAX_DEPTH and isinstance(item, dict | list):
            return Fault(pointer(path), f"nesting deeper than {MAX_DEPTH} levels")
    return None


def repeats(value: object, key: str) -> bool:
    """True when `value` is an object that writes `key` more than once."""
    return isinstance(value, _Object) and key in value.repeated


def plain(value: object) -> object:
    """A `decode`d value as plain dicts and lists, NaN, Infinity and huge integers as None."""
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
            elif type(item) is _Kept:
                holder[key] = None  # type: ignore[index]
    return root[0]


def _own_fault(item: object) -> tuple[str | None, str] | None:
    """A fault of this value itself (not of what it holds): the key it is at, if any, and why."""
    if isinstance(item, _Object):
        for key in item:
            if _LONE.search(key):
                return key, _lone(key)
        if item.repeated:
            key = item.repeated[0]
            return key, duplicate_key(key)
    elif type(item) is str:
        if _LONE.search(item):
            return None, _lone(item)
    elif type(item) is _Kept:
        return None, item.problem
    elif type(item) is float:
        if not math.isfinite(item):
            return None, "number out of range: non-finite numbers are not allowed"
    elif type(item) is int and not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
        return None, f"integer {item} is beyond ±(2^53-1)"
    return None


def _lone(text: str) -> str:
    found = _LONE.search(text)
    assert found is not None
    return f"lone surrogate escape \\u{ord(found.group()):04x}"
