"""Canonical JSON/1 encoding (spec-notes §1)."""

from __future__ import annotations

import json
import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jigcmd.jsonio import canonical
from jigcmd.jsonio.canonical import MAX_SAFE_INTEGER, CanonicalError, dumps

# Outputs of String(v) / JSON.stringify(v) in Node; this table was checked against Node,
# together with 200,000 random doubles, when the encoder was written.
JS_NUMBER_FORMS = [
    (-0.0, "0"),
    (0.0, "0"),
    (1.0, "1"),
    (100.0, "100"),
    (-1.5, "-1.5"),
    (0.1, "0.1"),
    (0.1 + 0.2, "0.30000000000000004"),
    (1 / 3, "0.3333333333333333"),
    (123.456, "123.456"),
    (4.35, "4.35"),
    (1e20, "100000000000000000000"),
    (1e21, "1e+21"),
    (9.999999999999999e20, "999999999999999900000"),
    (123456789012345680000.0, "123456789012345680000"),
    (2.0**53, "9007199254740992"),
    (2.0**60, "1152921504606847000"),
    (1e300, "1e+300"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.000001, "0.000001"),
    (1e-7, "1e-7"),
    (-1e-7, "-1e-7"),
    (1.5e-7, "1.5e-7"),
    (1.23e-18, "1.23e-18"),
    (5e-324, "5e-324"),
]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=30,
)


def js_parse(data: bytes) -> object:
    """Parse like JavaScript: integers beyond the safe range become doubles."""
    return json.loads(
        data, parse_int=lambda t: int(t) if abs(int(t)) <= MAX_SAFE_INTEGER else float(t)
    )


class Point(msgspec.Struct, rename="camel"):
    """A Struct with a renamed field, to check wire names are used."""

    x_value: int
    label: str


@pytest.mark.parametrize(("number", "expected"), JS_NUMBER_FORMS)
def test_numbers_are_written_in_javascript_number_to_string_form(
    number: float, expected: str
) -> None:
    """Each float is written exactly as JavaScript's Number#toString writes it."""
    assert dumps(number) == expected.encode()


@given(json_values)
def test_encoded_values_parse_back_to_the_input(value: object) -> None:
    """Parsing the canonical bytes (as JavaScript would) gives back the input."""
    assert js_parse(dumps(value)) == value


@given(st.dictionaries(st.text(), st.integers(0, 9), min_size=2, max_size=8))
def test_object_keys_are_sorted_by_utf16_code_units(obj: dict[str, int]) -> None:
    """Keys come out in UTF-16 code-unit order, not code-point order."""
    decoded = json.loads(dumps(obj), object_pairs_hook=lambda pairs: [k for k, _ in pairs])
    assert decoded == sorted(obj, key=lambda k: k.encode("utf-16-be"))


def test_astral_keys_sort_before_high_bmp_keys() -> None:
    """A key starting with a surrogate pair sorts before U+FFFF, unlike code-point order."""
    assert dumps({"\uffff": 1, "\U0001f600": 2}) == '{"😀":2,"\uffff":1}'.encode()


@given(json_values)
def test_canonical_bytes_are_a_fixed_point(value: object) -> None:
    """Parsing canonical bytes and encoding again gives the same bytes."""
    encoded = dumps(value)
    assert dumps(js_parse(encoded)) == encoded


def test_strings_are_escaped_like_json_stringify() -> None:
    """Controls use short escapes or lowercase \\u00xx; non-ASCII and U+2028 stay literal."""
    text = '\x00\x08\t\n\x0c\r\x1f"\\/é\u2028\x7f'
    expected = '"\\u0000\\b\\t\\n\\f\\r\\u001f\\"\\\\/é\u2028\x7f"'
    assert dumps(text) == expected.encode()


def test_nested_structure_is_compact_and_sorted() -> None:
    """Nested objects and arrays are written without whitespace and with sorted keys."""
    value = {"b": [1, 2.5, None, True], "a": {"z": False, "y": "s"}}
    assert dumps(value) == b'{"a":{"y":"s","z":false},"b":[1,2.5,null,true]}'


def test_tuples_encode_as_arrays() -> None:
    """A tuple is an array."""
    assert dumps((1, "a")) == b'[1,"a"]'


