"""Walk a decoded JSON value in document order; build a JSON pointer only for the value asked.

A walk that formats every value's pointer as it goes holds, for a container of n members,
n pointers at once: a 2 MiB frame with a 1,000-character key over a million numbers is a
gigabyte of pointers. `walk` keeps one path (a list of keys and indexes, as deep as the
value nests) and an iterator per open container, so it costs the depth in memory and the
number of values in time; `pointer` formats the one path a caller reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Path", "pointer", "shown", "token", "walk"]

Path = list[str | int]

# In a decoded `str` a valid pair is one character: any surrogate left is a lone one.
_LONE = re.compile("[\ud800-\udfff]")


def walk(root: object, skip: Path | None = None) -> Iterator[tuple[Path, object]]:
    """Each value under `root`, root first, in document order, with its path from `root`.

    The path is one list that the walk changes: read it before asking for the next value.
    The value at `skip` (a path) and all it holds are left out.
    """
    path: Path = []
    open_: list[Iterator[tuple[Any, object]]] = []
    item = root
    while True:
        if path != skip:
            yield path, item
            if isinstance(item, dict):
                open_.append(iter(item.items()))
                path.append("")
            elif isinstance(item, list):
                open_.append(enumerate(item))
                path.append(0)
        while open_:
            step = next(open_[-1], None)
            if step is not None:
                path[-1], item = step
                break
            open_.pop()
            path.pop()
        else:
            return


def pointer(path: Sequence[str | int]) -> str:
    """The JSON pointer of `path` (RFC 6901), lone surrogates in keys shown as `\\uXXXX`."""
    return "".join(f"/{token(part)}" if type(part) is str else f"/{part}" for part in path)


def token(key: str) -> str:
    """A pointer token, its own lone surrogates shown as `\\uXXXX` so the pointer encodes."""
    return shown(key.replace("~", "~0").replace("/", "~1"))


def shown(text: str) -> str:
    """`text` with its lone surrogates written as `\\uXXXX`: so any UTF-8 encoder takes it."""
    return _LONE.sub(lambda lone: f"\\u{ord(lone.group()):04x}", text)
