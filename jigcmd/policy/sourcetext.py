"""What a JavaScript or TypeScript file's text shows without parsing it. Pure.

Hints for people, never rules: `init` reads a project's sources to say which of them hold
JSX and which packages they import. A real parser is not worth its weight here, so one
pass tells comments and string literals apart from code (a regular expression literal
holding a quote can fool it, on that line only). Each scan reads at most `SCAN_CHARS` of a
file (the candidate itself is never larger), in time linear in what it reads: the files
are the project's, and whoever wrote them chose the worst case.
"""

from __future__ import annotations

import re

from jigcmd.contract import MAX_CANDIDATE_BYTES

__all__ = ["SCAN_CHARS", "SOURCE_SUFFIXES", "blank", "has_jsx", "is_source"]

SCAN_CHARS = MAX_CANDIDATE_BYTES
# The extensions Bun loads as JavaScript or TypeScript modules.
SOURCE_SUFFIXES = (".ts", ".tsx", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs")

# Where a comment or a literal may start; each is then read to its end at once. A string
# ends on its line, a template literal may not; one left open is code after its quote.
_OPENER = re.compile(r"""//|/\*|["'`]""")
# ECMAScript's line terminators, each of which ends a `//` comment (for Bun too): a file
# whose lines end in CR alone has code after its comments, not one long comment.
_LINE_END = re.compile("[\n\r\u2028\u2029]")
# A literal's body up to where it ends: possessive, alternatives that never overlap. A
# backslash escapes one character, or CR LF whole: a line continuation (`\` then CR LF, LF,
# CR, U+2028 or U+2029) is one line terminator, so no LF after it ends the string.
_BODY = {
    '"': re.compile(r"""(?:[^"\\\n]|\\(?:\r\n|.))*+""", re.S),
    "'": re.compile(r"""(?:[^'\\\n]|\\(?:\r\n|.))*+""", re.S),
    "`": re.compile(r"""(?:[^`\\]|\\(?:\r\n|.))*+""", re.S),
}
# Markup outside strings and comments: a closing tag (`</b>`, `</>`) or a self-closing one
# (`<Timer />`, `<X a={1} />`). TypeScript's own `<` (generics, assertions) never closes
# either way, and every JSX element ends in one of them. No part can be retried from
# another place: each repetition is possessive and stops at the next `<`.
_JSX = re.compile(
    r"</\s*+(?:[A-Za-z_$][\w$.:-]*+\s*+)?>"
    r"|<(?:[A-Za-z_]|\$[$.:-]*+\w)(?:[^<;/]|/(?!>))*+/>"
)


def is_source(path: str) -> bool:
    """Whether Bun loads `path` as a module (by its extension, in any letter case)."""
    return path.lower().endswith(SOURCE_SUFFIXES)


def blank(text: str) -> str:
    """`text` (its first `SCAN_CHARS`) with each comment spaces and each string literal's
    contents underscores, its quotes kept: every offset still points where it did."""
    text = text[:SCAN_CHARS]
    kept: list[str] = []
    done = 0
    # Where each quote's last unclosed literal ended: its quotes before that were inside
    # it, escaped, so each would read to the same place and end unclosed too. Not reading
    # them again is what keeps `"\\"\\"\\"…` linear.
    open_until = dict.fromkeys(_BODY, 0)
    found = _OPENER.search(text)
    while found is not None:
        start, opener = found.start(), found.group()
        if opener == "//":
            line_end = _LINE_END.search(text, start)
            end = len(text) if line_end is None else line_end.start()
        elif opener == "/*":
            end = _end_of(text, "*/", start + 2, 2)
        else:
            body = open_until[opener]
            if start >= body:
                body = _body_end(text, start)
            if body == len(text) or text[body] != opener:
                # Left open: its quote is code, and what follows it is read again as code.
                open_until[opener] = body
                found = _OPENER.search(text, start + 1)
                continue
            end = body + 1
        kept += (text[done:start], _blanked(text[start:end], comment=opener[0] == "/"))
        done = end
        found = _OPENER.search(text, end)
    kept.append(text[done:])
    return "".join(kept)


def _body_end(text: str, start: int) -> int:
    """Where the literal whose quote is at `start` stops: at its closing quote, else at its
    line's end, the text's, or a last backslash."""
    body = _BODY[text[start]].match(text, start + 1)
    assert body is not None  # a starred pattern matches at any offset
    return body.end()


def _end_of(text: str, closer: str, start: int, width: int) -> int:
    """Where a comment ends: after `closer` (`width` of it kept), else at the text's end."""
    at = text.find(closer, start)
    return len(text) if at < 0 else at + width


def _blanked(token: str, *, comment: bool) -> str:
    if comment:
        return re.sub(r"[^\n]", " ", token)
    return token[0] + re.sub(r"[^\n]", "_", token[1:-1]) + token[-1]


def has_jsx(text: str) -> bool:
    """Whether `text` holds JSX-looking markup outside its strings and comments."""
    return _JSX.search(blank(text)) is not None
