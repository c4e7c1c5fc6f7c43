"""Where a text that is JSON's syntax breaks a strict JSON/1 rule: the first fault's pointer."""

from __future__ import annotations

import tracemalloc

import pytest

from jigcmd.jsonio import faults
from jigcmd.jsonio.faults import Fault, long_integer


def _value(text: bytes) -> object:
    decoded = faults.decode(text)
    assert decoded is not None
    return decoded.value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'{"a":{"b/c":1,"b/c":2}}', Fault("/a/b~1c", 'duplicate key "b/c"')),
        (b'{"a":[1,"\\ud83d"]}', Fault("/a/1", "lone surrogate escape \\ud83d")),
        (b'{"\\udc00":1}', Fault("/\\udc00", "lone surrogate escape \\udc00")),
        (b'{"a":-Infinity}', Fault("/a", "NaN and Infinity are not JSON numbers")),
        (b'{"a":1e400}', Fault("/a", "number out of range: non-finite numbers are not allowed")),
        (b"[9007199254740992]", Fault("/0", "integer 9007199254740992 is beyond ±(2^53-1)")),
        (b'{"a":1,"b":NaN,"a":2}', Fault("/a", 'duplicate key "a"')),
        (b'{"a":[1]}', None),
    ],
)
def test_the_first_fault_is_named_with_its_json_pointer(text: bytes, expected: Fault) -> None:
    """A repeated key is its object's fault, found before what the object holds."""
    assert faults.first_fault(_value(text)) == expected


def test_skip_leaves_a_member_out_but_not_its_own_repetition() -> None:
    """What `skip` holds is not looked at; the same member written twice is still found."""
    value = _value(b'{"p":{"in":{"x":NaN},"ok":1}}')
    assert faults.first_fault(value, ["p", "in"]) is None
    twice = _value(b'{"p":{"in":{},"in":{}}}')
    assert faults.first_fault(twice, ["p", "in"]) == Fault("/p/in", 'duplicate key "in"')


def test_nesting_deeper_than_the_limit_is_a_fault() -> None:
    """As `strict.loads` refuses it: 64 levels at most."""
    deep = b"[" * 65 + b"]" * 65
    assert faults.first_fault(_value(deep)) == Fault("/0" * 64, "nesting deeper than 64 levels")
    assert faults.first_fault(_value(b"[" * 64 + b"]" * 64)) is None


def test_plain_gives_plain_dicts_and_none_for_nan() -> None:
    """For reading the rest of the frame: no marked objects, no NaN stand-ins."""
    value = faults.plain(_value(b'{"a":{"b":[NaN,{"c":1,"c":2}]}}'))
    assert value == {"a": {"b": [None, {"c": 2}]}}
    assert type(value) is dict and type(value["a"]["b"][1]) is dict
    assert faults.decode(b"{") is None


def test_finding_a_late_fault_builds_no_pointer_per_value() -> None:
    """A 1 MiB key over 200 numbers: the walk holds the path, not 200 copies of the key."""
    key = "k" * (1 << 20)
    value = _value(b'{"' + key.encode() + b'":[' + b"0," * 199 + b'0],"b":NaN}')
    tracemalloc.start()
    try:
        fault = faults.first_fault(value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fault == Fault("/b", "NaN and Infinity are not JSON numbers")
    assert peak < 8 * (1 << 20)


def test_a_frame_over_the_value_budget_is_not_taken_apart() -> None:
    """Commas and brackets counted: past `MAX_VALUES` the caller falls back to the rule."""
    assert faults.decode(b"[" + b"0," * faults.MAX_VALUES + b"NaN]") is None
    assert faults.decode(b"[" + b"0," * 1000 + b"NaN]") is not None


@pytest.mark.parametrize(
    ("text", "bytes_fault"),
    [
        (b'\xef\xbb\xbf{"a":1}', "byte order mark is not allowed (byte 0)"),
        (b'{"a":"\xff"}', "invalid UTF-8 at byte 6"),
        (b'{"a":1}', None),
    ],
)
def test_a_fault_of_the_bytes_is_told_apart_from_the_values(
    text: bytes, bytes_fault: str | None
) -> None:
    """No JSON pointer shows a BOM or a byte that is not UTF-8: the frame's own fault."""
    decoded = faults.decode(text)
    assert decoded is not None and decoded.bytes_fault == bytes_fault


def test_minus_nan_is_read_as_nan_a_few_times_then_not_at_all() -> None:
    """The stdlib refuses -NaN; each one costs a parse more, so past four the text is left."""
    decoded = faults.decode(b'{"id":"-NaN","a":[1,-NaN]}')
    assert decoded is not None
    assert faults.first_fault(decoded.value) == Fault(
        "/a/1", "NaN and Infinity are not JSON numbers"
    )
    assert faults.plain(decoded.value) == {"id": "-NaN", "a": [1, None]}
    assert faults.decode(b"[" + b"-NaN," * 4 + b"0]") is not None
    assert faults.decode(b"[" + b"-NaN," * 5 + b"0]") is None


def test_a_long_integer_is_found_at_its_pointer_its_digits_cut() -> None:
    """The first literal of 20+ digits and where; a long one cut, its length said."""
    assert long_integer(b'{"a":[1,18446744073709551616]}') == (
        "integer 18446744073709551616 at '/a/1' is beyond ±(2^53-1)"
    )
    assert long_integer(b'{"b":-' + b"9" * 5000 + b"}") == (
        "integer -999999999999999999999999… (5000 digits) at '/b' is beyond ±(2^53-1)"
    )
    assert long_integer(b'{"a":1}') is None
    assert long_integer(b"{") is None
