"""Text of someone else's made inert for a reader: control characters shown as escapes.

A terminal obeys escape sequences, and a reader (a person, a model) takes a line at the
margin for the writer's: so every control character but newline and tab (C0, DEL, C1) and
the Unicode controls that reorder a line (bidi embeddings, overrides, isolates and marks)
becomes its escape, and so do the Unicode line and paragraph separators (U+2028, U+2029):
newline is then the only line break left, where a caller frames each line, and `one_line`
shows it too. Shared by
`jigcmd run`'s answer (`frontends/runtext.py`) and MCP's result text (`mcp_results.py`),
where `fenced` quotes a stream as a Markdown code block the stream cannot close and
`code_span` a phrase of someone else's (a command line) in a line of jigcmd's; `json_text`
does the same for JSON text given a reader as text (escapes there keep the JSON's value).
Pure: text in, text out.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["code_span", "fenced", "invisible", "json_text", "one_line", "prose_line", "visible"]

_BIDI: Final = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS: Final = [c for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)]
# What else a reader may break a line at (Python's `splitlines`, JavaScript): the Unicode line
# and paragraph separators; every other one (VT, FF, FS, GS, RS, NEL) is a control character.
_LINE_BREAKS: Final = (0x2028, 0x2029)
_INERT: Final = {
    **{c: f"\\x{c:02x}" for c in _CONTROLS},
    **{c: f"\\u{c:04x}" for c in (*_BIDI, *_LINE_BREAKS)},
}
_BACKTICKS: Final = re.compile("`+")
_NON_ASCII: Final = re.compile("[^\x00-\x7f]")
# Unicode tag characters (U+E0000-U+E007F), invisible, some of them not yet assigned.
_TAGS: Final = range(0xE0000, 0xE0080)
# A run of line breaks (CR, LF, CRLF), with the spaces and tabs around and between them.
_BREAK_RUN: Final = re.compile(r"(?:[ \t]*[\r\n])+[ \t]*")


def visible(text: str) -> str:
    """`text` with every control character but newline and tab, and every line break but
    newline (U+2028, U+2029), shown as its escape."""
    return text.translate(_INERT)


def one_line(text: str) -> str:
    """`visible(text)` with its newlines shown too: one line of jigcmd's, whatever it names.

    For jigcmd's own messages that carry a name someone else chose (a file's, a test's): a
    newline in it would start a line of the writer's choosing at the margin.
    """
    return visible(text).replace("\n", "\\n")


def prose_line(text: str) -> str:
    """`one_line(text)` with each run of line breaks, and the spaces around it, one space.

    For a message the runner broke into lines (`Expected: 2\n\nReceived: 3`): it reads as
    one sentence, `Expected: 2 Received: 3`, never with a gap where the lines were.
    """
    return one_line(_BREAK_RUN.sub(" ", text).strip())


def fenced(text: str) -> str:
    """`visible(text)` as a Markdown code block that nothing in it can close."""
    # CommonMark ends a code block at a line of backticks as long as its opening fence. This
    # fence is longer than every run of backticks in the text, on a line alone or not (a
    # reader is not always a CommonMark parser), so the writer cannot end the quote.
    shown = visible(text).removesuffix("\n")
    longest = max(map(len, _BACKTICKS.findall(shown)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{shown}\n{fence}"


def code_span(text: str) -> str:
    """`one_line(text)` as a Markdown code span that nothing in it can close."""
    # As in `fenced`: the fence is longer than every run of backticks inside; the spaces keep
    # a backtick at either end from joining the fence (CommonMark strips one each side).
    shown = one_line(text)
    longest = max(map(len, _BACKTICKS.findall(shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def json_text(text: str) -> str:
    """JSON text with every bidi control, line separator (U+2028, U+2029) and other invisible
    format character in it as its `\\u` escape: the same JSON value, every line one line."""
    # JSON's own syntax is ASCII, so each such character is inside a string, where an escape
    # reads back as it; control characters a JSON encoder escapes already.
    return _NON_ASCII.sub(_json_escape, text)


def invisible(char: str) -> bool:
    """Whether `char` shows nothing yet a reader may act on: a format character (bidi
    controls, zero-width space and joiners, U+FEFF, soft hyphen), a line or paragraph
    separator, or a tag character."""
    return unicodedata.category(char) in ("Cf", "Zl", "Zp") or ord(char) in _TAGS


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    if not invisible(char):
        return char
    units = char.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(units[i : i + 2]):04x}" for i in range(0, len(units), 2))
