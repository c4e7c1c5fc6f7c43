"""msgpack with the standard library alone: how the zygote and pid 1 read and write frames.

Every pid 1 is a clone of the zygote's image, and what that image holds costs every run:
the clone copies its page tables, and each page the zygote or pid 1 writes afterwards is a
copy-on-write fault (docs/envelope.md measures it). msgspec and what it imports were ~70
modules and ~4 MB of that image, so the zygote's side of the control channel is this
module, and the server's the same frames through msgspec (`jigcmd.envelope.wire`).

It covers what the channel's types hold: nil, booleans, integers, floats, strings, bytes
and arrays (a `NamedTuple` is the array of its fields, as msgspec encodes one). `Reader`
validates as it builds, from the annotations of the `NamedTuple` it is made for (read once):
every value must have its field's type and every array a length its type allows, or
`PackingError` says which field is wrong, and the whole frame is refused: nothing is run
from a frame that is not what the sender's types say.
"""

from __future__ import annotations

import struct
import types
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["PackingError", "Reader", "pack", "unpack"]

T = TypeVar("T")
Convert = Callable[[object], Any]

# Nested arrays deeper than this are refused (the channel's types nest four deep).
_MAX_DEPTH = 16
_U8, _U16, _U32, _U64 = (struct.Struct(f">{c}") for c in "BHIQ")
_I8, _I16, _I32, _I64 = (struct.Struct(f">{c}") for c in "bhiq")
_F32, _F64 = struct.Struct(">f"), struct.Struct(">d")


class PackingError(ValueError):
    """Raised when bytes are not msgpack of the expected type, or a value cannot be packed."""


# -- packing ----------------------------------------------------------------------------


def pack(value: object) -> bytes:
    """`value` as msgpack: None, bool, int, float, str, bytes and tuples (NamedTuples) of them."""
    out = bytearray()
    _pack(value, out)
    return bytes(out)


def _pack(value: object, out: bytearray) -> None:
    if value is None:
        out.append(0xC0)
    elif value is True or value is False:
        out.append(0xC3 if value else 0xC2)
    elif isinstance(value, int):
        _pack_int(value, out)
    elif isinstance(value, float):
        out.append(0xCB)
        out += _F64.pack(value)
    elif isinstance(value, str):
        data = value.encode("utf-8")
        _header(len(data), out, fix=(0xA0, 32), sized=(0xD9, 0xDA, 0xDB))
        out += data
    elif isinstance(value, bytes):
        _header(len(value), out, fix=None, sized=(0xC4, 0xC5, 0xC6))
        out += value
    elif isinstance(value, tuple | list):
        _header(len(value), out, fix=(0x90, 16), sized=(None, 0xDC, 0xDD))
        for item in value:
            _pack(item, out)
    else:
        raise PackingError(f"cannot pack a {type(value).__name__}")


def _pack_int(value: int, out: bytearray) -> None:
    if 0 <= value < 0x80 or -32 <= value < 0:
        out += _I8.pack(value) if value < 0 else _U8.pack(value)
    elif value >= 0:
        for code, form in ((0xCC, _U8), (0xCD, _U16), (0xCE, _U32), (0xCF, _U64)):
            if value < 1 << (8 * form.size):
                out.append(code)
                out += form.pack(value)
                return
        raise PackingError(f"integer {value} does not fit in 64 bits")
    else:
        for code, form in ((0xD0, _I8), (0xD1, _I16), (0xD2, _I32), (0xD3, _I64)):
            if value >= -(1 << (8 * form.size - 1)):
                out.append(code)
                out += form.pack(value)
                return
        raise PackingError(f"integer {value} does not fit in 64 bits")


def _header(
    length: int,
    out: bytearray,
    *,
    fix: tuple[int, int] | None,
    sized: tuple[int | None, int, int],
) -> None:
    if fix is not None and length < fix[1]:
        out.append(fix[0] | length)
        return
    for code, form in zip(sized, (_U8, _U16, _U32), strict=True):
        if code is not None and length < 1 << (8 * form.size):
            out.append(code)
            out += form.pack(length)
            return
    raise PackingError(f"{length} items or bytes are too many for msgpack")


# -- unpacking --------------------------------------------------------------------------


def unpack(data: bytes) -> object:
    """The plain value that `data` holds, all of it (lists for arrays); no types checked."""
    try:
        value, end = _read(data, 0, 0)
    except (IndexError, struct.error):
        raise PackingError(f"truncated msgpack ({len(data)} bytes)") from None
    if end != len(data):
        raise PackingError(f"{len(data) - end} bytes after the msgpack value")
    return value


def _read(data: bytes, pos: int, depth: int) -> tuple[object, int]:
    code = data[pos]
    pos += 1
    if code < 0x80:
        return code, pos
    if code >= 0xE0:
        return code - 0x100, pos
    if 0xA0 <= code <= 0xBF:
        return _text(data, pos, code & 0x1F)
    if 0x90 <= code <= 0x9F:
        return _array(data, pos, code & 0x0F, depth)
    if code == 0xC0:
        return None, pos
    if code in (0xC2, 0xC3):
        return code == 0xC3, pos
    sized = _SIZED.get(code)
    if sized is None:
        raise PackingError(f"msgpack type 0x{code:02x} is not used on this channel")
    kind, form = sized
    (number,) = form.unpack_from(data, pos)
    pos += form.size
    if kind == "number":
        return number, pos
    if kind == "str":
        return _text(data, pos, number)
    if kind == "bin":
        if pos + number > len(data):
            raise IndexError
        return data[pos : pos + number], pos + number
    return _array(data, pos, number, depth)


