"""A command's arguments as a reader is shown them: cut to a size, then one shell line.

The arguments are the caller's, and a reader takes a line at the margin for the writer's: an
argument holding a newline and "exited with code 0" would forge how the command ended. So
an argv is shown as a shell would need it pasted (`pasteable`: `shlex.quote`, or `$'…'`
with every control and bidi character escaped), one line whatever it holds; `jigcmd run`'s
`command:` line, an MCP result's first line and a progress notification all show it so.
Pure: text in, text out.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Final

from jigcmd.protocol.inert import one_line

__all__ = ["cut_invocation", "invocation_line", "pasteable"]

# At scale 1 the invocation is cut like this (32 arguments of 1 KiB would fill a budget).
_ARG_CHARS: Final = 160
_ARGS_SHOWN: Final = 12
# What stands for the arguments cut off the end (`attest/verify_view.py` reads it back).
_MORE_ARGUMENTS: Final = re.compile(r"… [0-9]+ more arguments")


def cut_invocation(invocation: list[str], scale: float = 1.0) -> list[str]:
    """The first arguments, each cut to its first characters, then how many more there are."""
    shown = 4 + int((_ARGS_SHOWN - 4) * scale)
    chars = 24 + int((_ARG_CHARS - 24) * scale)
    cut = [_short(arg, chars) for arg in invocation[:shown]]
    if len(invocation) > shown:
        cut.append(f"… {len(invocation) - shown} more arguments")
    return cut


def invocation_line(cut: list[str]) -> str:
    """A cut invocation as one shell line (`pasteable`), the count of arguments cut unquoted."""
    # The count only ever follows four arguments or more; an argument shaped like it, last,
    # reads as the count (as in `structuredContent`), never as more than that one phrase.
    more = cut[-1] if len(cut) > 4 and _MORE_ARGUMENTS.fullmatch(cut[-1]) else None
    words = pasteable(cut[:-1] if more else cut)
    return f"{words} {more}" if more else words


def pasteable(argv: Sequence[str]) -> str:
    """`argv` as a shell command line that a shell reads back to the same words, and that
    holds no control character: `shlex.quote`, or `$'…'` for an argument with one."""
    return " ".join(shlex.quote(arg) if one_line(arg) == arg else _ansi_c(arg) for arg in argv)


def _ansi_c(arg: str) -> str:
    """`arg` in ANSI-C quotes (bash, ksh, zsh, POSIX.1-2024 sh): what a reader must see
    escaped (and `\\`, `'`) as the bytes of its UTF-8, so no locale changes it."""
    shown = []
    for char in arg:
        if char in "\\'":
            shown.append("\\" + char)
        elif one_line(char) != char:
            shown.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8"))
        else:
            shown.append(char)
    return "$'" + "".join(shown) + "'"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