def test_msgspec_structs_encode_with_their_wire_names() -> None:
    """Structs go through msgspec.to_builtins, so renamed fields use the wire name."""
    assert dumps(Point(x_value=3, label="p")) == b'{"label":"p","xValue":3}'


def test_safe_integer_bounds_are_accepted() -> None:
    """+/-(2^53-1) are the largest integers accepted."""
    assert dumps([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]) == b"[9007199254740991,-9007199254740991]"


@pytest.mark.parametrize("number", [MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 10**30])
def test_unsafe_integers_are_rejected(number: int) -> None:
    """Integers beyond +/-(2^53-1) are refused because JavaScript cannot hold them exactly."""
    with pytest.raises(CanonicalError, match=r"beyond \+/-\(2\^53-1\)"):
        dumps({"n": number})


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_rejected(number: float) -> None:
    """NaN and infinities have no JSON form."""
    with pytest.raises(CanonicalError, match="non-finite number"):
        dumps([number])


def test_lone_surrogates_in_strings_are_rejected_with_their_location() -> None:
    """A lone surrogate in a string value is refused and its pointer is named."""
    with pytest.raises(CanonicalError, match=r"lone surrogate U\+D800 in string at '/a/0'"):
        dumps({"a": ["x\ud800"]})


def test_lone_surrogates_in_keys_are_rejected() -> None:
    """A lone surrogate in an object key is refused."""
    with pytest.raises(CanonicalError, match=r"lone surrogate U\+DC00 in object key"):
        dumps({"\udc00": 1})


def test_cycles_are_rejected() -> None:
    """A list that contains itself is refused rather than recursing forever."""
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(CanonicalError, match="cycle at '/0'"):
        dumps(loop)


def test_shared_acyclic_values_are_not_mistaken_for_cycles() -> None:
    """The same sub-object appearing twice is fine."""
    shared = {"k": 1}
    assert dumps([shared, shared]) == b'[{"k":1},{"k":1}]'


def test_non_string_keys_are_rejected() -> None:
    """Object keys must be strings; an int key is not silently converted."""
    with pytest.raises(CanonicalError, match="non-string key 1"):
        dumps({1: "a"})


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object(), 1j])
def test_unsupported_types_are_rejected(value: object) -> None:
    """Types outside the JSON data model are refused with their type name."""
    with pytest.raises(CanonicalError, match=f"unsupported type {type(value).__name__}"):
        dumps(value)


def test_canonical_error_is_a_value_error() -> None:
    """Callers may catch CanonicalError as ValueError."""
    assert issubclass(CanonicalError, ValueError)


def test_a_value_nested_far_beyond_the_recursion_limit_encodes() -> None:
    """The encoder is iterative: 5,000 levels (signature of a deep input) never crash it."""
    value: object = []
    for _ in range(5000):
        value = {"a": value}
    assert dumps(value) == b'{"a":' * 5000 + b"[]" + b"}" * 5000


# Anything a caller may send, the odd cases too: every code point (lone surrogates, astral
# keys), integers past the safe range, non-finite floats, tuples, Structs.
any_text = st.text(
    st.characters(codec=None, categories=None)
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
    | st.characters(min_codepoint=0xE000, max_codepoint=0x10FFFF)
)
any_scalars = (
    json_scalars
    | st.integers()
    | st.floats()
    | any_text
    | st.builds(Point, st.integers(-9, 9), st.text(max_size=3))
)
any_values = st.recursive(
    any_scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(any_text, children, max_size=5)
    ),
    max_leaves=30,
)


@given(any_values)
def test_the_quick_pass_writes_exactly_what_the_full_encoder_writes(value: object) -> None:
    """Plain data takes the quick pass; its bytes (or its refusal) are the full encoder's."""
    try:
        full: bytes | str = "".join(canonical._encode(value)).encode("utf-8")
    except CanonicalError as exc:
        full = str(exc)
    try:
        quick: bytes | str = dumps(value)
    except CanonicalError as exc:
        quick = str(exc)
    assert quick == full


def test_a_value_nested_past_the_quick_pass_depth_still_encodes_the_same() -> None:
    """Deep plain data falls back to the full encoder at the quick pass's depth limit."""
    value: object = "leaf"
    for index in range(200):
        value = {"k": [value, index]}
    assert dumps(value) == "".join(canonical._encode(value)).encode("utf-8")
