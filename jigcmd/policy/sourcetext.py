"""What a JavaScript or TypeScript file's text shows without parsing it. Pure.

Hints for people, never rules: `init` reads a project's sources to say which of them hold
JSX and which packages they import. A real parser is not worth its weight here, so one
regular expression tells comments and string literals apart from code (a regular
expression literal holding a quote can fool it, on that line only). Each scan reads at
most `SCAN_CHARS` of a file: the candidate itself is never larger.
"""

from __future__ import annotations

import re

from jigcmd.contract import MAX_CANDIDATE_BYTES

__all__ = ["SCAN_CHARS", "SOURCE_SUFFIXES", "blank", "has_jsx", "is_source"]

SCAN_CHARS = MAX_CANDIDATE_BYTES
# The extensions Bun loads as JavaScript or TypeScript modules.
SOURCE_SUFFIXES = (".ts", ".tsx", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs")

# One token at a time, leftmost first, so a `//` inside a string is no comment and a quote
# inside a comment opens no string. Strings end on their line; template literals may not.
_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"""
    r"""|(?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)""",
    re.S,
)
# Markup outside strings and comments: a closing tag (`</b>`, `</>`) or a self-closing one
# (`<Timer />`, `<X a={1} />`). TypeScript's own `<` (generics, assertions) never closes
# either way, and every JSX element ends in one of them.
_JSX = re.compile(r"</\s*(?:[A-Za-z_$][\w$.:-]*\s*)?>|<[A-Za-z_$][\w$.:-]*\b[^<;]*?/>")


def is_source(path: str) -> bool:
    """Whether Bun loads `path` as a module (by its extension, in any letter case)."""
    return path.lower().endswith(SOURCE_SUFFIXES)


def blank(text: str) -> str:
    """`text` (its first `SCAN_CHARS`) with each comment spaces and each string literal's
    contents underscores, its quotes kept: every offset still points where it did."""
    return _TOKEN.sub(_blanked, text[:SCAN_CHARS])


def _blanked(match: re.Match[str]) -> str:
    token = match.group(0)
    if match.group("comment") is not None:
        return re.sub(r"[^\n]", " ", token)
    return token[0] + re.sub(r"[^\n]", "_", token[1:-1]) + token[-1]


def has_jsx(text: str) -> bool:
    """Whether `text` holds JSX-looking markup outside its strings and comments."""
    return _JSX.search(blank(text)) is not None
