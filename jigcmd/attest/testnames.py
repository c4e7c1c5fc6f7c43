"""How a signed test result names a test: its path joined by " > ", each part escaped.

A test's path is its file, its `describe` blocks from the outermost in, and its own name.
Joined by " > " alone, `describe("a > b") > "c"` and `describe("a") > describe("b") > "c"`
would read the same, so within a part a `>` with a space (or the part's edge) on both sides
is written `\\>`, and a `\\` before a `\\` or a `>` is written `\\\\`; nothing else changes. A
name no part of which holds " > " or such a backslash is the plain join, as Bun's console
shows it, and `split` gives back every path exactly (a line break is kept as it is: JSON
strings carry it). The test-result/v0.1 predicate leaves a name's meaning to its producer
and consumer (in-toto's spec): the statement says this one in its report's `testNames`.

Pure: strings in, strings out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["CONSOLE_NAMES", "JUNIT_NAMES", "SEPARATOR", "joined", "split"]

SEPARATOR: Final = " > "
# What a statement's `testNames` annotation says of its names, by where they were read.
JUNIT_NAMES: Final = (
    "file > describe > ... > name, from the runner's JUnit report; within each part a '>' "
    "with a space or the part's edge on both sides is written '\\>' and a '\\' before '\\' or "
    "'>' is written '\\\\', so the ' > ' between parts is never a name's own; a name longer "
    "than 512 characters is cut, its last one '…'"
)
CONSOLE_NAMES: Final = (
    "file > the rest as bun test printed it on stderr (no JUnit report was read): a name is "
    "cut at its first line break, and a ' > ' within a describe or test name reads as the "
    "separator"
)


def joined(parts: Sequence[str]) -> str:
    """The parts of a test's path as one name that `split` gives back exactly."""
    return SEPARATOR.join(_escaped(part) for part in parts)


def split(name: str) -> list[str]:
    """The parts of a name `joined` made (the inverse of `joined`)."""
    parts: list[str] = []
    part: list[str] = []
    at = 0
    while at < len(name):
        if name.startswith(SEPARATOR, at):
            parts.append("".join(part))
            part = []
            at += len(SEPARATOR)
        elif name[at] == "\\" and name[at + 1 : at + 2] in ("\\", ">"):
            part.append(name[at + 1])
            at += 2
        else:
            part.append(name[at])
            at += 1
    parts.append("".join(part))
    return parts


def _escaped(part: str) -> str:
    """`part` with every character that could read as (or hide) a separator escaped."""
    if ">" not in part and "\\" not in part:
        return part
    out: list[str] = []
    for at, char in enumerate(part):
        if char == "\\" and part[at + 1 : at + 2] in ("\\", ">"):
            out.append("\\\\")
        elif char == ">" and _spaced(part, at - 1) and _spaced(part, at + 1):
            out.append("\\>")
        else:
            out.append(char)
    return "".join(out)


def _spaced(part: str, at: int) -> bool:
    """Whether `part[at]` is a space, or `at` is past the part's edge (where a separator is)."""
    return at < 0 or at >= len(part) or part[at] == " "
