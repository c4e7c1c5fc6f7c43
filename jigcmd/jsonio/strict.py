"""Strict JSON/1 decoding: one UTF-8 JSON text, no BOM, no duplicate keys, only safe numbers.

msgspec does the decoding and already refuses invalid UTF-8, lone surrogates (raw or escaped),
NaN/Infinity, non-finite floats and trailing garbage. Two rules remain for us, checked in a
single walk over the decoded containers (cost grows with the number of values, not bytes):

- integers beyond ±(2^53-1), which msgspec decodes as Python ints of any size;
- duplicate keys, which msgspec silently collapses (last one wins). Every key/value pair has
  exactly one structural ``:`` in the text, and colons inside strings survive decoding one for
  one unless written as ``\\u003a``. So when the colons in the raw bytes minus the colons in
  the decoded strings equal the number of decoded keys, no pair was dropped. Otherwise (or when
  an escaped colon makes the count unreliable) the slow path re-parses with the stdlib and an
  ``object_pairs_hook`` to find the duplicate, or confirm there is none.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

__all__ = ["MAX_SAFE_INTEGER", "StrictJSONError", "loads"]

MAX_SAFE_INTEGER = 2**53 - 1

_BOM = b"\xef\xbb\xbf"
_ESCAPED_COLON = re.compile(rb"\\u003[aA]")
# A high surrogate escape with its low partner (a valid pair), or any other surrogate escape.
_SURROGATE_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?|\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_NON_FINITE = re.compile(rb"-?(?:NaN|Infinity)")
_BYTE_POSITION = re.compile(r"\(byte (\d+)\)")

_decode = msgspec.json.Decoder().decode


class StrictJSONError(ValueError):
    """Raised when bytes are not one strict JSON/1 text; the message names the rule and where."""


def loads(data: bytes) -> object:
    """Decode one strict JSON/1 text from UTF-8 bytes."""
    if data.startswith(_BOM):
        raise StrictJSONError("byte order mark is not allowed (byte 0)")
    try:
        value = _decode(data)
    except msgspec.ValidationError as exc:
        # msgspec's only validation failure for untyped decoding: a float literal overflows.
        raise StrictJSONError(
            f"number out of range: non-finite numbers are not allowed ({exc})"
        ) from None
    except msgspec.DecodeError as exc:
        raise StrictJSONError(_explain(data, str(exc))) from None
    except RecursionError:
        raise StrictJSONError("nesting is too deep") from None
    if isinstance(value, dict | list):
        _check_containers(data, value)
    elif type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise StrictJSONError(f"integer {value} at '' is beyond ±(2^53-1)")
    return value


def _explain(data: bytes, reason: str) -> str:
    """Turn a msgspec decode failure into the strict-JSON rule that was broken."""
    if "UTF-8" in reason:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"invalid UTF-8 at byte {exc.start}"
        return "invalid UTF-8"
    if "surrogate" in reason or "truncated" in reason:
        for escape in _SURROGATE_ESCAPE.finditer(data):
            if len(escape.group()) == 6:
                text = escape.group().decode("ascii")
                return f"lone surrogate escape {text} (byte {escape.start()})"
    position = _BYTE_POSITION.search(reason)
    if position is not None:
        at = int(position.group(1))
        if _NON_FINITE.match(data, at) or _NON_FINITE.match(data, max(at - 1, 0)):
            return f"NaN and Infinity are not JSON numbers (byte {at})"
    if "truncated" in reason:
        return "malformed JSON: input ends before the value is complete"
    return reason.replace("JSON is malformed", "malformed JSON")


def _check_containers(data: bytes, root: dict[str, Any] | list[Any]) -> None:
    """Refuse unsafe integers and prove the absence of duplicate keys (see module docstring)."""
    keys = 0
    string_colons = 0
    stack: list[Any] = [root]
    pop = stack.pop
    push = stack.append
    while stack:
        container = pop()
        if type(container) is dict:
            keys += len(container)
            for key, item in container.items():
                string_colons += key.count(":")
                kind = type(item)
                if kind is str:
                    string_colons += item.count(":")
                elif kind is int:
                    if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                        _unsafe_integer(root)
                elif kind is dict or kind is list:
                    push(item)
        else:
            for item in container:
                kind = type(item)
                if kind is str:
                    string_colons += item.count(":")
                elif kind is int:
                    if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                        _unsafe_integer(root)
                elif kind is dict or kind is list:
                    push(item)
    # `in` is a fast substring scan; the regex runs only when an escape might be a colon.
    if data.count(b":") - string_colons != keys or (
        b"\\u003" in data and _ESCAPED_COLON.search(data) is not None
    ):
        _find_duplicate(data)


def _unsafe_integer(root: object) -> None:
    """Raise for the first integer beyond the safe range, naming its JSON pointer."""
    stack: list[tuple[str, object]] = [("", root)]
    while stack:
        pointer, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{pointer}/{_escape(k)}", v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{pointer}/{i}", v) for i, v in reversed(list(enumerate(value))))
        elif type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise StrictJSONError(f"integer {value} at '{pointer}' is beyond ±(2^53-1)")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class _Duplicate(Exception):
    """Raised inside the stdlib parser when an object repeats a key."""


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return result


def _find_duplicate(data: bytes) -> None:
    """Slow path: re-parse with the stdlib and raise on the first repeated key."""
    try:
        json.loads(data, object_pairs_hook=_reject_duplicates)
    except _Duplicate as exc:
        key = json.dumps(exc.args[0], ensure_ascii=False)
        raise StrictJSONError(f"duplicate key {key}") from None
    except RecursionError:
        raise StrictJSONError("nesting is too deep") from None
