"""A list named in a note: its first few items, then how many more. Pure.

`and 1 more` costs as many words as the one item it hides, so a list one longer than the
limit is named whole: a note never leaves a single package or file unnamed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["cut", "some"]

_T = TypeVar("_T")


def cut(items: Sequence[_T], limit: int) -> tuple[Sequence[_T], int]:
    """The first `limit` of `items` and how many more there are; all of them when the rest
    would be one."""
    if len(items) <= limit + 1:
        return items, 0
    return items[:limit], len(items) - limit


def some(names: Sequence[str], limit: int = 3) -> str:
    """`a, b, c and 2 more`; `a, b, c, d` (never `and 1 more`)."""
    shown, rest = cut(names, limit)
    return ", ".join(shown) + (f" and {rest} more" if rest else "")
