"""The zygote's frames: `marshal`, and one generated reader per NamedTuple that checks it.

Every pid 1 is a clone of the zygote's image, and what that image holds costs every run:
the clone copies its page tables, and each page the zygote or pid 1 writes afterwards is a
copy-on-write fault (docs/envelope.md measures it). msgspec and what it imports were ~45
modules and ~3 MB of that image, so the zygote's side of the control channel is this module,
and the server's the same frames through msgspec (`jigcmd.envelope.wire`).

Why `marshal`: it is C, built into the interpreter (nothing to import), and it writes and
reads exactly the values the channel's types hold (None, bool, int, float, str, bytes,
tuples). Pure-Python msgpack, and even the `json` module's Python around its C scanner,
wrote ~100 more pages per frame after a clone than msgspec (measured, docs/envelope.md). Both
ends of the channel are our own processes running the same interpreter (the zygote is
started with the server's `sys.executable`, so its marshal format is the server's), and
nothing read here is ever executed: a reader accepts only those plain values.

A NamedTuple travels as the plain tuple of its fields (`plain`). `Reader(kind)` compiles, once,
one Python function per NamedTuple reachable from `kind`, from its annotations, that checks
every field's type and the tuple's length (missing trailing fields take their defaults) and
builds the NamedTuple: one function per record, because every object a reader touches is a
page written after the clone. Anything else raises `FrameError`, naming the field: the whole
frame is refused, and nothing is run from a frame that is not what the sender's types say.
"""

from __future__ import annotations

import marshal
import types
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["VERSION", "FrameError", "Reader", "Writer", "dumps", "dumps_plain", "loads", "plain"]

T = TypeVar("T")
# marshal's format 2: no back-references or interning (3 and 4 have them), which made
# reading a launch write ~10 more pages after a clone, for ~10% fewer bytes.
VERSION = 2

# The leaf types a check names exactly, and what each is called in an error.
_LEAVES: dict[object, str] = {
    int: "an integer",
    str: "a string",
    bytes: "bytes",
    bool: "a boolean",
    type(None): "null",
}


class FrameError(ValueError):
    """Raised when a frame is not marshal of the expected type, or a value cannot be written."""


def plain(value: object) -> object:
    """`value` with every NamedTuple in it turned into a plain tuple (marshal takes no other).

    Walks every item; a `Writer` knows where its type's NamedTuples are and goes there only.
    """
    if isinstance(value, tuple):
        return tuple([plain(item) for item in value])
    return value


def dumps(value: object) -> bytes:
    """`value` (NamedTuples and the leaf types above, nested) as marshal bytes."""
    return dumps_plain(plain(value))


def dumps_plain(value: object) -> bytes:
    """`value`, already plain (no NamedTuple in it: `Writer.plain`), as marshal bytes."""
    try:
        return marshal.dumps(value, VERSION)  # type: ignore[arg-type]  # refused if not
    except ValueError as exc:
        raise FrameError(f"cannot write the frame: {exc}") from None


def loads(data: bytes) -> object:
    """The plain value `data` holds; no types checked."""
    try:
        return marshal.loads(data)  # noqa: S302 - our own processes' frames (the docstring)
    except (ValueError, EOFError, TypeError) as exc:
        raise FrameError(f"not a frame: {exc}") from None


def _bad(where: str, expected: str, value: object) -> typing.NoReturn:
    got = f"a tuple of {len(value)}" if isinstance(value, tuple) else type(value).__name__
    raise FrameError(f"{where}: expected {expected}, got {got}")


class Writer(Generic[T]):
    """Turns a `kind` into the plain tuples marshal writes, touching only its NamedTuples."""

    def __init__(self, kind: object) -> None:
        self._plain: Callable[[object], object] = _Compiler().writer(kind)

    def plain(self, value: T) -> object:
        """`value` as plain tuples (`marshal.dumps(…, VERSION)` writes them)."""
        return self._plain(value)


class Reader(Generic[T]):
    """Reads a frame into `kind` (a NamedTuple, or a tuple type of them), checking every field."""

    def __init__(self, kind: object) -> None:
        self._read: Callable[[object], Any] = _Compiler().reader(kind)

    def loads(self, data: bytes) -> T:
        """The `kind` that `data` holds (FrameError when it holds anything else)."""
        result: T = self._read(loads(data))
        return result

    def convert(self, value: object) -> T:
        """`value` (plain values, as `loads` gives them) as a `kind`."""
        result: T = self._read(value)
        return result


