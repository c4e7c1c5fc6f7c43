"""Strict JSON/1 decoding: what is refused, with which message, and agreement with a reference."""

from __future__ import annotations

import json
import math
import tracemalloc
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jigcmd.jsonio.strict import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    DuplicateKey,
    NestingTooDeep,
    StrictJSONError,
    loads,
    loads_keeping_first,
)

SAFE_INTS = st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | SAFE_INTS | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


class _Refused(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _Refused
    return dict(pairs)


def _safe_int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_SAFE_INTEGER:
        raise _Refused
    return value


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused
    return value


def _constant(text: str) -> None:
    raise _Refused


def _check_strings(value: object) -> None:
    if isinstance(value, str):
        value.encode("utf-8")  # lone surrogates raise UnicodeEncodeError
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key)
            _check_strings(item)


def reference_loads(data: bytes) -> object:
    """The stdlib parser with every strict rule bolted on; raises on refusal."""
    text = data.decode("utf-8")
    value = json.loads(
        text,
        object_pairs_hook=_no_duplicates,
        parse_int=_safe_int,
        parse_float=_finite,
        parse_constant=_constant,
    )
    _check_strings(value)
    return value


def test_valid_json_values_decode_to_the_same_value() -> None:
    """A plain request frame decodes to the dict it encodes."""
    frame = b'{"jsonrpc":"2.0","id":"r-1","method":"ping","params":{"a":[1,2.5,null,true]}}'
    assert loads(frame) == {
        "jsonrpc": "2.0",
        "id": "r-1",
        "method": "ping",
        "params": {"a": [1, 2.5, None, True]},
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'\xef\xbb\xbf{"a":1}', "byte order mark is not allowed (byte 0)"),
        (b'{"a":"\xff"}', "invalid UTF-8 at byte 6"),
        (b'{"a":"\xed\xa0\x80"}', "invalid UTF-8 at byte 6"),
        (b'{"a":1,"a":2}', 'duplicate key "a"'),
        (b'[{"x":{"b:c":1,"b:c":2}}]', 'duplicate key "b:c"'),
        (b'{"k\\u003a":1,"k:":2}', 'duplicate key "k:"'),
        (b'["\\ud800"]', "lone surrogate escape \\ud800 (byte 2)"),
        (b'["\\ud83d\\ude00","\\udc00"]', "lone surrogate escape \\udc00 (byte 17)"),
        (b'{"a":NaN}', "NaN and Infinity are not JSON numbers (byte 5)"),
        (b"[-Infinity]", "NaN and Infinity are not JSON numbers"),
        (b"[1e400]", "number out of range"),
        (b'{"a":[0,9007199254740992]}', "integer 9007199254740992 at '/a/1' is beyond"),
        (b"-9007199254740992", "integer -9007199254740992 at '' is beyond"),
        (b'{"a":1} {"b":2}', "malformed JSON: trailing characters"),
        (b'{"a":1', "malformed JSON: input ends before the value is complete"),
        (b"", "malformed JSON: input ends before the value is complete"),
        (b"[" * 5000 + b"]" * 5000, "nesting deeper than 64 levels"),
    ],
)
def test_each_strict_rule_is_refused_with_a_precise_message(data: bytes, message: str) -> None:
    """Every rule of strict JSON/1 is refused, and the message names the rule and where."""
    with pytest.raises(StrictJSONError) as refused:
        loads(data)
    assert str(refused.value).startswith(message)


def test_the_largest_safe_integers_are_accepted() -> None:
    """±(2^53-1) are inside the range."""
    assert loads(b"[9007199254740991,-9007199254740991]") == [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]


def test_colons_inside_strings_do_not_hide_or_fake_duplicates() -> None:
    """Colons in keys and values, raw or escaped, leave a duplicate-free object accepted."""
    assert loads(b'{"a:b":"c:d","e":"\\u003a:","f\\u003A":1}') == {"a:b": "c:d", "e": "::", "f:": 1}


@given(JSON_VALUES, st.booleans())
def test_every_strict_json_value_round_trips(value: object, ascii_only: bool) -> None:
    """Any value made of safe numbers and well-formed text decodes to itself."""
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert loads(data) == value


