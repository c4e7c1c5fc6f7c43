"""Wildcard matching whose cost grows with the text, never exponentially. Pure.

A glob translated to a regular expression (`*` as `[^/]*`) backtracks: `*a*a*a…b` against
a name of forty `a`s tries every way to place the `a`s, and a project someone hands over
chooses both. Here a pattern is its pieces between the stars, and each piece is placed at
its leftmost fit after the one before it (placing it any later never helps): one
`str.find` for a literal piece, and a piece holding `?` is tried only where its longest
literal run is found. Globs are matched segment by segment the same way, `**` being the
star of segments, so their cost is bounded by a path's depth and its names' lengths,
never by the ways to place the pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Glob", "wildcard_matches"]

_Piece = TypeVar("_Piece", bound=Sized)


def wildcard_matches(pattern: str, text: str, *, any_one: bool = False) -> bool:
    """Whether `text` is `pattern` with each `*` any run of characters (`/` included) and,
    with `any_one`, each `?` any one character."""

    def fits(piece: str, at: int) -> bool:
        if not any_one:
            return text.startswith(piece, at)
        return _one_by_one(piece, text[at : at + len(piece)])

    return _placed(pattern.split("*"), len(text), fits, _finder(text, any_one))


@dataclass(frozen=True)
class Glob:
    """A directory glob, split once: its runs of name patterns between `**` segments."""

    pieces: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, segments: Sequence[str]) -> Glob:
        """The glob of `segments`: `**` any run of them (at least one when it ends the glob,
        as in Bun), any other one name's pattern (`*` and `?` within that name)."""
        if segments[-1:] == ["**"]:
            segments = [*segments[:-1], "*", "**"]
        pieces: list[tuple[str, ...]] = [()]
        for segment in segments:
            if segment == "**":
                pieces.append(())
            else:
                pieces[-1] += (segment,)
        return cls(tuple(pieces))

    def matches(self, path: Sequence[str]) -> bool:
        """Whether the `path` segments match (a glob is matched against many: no `**`, and
        it costs a comparison per name)."""
        if len(self.pieces) == 1:
            return len(self.pieces[0]) == len(path) and all(
                map(_name_matches, self.pieces[0], path)
            )

        def fits(piece: tuple[str, ...], at: int) -> bool:
            names = path[at : at + len(piece)]
            return len(names) == len(piece) and all(map(_name_matches, piece, names))

        def find(piece: tuple[str, ...], start: int, end: int) -> int:
            # At most one try per segment of `path`: its depth bounds the cost, not the glob.
            return next((at for at in range(start, end - len(piece) + 1) if fits(piece, at)), -1)

        return _placed(list(self.pieces), len(path), fits, find)


def _name_matches(pattern: str, name: str) -> bool:
    """Whether one name matches one segment's pattern; a literal one or a lone `*` (most of
    them) without matching."""
    if pattern in (name, "*"):
        return True
    return ("*" in pattern or "?" in pattern) and wildcard_matches(pattern, name, any_one=True)


def _placed(
    pieces: list[_Piece],
    length: int,
    fits: Callable[[_Piece, int], bool],
    find: Callable[[_Piece, int, int], int],
) -> bool:
    """Whether `pieces`, joined by stars, cover a text of `length`: the first at its start,
    the last at its end, each other at its leftmost fit after the one before."""
    first, *middle = pieces
    if not middle:
        return len(first) == length and fits(first, 0)
    last = middle.pop()
    end = length - len(last)
    if sum(len(piece) for piece in pieces) > length or not fits(first, 0):
        return False
    if not fits(last, end):
        return False
    at = len(first)
    for piece in middle:
        found = find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _finder(text: str, any_one: bool) -> Callable[[str, int, int], int]:
    """The leftmost place of a piece in `text[start:end]`, -1 when it has none."""

    def find(piece: str, start: int, end: int) -> int:
        if not any_one or "?" not in piece:
            return text.find(piece, start, end)
        # Anchored on the piece's longest literal run, found by `str.find`; every place it
        # is found is checked once, and no place is found twice.
        run = max(piece.split("?"), key=len)
        offset = piece.find(run)
        at = text.find(run, start + offset, end)
        while at >= 0 and at - offset + len(piece) <= end:
            here = at - offset
            if _one_by_one(piece, text[here : here + len(piece)]):
                return here
            at = text.find(run, at + 1, end)
        return -1

    return find


def _one_by_one(piece: str, text: str) -> bool:
    """Whether `text` is `piece`, each `?` of it any one character."""
    return len(piece) == len(text) and all(p in ("?", t) for p, t in zip(piece, text, strict=True))
