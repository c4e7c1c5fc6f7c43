"""Strict JSON/1 decoding: one UTF-8 JSON text, no BOM, no duplicate keys, only safe numbers.

msgspec does the decoding and already refuses invalid UTF-8, lone surrogates (raw or escaped),
NaN/Infinity, non-finite floats, integers too long to decode and trailing garbage (a text
that is not JSON's syntax is `Malformed`; one whose only fault is a lone surrogate escape is
`LoneSurrogate`, decoded once more by the stdlib so the caller can still name the request and
the pointer). Three rules
remain for us, checked in a single walk over the decoded containers (cost grows with the
number of values, not bytes):

- nesting: at most `MAX_DEPTH` (64) levels of arrays and objects; deeper is `NestingTooDeep`,
  which carries the decoded value (so a JSON-RPC layer can still name the request's id) when
  msgspec could decode it at all (it gives up near 1,000 levels);
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

from jigcmd.jsonio.pointer import pointer, shown, walk

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "DuplicateKey",
    "IntegerTooLong",
    "LoneSurrogate",
    "Malformed",
    "NestingTooDeep",
    "StrictJSONError",
    "duplicate_key",
    "first_lone_surrogate",
    "loads",
    "loads_keeping_first",
]

MAX_SAFE_INTEGER = 2**53 - 1
# Levels of arrays and objects one text may nest (a JSON-RPC frame needs a handful).
MAX_DEPTH = 64

_BOM = b"\xef\xbb\xbf"
_ESCAPED_COLON = re.compile(rb"\\u003[aA]")
# A high surrogate escape with its low partner (a valid pair), or any other surrogate escape.
_SURROGATE_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?|\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_NON_FINITE = re.compile(rb"-?(?:NaN|Infinity)")
_BYTE_POSITION = re.compile(r"\(byte (\d+)\)")
# In a decoded `str` a valid pair is one character: any surrogate left is a lone one.
_LONE = re.compile("[\ud800-\udfff]")
# The rules a text can break while still being JSON's syntax (anything else is `Malformed`).
_WELL_FORMED = ("invalid UTF-8", "lone surrogate", "NaN and Infinity")

_decode = msgspec.json.Decoder().decode


class StrictJSONError(ValueError):
    """Raised when bytes are not one strict JSON/1 text; the message names the rule and where."""


class NestingTooDeep(StrictJSONError):
    """Raised when a text nests deeper than `MAX_DEPTH`; `value` is what decoded, if anything."""

    def __init__(self, message: str, value: object = None) -> None:
        super().__init__(message)
        self.value = value


class Malformed(StrictJSONError):
    """Raised when bytes are not JSON's syntax (or are cut short): nothing in them is known."""


class LoneSurrogate(StrictJSONError):
    """Raised for a lone surrogate escape in a text that breaks no other rule.

    `value` is the text decoded with it kept (a `str` no UTF-8 encoder takes: never encode
    it) and `pointer` where the first one is, so a caller can still name the request.
    """

    def __init__(self, message: str, value: object, pointer: str) -> None:
        super().__init__(message)
        self.value = value
        self.pointer = pointer


class IntegerTooLong(StrictJSONError):
    """Raised for an integer literal too long for msgspec to decode (far beyond 2^53-1)."""


class DuplicateKey(StrictJSONError):
    """Raised when an object repeats a key; `key` is the first key seen twice."""

    def __init__(self, key: str) -> None:
        super().__init__(duplicate_key(key))
        self.key = key


def duplicate_key(key: str) -> str:
    """The words for a repeated `key`, its lone surrogates shown as `\\uXXXX` (so they encode)."""
    return f"duplicate key {shown(json.dumps(key, ensure_ascii=False))}"


def _too_deep(where: str, value: object = None) -> NestingTooDeep:
    return NestingTooDeep(f"nesting deeper than {MAX_DEPTH} levels{where}", value)