class _Compiler:
    """Writes the source of the readers for one `kind`, then compiles it once."""

    def __init__(self) -> None:
        # tuple.__new__ builds a NamedTuple without its Python `__new__` (one frame fewer).
        self.names: dict[str, object] = {"_bad": _bad, "_new": tuple.__new__}
        self.lines: list[str] = []
        self.done: dict[tuple[str, object], str] = {}

    def reader(self, kind: object) -> Callable[[object], Any]:
        return self._compiled(self._function(kind))

    def writer(self, kind: object) -> Callable[[object], object]:
        return self._compiled(self._writer(kind))

    def _compiled(self, name: str) -> Callable[[object], Any]:
        exec("\n".join(self.lines), self.names)  # noqa: S102 - our own code, from our types
        function: Callable[[object], Any] = self.names[name]  # type: ignore[assignment]
        return function

    def _named(self, kind: object, prefix: str) -> tuple[str, bool]:
        """The name of `kind`'s function with `prefix`, and whether it is yet to be written."""
        known = self.done.get((prefix, kind))
        if known is not None:
            return known, False
        name = self.done[prefix, kind] = f"{prefix}{len(self.done)}"
        return name, True

    def _writer(self, kind: object) -> str:
        """The name of a function making a `kind` marshal's plain tuples, written once."""
        name, new = self._named(kind, "_write")
        if not new:
            return name
        if isinstance(kind, type) and _is_record(kind):
            hints = typing.get_type_hints(kind)
            fields: tuple[str, ...] = kind._fields  # type: ignore[attr-defined]  # a NamedTuple's
            parts = [self._plain(hints[field], f"v[{i}]", 0) for i, field in enumerate(fields)]
            same = all(part == f"v[{i}]" for i, part in enumerate(parts))
            body = "tuple(v)" if same else (f"({', '.join(parts)},)" if parts else "()")
        else:
            body = self._plain(kind, "v", 0)
        self.lines += [f"def {name}(v):", f"    return {body}"]
        return name

    def _plain(self, hint: object, expr: str, depth: int) -> str:
        """An expression for `expr` (of type `hint`) as plain tuples: `expr` itself if it is."""
        if isinstance(hint, type) and _is_record(hint):
            return f"{self._writer(hint)}({expr})"
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (types.UnionType, typing.Union):
            options = [self._plain(arg, expr, depth) for arg in args if arg is not type(None)]
            if len(options) == 1 and options[0] != expr:
                return f"(None if {expr} is None else {options[0]})"
            return expr
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            item = f"e{depth}"
            inner = self._plain(args[0], item, depth + 1)
            return expr if inner == item else f"tuple([{inner} for {item} in {expr}])"
        if origin is tuple:
            parts = [self._plain(arg, f"{expr}[{i}]", depth) for i, arg in enumerate(args)]
            same = all(part == f"{expr}[{i}]" for i, part in enumerate(parts))
            return expr if same else f"({', '.join(parts)},)"
        return expr

    def _constant(self, value: object) -> str:
        name = f"_c{len(self.names)}"
        self.names[name] = value
        return name

    def _function(self, kind: object) -> str:
        """The name of the function reading `kind` (a NamedTuple or another type), written once."""
        name, new = self._named(kind, "_read")
        if not new:
            return name
        if isinstance(kind, type) and _is_record(kind):
            body = self._record(kind)
        else:
            where = repr(kind).replace("typing.", "")
            body = ["v0 = v", *self._test(kind, "v0", where), "return v0"]
        self.lines += [f"def {name}(v):", *(f"    {line}" for line in body)]
        return name

    def _record(self, kind: type) -> list[str]:
        fields: tuple[str, ...] = kind._fields  # type: ignore[attr-defined]  # a NamedTuple's
        defaults = tuple(kind._field_defaults.values())  # type: ignore[attr-defined]  # likewise
        required, hints = len(fields) - len(defaults), typing.get_type_hints(kind)
        lines = [
            f"if type(v) is not tuple or not {required} <= len(v) <= {len(fields)}:",
            f"    _bad({kind.__name__!r}, 'a tuple of {required} to {len(fields)}', v)",
        ]
        if defaults:
            # The trailing fields left out take their defaults, as msgspec reads them.
            tail = self._constant(defaults)
            lines.append(f"if len(v) < {len(fields)}: v = v + {tail}[len(v) - {required}:]")
        for index, field in enumerate(fields):
            lines.append(f"v{index} = v[{index}]")
            lines += self._test(hints[field], f"v{index}", f"{kind.__name__}.{field}")
        arguments = ", ".join(f"v{index}" for index in range(len(fields)))
        values = f"({arguments},)" if fields else "()"
        return [*lines, f"return _new({self._constant(kind)}, {values})"]

    def _test(self, hint: object, var: str, where: str) -> list[str]:
        """Lines that check `var` against `hint`, rebinding it to the converted value."""
        if hint in _LEAVES:
            kind = _name(hint)
            return [f"if type({var}) is not {kind}: _bad({where!r}, {_LEAVES[hint]!r}, {var})"]
        if hint is float:
            return [
                f"if type({var}) is int: {var} = float({var})",
                f"elif type({var}) is not float: _bad({where!r}, 'a number', {var})",
            ]
        if isinstance(hint, type) and _is_record(hint):
            return [f"{var} = {self._function(hint)}({var})"]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Literal:
            allowed = self._constant(args)
            return [
                f"if type({var}) is not str or {var} not in {allowed}:",
                f"    _bad({where!r}, 'one of ' + repr({allowed}), {var})",
            ]
        if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
            (other,) = (arg for arg in args if arg is not type(None))
            return [
                f"if {var} is not None:",
                *(f"    {line}" for line in self._test(other, var, where)),
            ]
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            lines = [f"if type({var}) is not tuple: _bad({where!r}, 'a tuple', {var})"]
            if args[0] in _LEAVES:
                # Leaves are checked in place: the tuple itself is kept.
                kind, named = _name(args[0]), _LEAVES[args[0]]
                return [
                    *lines,
                    f"for e in {var}:",
                    f"    if type(e) is not {kind}: _bad({where + '[]'!r}, {named!r}, e)",
                ]
            item = self._function(args[0])
            return [*lines, f"{var} = tuple([{item}(e) for e in {var}])"]
        if origin is tuple:
            lines = [
                f"if type({var}) is not tuple or len({var}) != {len(args)}:",
                f"    _bad({where!r}, 'a tuple of {len(args)}', {var})",
            ]
            parts = [f"{var}_{position}" for position in range(len(args))]
            for position, (arg, part) in enumerate(zip(args, parts, strict=True)):
                lines.append(f"{part} = {var}[{position}]")
                lines += self._test(arg, part, f"{where}[{position}]")
            return [*lines, f"{var} = ({', '.join(parts)},)"]
        raise TypeError(f"records cannot read {hint!r}")


def _name(leaf: object) -> str:
    return "type(None)" if leaf is type(None) else getattr(leaf, "__name__", "?")


def _is_record(kind: object) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")
