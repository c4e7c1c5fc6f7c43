"""Wildcard matching whose cost grows with the text, never exponentially. Pure.

A glob translated to a regular expression (`*` as `[^/]*`) backtracks: `*a*a*a…b` against
a name of forty `a`s tries every way to place the `a`s, and a project someone hands over
chooses both. Here a pattern is its pieces between the stars, and each piece is placed at
its leftmost fit after the one before it (placing it any later never helps): one
`str.find` for a literal piece, and a piece holding `?` is tried only where its longest
literal run is found. Globs are matched segment by segment the same way, `**` being the
star of segments, so their cost is bounded by a path's depth times its names' lengths,
never by the ways to place the pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from typing import TypeVar

__all__ = ["glob_matches", "wildcard_matches"]

_Piece = TypeVar("_Piece", bound=Sized)


def wildcard_matches(pattern: str, text: str, *, any_one: bool = False) -> bool:
    """Whether `text` is `pattern` with each `*` any run of characters (`/` included) and,
    with `any_one`, each `?` any one character."""

    def fits(piece: str, at: int) -> bool:
        if not any_one:
            return text.startswith(piece, at)
        return _one_by_one(piece, text[at : at + len(piece)])

    return _placed(pattern.split("*"), len(text), fits, _finder(text, any_one))


def glob_matches(glob: Sequence[str], path: Sequence[str]) -> bool:
    """Whether the `path` segments match the `glob` segments: `**` any run of segments (at
    least one when it ends the glob, as in Bun), any other a segment's pattern (`*` and `?`
    within one name)."""
    if glob[-1:] == ["**"]:
        glob = [*glob[:-1], "*", "**"]
    pieces: list[list[str]] = [[]]
    for segment in glob:
        if segment == "**":
            pieces.append([])
        else:
            pieces[-1].append(segment)

    def fits(piece: list[str], at: int) -> bool:
        names = path[at : at + len(piece)]
        return len(names) == len(piece) and all(
            wildcard_matches(p, name, any_one=True) for p, name in zip(piece, names, strict=True)
        )

    def find(piece: list[str], start: int, end: int) -> int:
        # At most one try per segment of `path`: its depth bounds the cost, not the glob.
        return next((at for at in range(start, end - len(piece) + 1) if fits(piece, at)), -1)

    return _placed(pieces, len(path), fits, find)


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