_SIZED: dict[int, tuple[str, struct.Struct]] = {
    0xC4: ("bin", _U8),
    0xC5: ("bin", _U16),
    0xC6: ("bin", _U32),
    0xCA: ("number", _F32),
    0xCB: ("number", _F64),
    0xCC: ("number", _U8),
    0xCD: ("number", _U16),
    0xCE: ("number", _U32),
    0xCF: ("number", _U64),
    0xD0: ("number", _I8),
    0xD1: ("number", _I16),
    0xD2: ("number", _I32),
    0xD3: ("number", _I64),
    0xD9: ("str", _U8),
    0xDA: ("str", _U16),
    0xDB: ("str", _U32),
    0xDC: ("array", _U16),
    0xDD: ("array", _U32),
}


def _text(data: bytes, pos: int, length: int) -> tuple[str, int]:
    end = pos + length
    if end > len(data):
        raise IndexError
    try:
        return data[pos:end].decode("utf-8"), end
    except UnicodeDecodeError:
        raise PackingError(f"a string at byte {pos} is not UTF-8") from None


def _array(data: bytes, pos: int, length: int, depth: int) -> tuple[list[object], int]:
    if depth >= _MAX_DEPTH:
        raise PackingError(f"arrays nested deeper than {_MAX_DEPTH}")
    # Every item takes a byte at least: a length beyond what is left is refused up front.
    if length > len(data) - pos:
        raise IndexError
    items: list[object] = []
    for _ in range(length):
        item, pos = _read(data, pos, depth + 1)
        items.append(item)
    return items, pos


# -- typed values -----------------------------------------------------------------------


class Reader(Generic[T]):
    """Decodes msgpack into `kind` (a NamedTuple, or a tuple type of them), validating it."""

    def __init__(self, kind: object) -> None:
        self._convert = _converter(kind)

    def unpack(self, data: bytes) -> T:
        """The `kind` that `data` holds (PackingError when it holds anything else)."""
        result: T = self._convert(unpack(data))
        return result

    def convert(self, value: object) -> T:
        """`value` (plain values, lists for arrays, as msgpack decodes them) as a `kind`."""
        result: T = self._convert(value)
        return result


_CONVERTERS: dict[object, Convert] = {}


def _converter(hint: object) -> Convert:
    known = _CONVERTERS.get(hint)
    if known is None:
        known = _CONVERTERS[hint] = _make(hint)
    return known


def _make(hint: object) -> Convert:
    if hint is type(None) or hint is None:
        return _exactly(type(None), "nil")
    if hint is bool:
        return _exactly(bool, "a boolean")
    if hint is int:
        return _exactly(int, "an integer")
    if hint is str:
        return _exactly(str, "a string")
    if hint is bytes:
        return _exactly(bytes, "bytes")
    if hint is float:
        return _float
    if isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields"):
        return _record(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return _literal(args)
    if origin in (types.UnionType, typing.Union):
        return _union(tuple(_converter(arg) for arg in args), hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _sequence(_converter(args[0]))
        return _fixed(tuple(_converter(arg) for arg in args))
    raise TypeError(f"packing cannot read {hint!r}")


def _exactly(kind: type, name: str) -> Convert:
    def convert(value: object) -> object:
        if type(value) is not kind:
            raise PackingError(f"expected {name}, got {_kind(value)}")
        return value

    return convert


def _float(value: object) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
    raise PackingError(f"expected a number, got {_kind(value)}")


def _literal(allowed: tuple[object, ...]) -> Convert:
    def convert(value: object) -> object:
        if type(value) is not str or value not in allowed:
            raise PackingError(f"expected one of {allowed!r}, got {value!r:.40}")
        return value

    return convert


def _union(options: tuple[Convert, ...], hint: object) -> Convert:
    def convert(value: object) -> object:
        for option in options:
            try:
                return option(value)
            except PackingError:
                continue
        raise PackingError(f"expected {hint}, got {_kind(value)}")

    return convert


def _sequence(item: Convert) -> Convert:
    def convert(value: object) -> tuple[object, ...]:
        if type(value) is not list:
            raise PackingError(f"expected an array, got {_kind(value)}")
        return tuple(_at(item, element, index) for index, element in enumerate(value))

    return convert


def _fixed(items: tuple[Convert, ...]) -> Convert:
    def convert(value: object) -> tuple[object, ...]:
        if type(value) is not list or len(value) != len(items):
            raise PackingError(f"expected an array of {len(items)}, got {_kind(value)}")
        return tuple(
            _at(c, element, index)
            for index, (c, element) in enumerate(zip(items, value, strict=True))
        )

    return convert


def _record(kind: type[tuple[object, ...]]) -> Convert:
    fields: tuple[str, ...] = kind._fields  # type: ignore[attr-defined]  # a NamedTuple's
    required = len(fields) - len(kind._field_defaults)  # type: ignore[attr-defined]  # likewise
    hints = typing.get_type_hints(kind)
    converters = [_converter(hints[name]) for name in fields]

    def convert(value: object) -> object:
        if type(value) is not list or not required <= len(value) <= len(fields):
            raise PackingError(
                f"expected {kind.__name__} (an array of {required} to {len(fields)}), "
                f"got {_kind(value)}"
            )
        values = []
        for name, each, element in zip(fields, converters, value, strict=False):
            try:
                values.append(each(element))
            except PackingError as exc:
                raise PackingError(f"{kind.__name__}.{name}: {exc}") from None
        return kind(*values)

    return convert


def _at(convert: Convert, value: object, index: int) -> object:
    try:
        return convert(value)
    except PackingError as exc:
        raise PackingError(f"[{index}]: {exc}") from None


def _kind(value: object) -> str:
    if type(value) is list:
        return f"an array of {len(value)}"
    return type(value).__name__
