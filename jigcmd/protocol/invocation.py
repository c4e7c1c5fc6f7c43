"""A command's arguments as a reader is shown them: cut to a size, then one shell line.

The arguments are the caller's, and a reader takes a line at the margin for the writer's: an
argument holding a newline and "exited with code 0" would forge how the command ended. So
an argv is shown as a shell would need it pasted (`pasteable`: `shlex.quote`, or `$'…'`
with every control, tab, bidi and other invisible format character escaped), one line
whatever it holds; `jigcmd run`'s `command:` line, an MCP result's first line and a
progress notification all show it so. The count of arguments cut off is jigcmd's words,
never an argument's: it is passed as a number, so an argument shaped like it is quoted (and
an MCP result's `structuredContent` holds it as a number beside the arguments shown,
`invocationOmitted`, never as an item of them). Pure: text in, text out.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final

from jigcmd.protocol.counts import counted
from jigcmd.protocol.inert import invisible, one_line

__all__ = ["cut_arguments", "cut_count", "invocation_line", "pasteable"]

# At scale 1 the invocation is cut like this (32 arguments of 1 KiB would fill a budget).
_ARG_CHARS: Final = 160
_ARGS_SHOWN: Final = 12
# At scale 0 each argument keeps this many characters: an escaped one is up to 20 bytes of
# the result's JSON (a tag character's four `\xNN`), and the smallest budget holds them.
_ARG_CHARS_MIN: Final = 8


def cut_arguments(invocation: Sequence[str], scale: float = 1.0) -> tuple[list[str], int]:
    """The first arguments, each cut to its first characters, and how many more there are."""
    shown = 4 + int((_ARGS_SHOWN - 4) * scale)
    chars = _ARG_CHARS_MIN + int((_ARG_CHARS - _ARG_CHARS_MIN) * scale)
    return [_short(arg, chars) for arg in invocation[:shown]], max(0, len(invocation) - shown)


def cut_count(cut: Sequence[str], invocation: Sequence[str]) -> int:
    """How many arguments of `invocation` an older jigcmd's `structuredContent` list `cut`
    counts as cut, in a last phrase `… N more arguments` (for `jigcmd verify` of its answers).

    Read from the whole invocation, never from the list's shape alone: a last phrase shaped
    like the count is the count only if it says how much shorter the list is, and is not
    the invocation's own last argument (then it is that argument, shown whole, either way).
    """
    more = len(invocation) - len(cut) + 1
    # Its words then, whatever the count: "arguments" even for one.
    if not cut or more < 1 or cut[-1] != f"… {more} more arguments":
        return 0
    return more if more > 1 or invocation[-1] != cut[-1] else 0


def invocation_line(cut: Sequence[str], more: int = 0) -> str:
    """Arguments as one shell line (`pasteable`), then the count of `more` cut, unquoted."""
    words = pasteable(cut)
    return f"{words} {_more(more)}" if more else words


def pasteable(argv: Sequence[str]) -> str:
    """`argv` as a shell command line that a shell reads back to the same words, and that
    holds no control, tab or invisible format character: `shlex.quote`, or `$'…'`."""
    return " ".join(_ansi_c(arg) if any(map(_escaped, arg)) else shlex.quote(arg) for arg in argv)


def _ansi_c(arg: str) -> str:
    """`arg` in ANSI-C quotes (bash, ksh, zsh, POSIX.1-2024 sh): what a reader must see
    escaped (and `\\`, `'`) as the bytes of its UTF-8, so no locale changes it."""
    shown = []
    for char in arg:
        if char in "\\'":
            shown.append("\\" + char)
        elif _escaped(char):
            shown.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8"))
        else:
            shown.append(char)
    return "$'" + "".join(shown) + "'"


def _escaped(char: str) -> bool:
    """Whether `char` is shown escaped: what `one_line` escapes, a tab (a terminal moves the
    cursor for it, a reader sees spaces), an invisible format character (zero-width space
    and joiners, U+FEFF, soft hyphen) or a tag character: unseen in a line a reader copies."""
    return one_line(char) != char or char == "\t" or invisible(char)


def _more(count: int) -> str:
    return f"… {counted(count, 'more argument')}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
