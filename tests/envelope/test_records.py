"""The zygote's records: marshal, read back by a generated reader that checks every field."""

from __future__ import annotations

import marshal
from typing import Literal, NamedTuple

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jigcmd.envelope import records


class _Inner(NamedTuple):
    name: str
    flag: bool = False


class _Record(NamedTuple):
    number: int
    data: bytes
    ratio: float
    kind: Literal["a", "b"]
    name: str | None = None
    items: tuple[tuple[str, int], ...] = ()
    inner: _Inner | None = None
    words: tuple[str, ...] = ()


_RECORDS = st.builds(
    _Record,
    number=st.integers(min_value=-(2**63), max_value=2**64 - 1),
    data=st.binary(),
    ratio=st.floats(allow_nan=False),
    kind=st.sampled_from(["a", "b"]),
    name=st.none() | st.text(),
    items=st.lists(st.tuples(st.text(), st.integers())).map(tuple),
    inner=st.none() | st.builds(_Inner, name=st.text(), flag=st.booleans()),
    words=st.lists(st.text()).map(tuple),
)
_READER = records.Reader[_Record](_Record)


@given(_RECORDS)
def test_a_record_reads_back_equal_and_of_its_own_types(record: _Record) -> None:
    """Every field comes back, nested NamedTuples as themselves, not as plain tuples."""
    back = _READER.loads(records.dumps(record))
    assert back == record
    assert back.inner is None or type(back.inner) is _Inner


@given(_RECORDS)
def test_msgspec_reads_what_it_checks_from_the_same_bytes(record: _Record) -> None:
    """The server's side: marshal's plain tuples, converted and checked by msgspec."""
    assert msgspec.convert(marshal.loads(records.dumps(record)), _Record) == record


def test_left_out_trailing_fields_take_their_defaults_and_required_ones_cannot_be() -> None:
    """As msgspec reads a NamedTuple: defaults at the end, nothing else may be left out."""
    assert _READER.convert((1, b"", 0.5, "a")) == _Record(1, b"", 0.5, "a")
    assert _READER.convert((1, b"", 2, "b")).ratio == 2.0
    with pytest.raises(records.FrameError, match=r"_Record: expected a tuple of 4 to 8"):
        _READER.convert((1, b"", 0.5))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ((True, b"", 0.5, "a"), r"_Record.number: expected an integer, got bool"),
        ((1, "x", 0.5, "a"), r"_Record.data: expected bytes, got str"),
        ((1, b"", 0.5, "c"), r"_Record.kind: expected one of \('a', 'b'\)"),
        ((1, b"", 0.5, "a", None, (("x", "y"),)), r"tuple\[str, int\]\[1\]: expected an integer"),
        ((1, b"", 0.5, "a", None, (), ("n", 1)), r"_Inner.flag: expected a boolean, got int"),
        ((1, b"", 0.5, "a", None, (), None, ("w", 2)), r"_Record.words\[\]: expected a string"),
        ([1, b"", 0.5, "a"], r"_Record: expected a tuple of 4 to 8, got list"),
    ],
    ids=["bool-for-int", "str-for-bytes", "literal", "deep-item", "nested", "words", "list"],
)
def test_a_value_that_is_not_the_type_is_refused_naming_where(value: object, words: str) -> None:
    """The error says which field and what was expected; no record comes out."""
    with pytest.raises(records.FrameError, match=words):
        _READER.convert(value)


def test_bytes_that_are_not_marshal_are_refused() -> None:
    """Empty, cut short or garbage: a FrameError, never a half-read value."""
    for data in (b"", records.dumps((1, 2))[:-2], b"\xff\xfe"):
        with pytest.raises(records.FrameError, match="not a frame"):
            records.loads(data)


def test_what_marshal_cannot_hold_is_refused_at_the_writer() -> None:
    """An object of another class: FrameError, nothing written."""
    with pytest.raises(records.FrameError, match="cannot write"):
        records.dumps((1, object()))