@given(TEXT, JSON_VALUES, JSON_VALUES, st.lists(st.sampled_from(["list", "object"]), max_size=4))
def test_a_duplicate_key_at_any_depth_is_refused(
    key: str, first: object, second: object, wrappers: list[str]
) -> None:
    """An object that repeats a key is refused however deeply it is nested, naming the key."""
    name = json.dumps(key)
    text = f"{{{name}:{json.dumps(first)},{name}:{json.dumps(second)}}}"
    for wrapper in wrappers:
        text = f"[{text}]" if wrapper == "list" else f'{{"w":{text}}}'
    with pytest.raises(DuplicateKey, match="duplicate key") as refused:
        loads(text.encode())
    assert refused.value.key == key


def _agrees_with_reference(data: bytes) -> None:
    try:
        expected = reference_loads(data)
    except (ValueError, UnicodeError, RecursionError, _Refused):
        with pytest.raises(StrictJSONError):
            loads(data)
        return
    assert loads(data) == expected


@given(st.binary(max_size=64))
@example(b'{"a":1,"a":1}')
@example(b"\xef\xbb\xbf1")
@example(b'"\\udfff"')
def test_arbitrary_bytes_are_accepted_exactly_when_the_reference_accepts_them(data: bytes) -> None:
    """On arbitrary bytes the decoder agrees with the stdlib plus every strict rule."""
    _agrees_with_reference(data)


@given(JSON_VALUES, st.data())
def test_mutated_json_texts_are_accepted_exactly_when_the_reference_accepts_them(
    value: object, data: st.DataObject
) -> None:
    """Small byte mutations of valid texts never make the two decoders disagree."""
    text = bytearray(json.dumps(value).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(text)))
        insert = data.draw(
            st.sampled_from([b":", b'"', b",", b"\\", b"}", b"{", b"1", b"\xff", b""])
        )
        if data.draw(st.booleans()) and position < len(text):
            text[position : position + 1] = insert
        else:
            text[position:position] = insert
    _agrees_with_reference(bytes(text))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 330, 1000, 100_000])
def test_nesting_beyond_the_limit_is_refused_naming_the_limit(depth: int) -> None:
    """Deeper than MAX_DEPTH containers is refused however deep, never a RecursionError."""
    data = b'{"a":' * (depth - 1) + b"[]" + b"}" * (depth - 1)
    with pytest.raises(NestingTooDeep) as refused:
        loads(data)
    assert f"nesting deeper than {MAX_DEPTH} levels" in str(refused.value)


def test_nesting_at_the_limit_is_accepted() -> None:
    """Exactly MAX_DEPTH levels decode."""
    data = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    value = loads(data)
    for _ in range(MAX_DEPTH - 1):
        assert isinstance(value, list)
        (value,) = value
    assert value == []


def test_a_5000_digit_integer_is_refused_as_an_integer_out_of_range() -> None:
    """An integer too long to decode is "integer out of range", not a non-finite number."""
    with pytest.raises(StrictJSONError) as refused:
        loads(b"[" + b"9" * 5000 + b"]")
    assert "integer out of range" in str(refused.value)
    assert "non-finite" not in str(refused.value)


@pytest.mark.parametrize(
    ("tail", "words"),
    [
        (b'"b":9007199254740993', "integer 9007199254740993 at '/b'"),
        (b'"b":' + b"[" * 70 + b"]" * 70, "nesting deeper than 64 levels (at '/b/0"),
        (b'"b":"\\ud800"', "at '/b'"),
    ],
)
def test_naming_a_late_fault_builds_no_pointer_per_value(tail: bytes, words: str) -> None:
    """A 1 MiB key over 200 values: the path is walked, not 200 copies of the key made."""
    text = b'{"' + b"k" * (1 << 20) + b'":[' + b"[]," * 199 + b"[]]," + tail + b"}"
    tracemalloc.start()
    try:
        with pytest.raises(StrictJSONError) as refused:
            loads(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert words in str(refused.value)
    assert peak < 32 * (1 << 20)


def test_loads_keeping_first_reads_a_repeated_key_as_its_first_value() -> None:
    """At any depth, and only that: every other rule still refuses."""
    text = b'{"main":"a.ts","x":[{"k":1,"k":2}],"main":"evil.ts"}'
    assert loads_keeping_first(text) == {"main": "a.ts", "x": [{"k": 1}]}
    with pytest.raises(StrictJSONError, match="integer"):
        loads_keeping_first(b'{"a":1,"a":2,"b":12345678901234567890}')
