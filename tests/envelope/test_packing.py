"""The zygote's stdlib msgpack reads what msgspec writes, and msgspec reads what it writes."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jigcmd.envelope import packing

_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
)
_VALUES = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=20), max_leaves=60)
# Lengths at each msgpack size boundary: fix, 8-, 16- and 32-bit headers.
_SIZES = (0, 15, 16, 31, 32, 255, 256, 65_535, 65_536)


@given(_VALUES)
def test_what_msgspec_packs_unpacks_to_the_same_value(value: object) -> None:
    """Every integer width, float, string, bytes and nested array msgspec writes reads back."""
    assert packing.unpack(msgspec.msgpack.encode(value)) == value


@given(_VALUES)
def test_what_packing_packs_msgspec_reads_as_the_same_value(value: object) -> None:
    """The zygote's frames are ordinary msgpack."""
    assert msgspec.msgpack.decode(packing.pack(value)) == value


@pytest.mark.parametrize("size", _SIZES)
def test_strings_bytes_and_arrays_at_every_header_size_round_trip(size: int) -> None:
    """Each length takes the header msgspec would give it, and reads back."""
    for value in ("x" * size, b"x" * size, [1] * size):
        assert packing.pack(value) == msgspec.msgpack.encode(value)
        assert packing.unpack(packing.pack(value)) == value


def test_a_float_keeps_every_bit() -> None:
    """Deadlines are CLOCK_MONOTONIC seconds: no precision is lost on the way."""
    for value in (0.1, 1e300, -0.0, math.inf, 12345.678901234567):
        assert packing.unpack(packing.pack(value)) == value


def test_what_has_no_msgpack_form_here_is_refused() -> None:
    """A dict, an integer past 64 bits: PackingError, nothing half written."""
    for value in ({"a": 1}, 2**64, -(2**63) - 1):
        with pytest.raises(packing.PackingError):
            packing.pack(value)


def test_an_array_longer_than_the_bytes_left_is_refused_before_it_is_built() -> None:
    """A 32-bit array length with nothing after it is a truncation, not 4 billion items."""
    with pytest.raises(packing.PackingError, match="truncated"):
        packing.unpack(b"\xdd\xff\xff\xff\xff")


def test_nesting_is_bounded() -> None:
    """Arrays nested past the bound are refused with a PackingError, not a RecursionError."""
    with pytest.raises(packing.PackingError, match="nested"):
        packing.unpack(b"\x91" * 100 + b"\xc0")


def test_a_string_that_is_not_utf8_is_refused() -> None:
    """The channel's strings are UTF-8, as msgspec writes them."""
    with pytest.raises(packing.PackingError, match="UTF-8"):
        packing.unpack(b"\xa1\xff")


def test_a_reader_refuses_a_bool_for_an_int_and_takes_an_int_for_a_float() -> None:
    """The same rules as msgspec's: True is not an integer, 3 is a number."""
    floats = packing.Reader[tuple[float, ...]](tuple[float, ...])
    assert floats.unpack(packing.pack((3, 0.5))) == (3.0, 0.5)
    ints = packing.Reader[tuple[int, ...]](tuple[int, ...])
    with pytest.raises(packing.PackingError, match=r"\[0\]: expected an integer, got bool"):
        ints.unpack(packing.pack((True,)))