def loads(data: bytes) -> object:
    """Decode one strict JSON/1 text from UTF-8 bytes."""
    if data.startswith(_BOM):
        raise StrictJSONError("byte order mark is not allowed (byte 0)")
    try:
        value = _decode(data)
    except msgspec.ValidationError as exc:
        # msgspec's only validation failures for untyped decoding: a number literal that
        # overflows, an integer (too many digits for any int it decodes) or a float.
        if str(exc).startswith("Integer"):
            raise IntegerTooLong(f"integer out of range ({exc})") from None
        raise StrictJSONError(
            f"number out of range: non-finite numbers are not allowed ({exc})"
        ) from None
    except msgspec.DecodeError as exc:
        raise _decode_error(data, str(exc)) from None
    except RecursionError:
        raise _too_deep(" (too deep to decode at all)") from None
    if isinstance(value, dict | list):
        _check_containers(data, value)
    elif type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise StrictJSONError(f"integer {value} at '' is beyond ±(2^53-1)")
    return value


def loads_keeping_first(data: bytes) -> object:
    """`loads`, except that a repeated key is no error: its first value is the one kept, as
    Bun's package.json reader keeps it (`jigcmd.command.packagejson`)."""
    try:
        return loads(data)
    except DuplicateKey:
        # Every other rule held (duplicates are looked for last) and the text parses; only
        # which value counts is left, and msgspec keeps the last.
        return json.loads(data, object_pairs_hook=_keep_first)


def _keep_first(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        result.setdefault(key, value)
    return result


def first_lone_surrogate(value: object) -> str | None:
    """The JSON pointer of the first string, key or value, holding a lone surrogate.

    Its own lone surrogates are shown as `\\uXXXX`, so the pointer itself encodes.
    """
    for path, item in walk(value):
        # A member is met at its key: a key is a string too (an index is an int).
        key = path[-1] if path else 0
        if (type(key) is str and _LONE.search(key)) or (type(item) is str and _LONE.search(item)):
            return pointer(path)
    return None


def _decode_error(data: bytes, reason: str) -> StrictJSONError:
    """The error for a text msgspec refused: `Malformed` unless only a rule was broken."""
    message = _explain(data, reason)
    if not message.startswith(_WELL_FORMED):
        return Malformed(message)
    if not message.startswith("lone surrogate"):
        return StrictJSONError(message)
    try:
        # The stdlib keeps a lone surrogate; the text is at most one frame, decoded once more.
        value = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return StrictJSONError(message)
    if isinstance(value, dict | list):
        # Any other rule the text breaks is said instead.
        _check_containers(data, value)
    pointer = first_lone_surrogate(value)
    if pointer is None:
        return StrictJSONError(message)
    return LoneSurrogate(f"{message} at {pointer!r}", value, pointer)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


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
    depths: list[int] = [1]
    pop = stack.pop
    push = stack.append
    pop_depth = depths.pop
    push_depth = depths.append
    while stack:
        container = pop()
        depth = pop_depth()
        if depth > MAX_DEPTH:
            raise _too_deep(f" (at {_deep_pointer(root)!r})", root)
        depth += 1
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
                    push_depth(depth)
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
                    push_depth(depth)
    # `in` is a fast substring scan; the regex runs only when an escape might be a colon.
    if data.count(b":") - string_colons != keys or (
        b"\\u003" in data and _ESCAPED_COLON.search(data) is not None
    ):
        _find_duplicate(data)


def _deep_pointer(root: object) -> str:
    """The JSON pointer of the first container nested deeper than `MAX_DEPTH`."""
    for path, value in walk(root):
        if len(path) >= MAX_DEPTH and isinstance(value, dict | list):
            return pointer(path)
    return ""


def _unsafe_integer(root: object) -> None:
    """Raise for the first integer beyond the safe range, naming its JSON pointer."""
    for path, value in walk(root):
        if type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise StrictJSONError(f"integer {value} at '{pointer(path)}' is beyond ±(2^53-1)")


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
        raise DuplicateKey(exc.args[0]) from None
    except RecursionError:
        raise _too_deep("") from None
