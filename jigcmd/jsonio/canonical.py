"""Canonical JSON/1: the one byte form that digests and signatures are computed over.

RFC 8785 style, as JavaScript does it (spec-notes §1): object keys sorted by UTF-16 code
units, no whitespace, strings escaped like `JSON.stringify`, numbers in `Number#toString`
form, UTF-8 without BOM or trailing newline.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal

import msgspec

__all__ = ["MAX_SAFE_INTEGER", "CanonicalError", "dumps", "js_number_to_string"]

MAX_SAFE_INTEGER = 2**53 - 1

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_encode_basestring = json.encoder.encode_basestring


class CanonicalError(ValueError):
    """Raised when a value has no Canonical JSON/1 form."""


def dumps(value: object) -> bytes:
    """Encode `value` as Canonical JSON/1 bytes."""
    out: list[str] = []
    if not _plain(value, out, 0):
        # Something the quick pass does not take (a Struct, a big integer, a lone
        # surrogate, a cycle...): the full encoder says exactly what and where.
        out = _encode(value)
    return "".join(out).encode("utf-8")


# How deep the quick pass follows containers before handing the value to the full encoder
# (which detects cycles and has no depth limit).
_PLAIN_DEPTH = 64
# Below the surrogates, code point order is UTF-16 code unit order.
_BELOW_SURROGATES = "\ud800"


def _plain(value: object, out: list[str], depth: int) -> bool:
    """Append `value`'s canonical text to `out` if it is plain JSON data; else False.

    Exactly the full encoder's output, for exact dicts, lists, tuples, strings, safe integers,
    finite floats, booleans and None; no JSON pointers are built (they only name failures).
    """
    kind = type(value)
    if kind is str:
        assert isinstance(value, str)
        if _LONE_SURROGATE.search(value) is not None:
            return False
        out.append(_encode_basestring(value))
    elif value is None:
        out.append("null")
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int:
        assert isinstance(value, int)
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return False
        out.append(str(value))
    elif kind is float:
        assert isinstance(value, float)
        if not math.isfinite(value):
            return False
        out.append(js_number_to_string(value))
    elif depth >= _PLAIN_DEPTH:
        return False
    elif kind is dict:
        assert isinstance(value, dict)
        return _plain_object(value, out, depth)
    elif kind is list or kind is tuple:
        assert isinstance(value, list | tuple)
        separator = "["
        for item in value:
            out.append(separator)
            if not _plain(item, out, depth + 1):
                return False
            separator = ","
        out.append("]" if value else "[]")
    else:
        return False
    return True


def _plain_object(value: dict[object, object], out: list[str], depth: int) -> bool:
    keys: list[str] = []
    for key in value:
        if type(key) is not str or _LONE_SURROGATE.search(key) is not None:
            return False
        assert isinstance(key, str)
        keys.append(key)
    if all(not key or max(key) < _BELOW_SURROGATES for key in keys):
        keys.sort()
    else:
        keys.sort(key=_utf16_order)
    separator = "{"
    for key in keys:
        out.append(separator + _encode_basestring(key) + ":")
        if not _plain(value[key], out, depth + 1):
            return False
        separator = ","
    out.append("}" if keys else "{}")
    return True


def _pointer(parent: str, token: str | int) -> str:
    escaped = str(token).replace("~", "~0").replace("/", "~1")
    return f"{parent}/{escaped}"


def _where(pointer: str) -> str:
    return f"at {pointer!r}" if pointer else "at the root"


# Work items of the encoder's explicit stack: a value to encode (with its pointer), text to
# emit, or the end of a container (its id leaves the path, for cycle detection).
_VALUE, _TEXT, _LEAVE = 0, 1, 2
_Work = tuple[int, object, str]


def _encode(root: object) -> list[str]:
    # Iterative, not recursive: how deep a value nests is bounded by memory, never by
    # Python's recursion limit (a deep input must not crash the signature of its request).
    out: list[str] = []
    # Only containers on the current path count: a shared, acyclic sub-value is fine.
    active: set[int] = set()
    stack: list[_Work] = [(_VALUE, root, "")]
    while stack:
        kind, value, pointer = stack.pop()
        if kind == _TEXT:
            assert isinstance(value, str)
            out.append(value)
        elif kind == _LEAVE:
            assert isinstance(value, int)
            active.discard(value)
        # bool is checked before int because bool is a subclass of int.
        elif value is None:
            out.append("null")
        elif value is True:
            out.append("true")
        elif value is False:
            out.append("false")
        elif isinstance(value, str):
            out.append(_string(value, pointer))
        elif isinstance(value, int):
            out.append(_integer(value, pointer))
        elif isinstance(value, float):
            out.append(_number(value, pointer))
        elif isinstance(value, Mapping | list | tuple):
            ident = id(value)
            if ident in active:
                raise CanonicalError(f"cycle {_where(pointer)}: a container contains itself")
            active.add(ident)
            if isinstance(value, Mapping):
                items = _object(value, pointer)
            else:
                items = _array(value, pointer)
            stack.append((_LEAVE, ident, pointer))
            stack.extend(reversed(items))
        elif isinstance(value, msgspec.Struct):
            # Structs carry their wire names (rename=...) and omit nothing unexpectedly this way.
            stack.append((_VALUE, msgspec.to_builtins(value), pointer))
        else:
            raise CanonicalError(
                f"unsupported type {type(value).__name__} {_where(pointer)}: "
                "only dict, list, tuple, str, int, float, bool, None and msgspec Structs"
            )
    return out


def _object(value: Mapping[object, object], pointer: str) -> list[_Work]:
    """The work items of an object, in output order: `{`, each `"key":` and value, `}`."""
    keys: list[str] = []
    for key in value:
        if not isinstance(key, str):
            raise CanonicalError(
                f"non-string key {key!r} ({type(key).__name__}) {_where(pointer)}: "
                "object keys must be strings"
            )
        keys.append(key)
    keys.sort(key=_utf16_order)
    items: list[_Work] = []
    separator = "{"
    for key in keys:
        child = _pointer(pointer, key)
        items.append((_TEXT, separator + _string(key, child, is_key=True) + ":", child))
        items.append((_VALUE, value[key], child))
        separator = ","
    items.append((_TEXT, "}" if keys else "{}", pointer))
    return items


def _array(value: list[object] | tuple[object, ...], pointer: str) -> list[_Work]:
    """The work items of an array, in output order: `[`, each value, `]`."""
    items: list[_Work] = []
    separator = "["
    for index, item in enumerate(value):
        items.append((_TEXT, separator, pointer))
        items.append((_VALUE, item, _pointer(pointer, index)))
        separator = ","
    items.append((_TEXT, "]" if value else "[]", pointer))
    return items


def _utf16_order(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like sequences of UTF-16 code units.
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str, pointer: str, *, is_key: bool = False) -> str:
    match = _LONE_SURROGATE.search(text)
    if match is not None:
        what = "object key" if is_key else "string"
        raise CanonicalError(
            f"lone surrogate U+{ord(match.group()):04X} in {what} {_where(pointer)} "
            f"(code point index {match.start()})"
        )
    # With lone surrogates excluded this is byte-for-byte JSON.stringify's escaping. It is
    # what json.dumps(text, ensure_ascii=False) returns, without building an encoder per
    # string (the whole signature of a request took ~0.2 ms that way).
    return _encode_basestring(text)


def _integer(value: int, pointer: str) -> str:
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise CanonicalError(
            f"integer {value} {_where(pointer)} is beyond +/-(2^53-1), "
            "so JavaScript cannot represent it exactly"
        )
    return str(value)


def _number(value: float, pointer: str) -> str:
    if not math.isfinite(value):
        raise CanonicalError(f"non-finite number {value!r} {_where(pointer)}")
    return js_number_to_string(value)


def js_number_to_string(value: float) -> str:
    """Format a finite float exactly like JavaScript's `Number.prototype.toString()`."""
    if value == 0:
        return "0"  # covers -0.0, which JavaScript prints as "0"
    sign = "-" if value < 0 else ""
    # repr() gives the shortest digit string that round-trips, the same digits JS picks.
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent += len("".join(map(str, digit_tuple))) - len(digits)
    k = len(digits)
    n = exponent + k  # value = 0.digits * 10^n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return sign + body
