"""A count and its noun in a reader's words: `1 byte`, `2 bytes`, `65,536 bytes`.

Every count jigcmd words for a reader (a stream's bytes, the tests or arguments left out) is
one a command chooses, so it can be 1: the noun is then singular. Pure: a number in, text out.
"""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, noun: str) -> str:
    """`count` with thousands separators and `noun`, plural (`noun` + "s") unless it is 1."""
    return f"{count:,} {noun if count == 1 else noun + 's'}"
