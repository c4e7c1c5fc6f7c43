"""JSON as Bun reads a project's package.json and tsconfig.json: comments, trailing commas. Pure.

Bun's own reader takes `//` and `/* */` comments, a comma after a value before `}` or `]`,
JavaScript's white space and line terminators between tokens, and a repeated key (the first
one counts; it warns). The comments and strings are found by `sourcetext.blank` (the scan
that reads a project's sources), so there is one scanner of JavaScript-like text, not a
second one here.
"""

from __future__ import annotations

import re

from jigcmd.jsonio import strict
from jigcmd.policy.sourcetext import blank

__all__ = ["load_relaxed", "relaxed_json"]

# ECMAScript's white space and line terminators that JSON's are not: Bun's reader takes each
# between tokens (a byte order mark anywhere too), so they read as a space.
_JS_SPACE = str.maketrans(
    dict.fromkeys("\v\f\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007", " ")
    | dict.fromkeys("\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff", " ")
)
# A comma after a value (never after `[`, `{` or another comma: Bun refuses `[,]` and
# `{"a": 1,,}`) whose next code is a closing bracket, in text whose comments and strings
# are blanked. Possessive, so no run of spaces is read twice.
_TRAILING_COMMA = re.compile(r"[^ \t\n\r,\[{][ \t\n\r]*+(,)(?=[ \t\n\r]*+[}\]])")


def relaxed_json(text: str) -> str:
    """`text` with its comments, trailing commas and JavaScript-only white space blanked:
    what JSON reads."""
    blanked = blank(text)
    if len(blanked) != len(text):
        return text  # beyond what a candidate holds: left for JSON to refuse
    # A comment's characters are spaces in `blanked`; a string's contents are underscores
    # there, so they are kept from `text`, and no comma inside one is taken for a trailing one.
    code = blanked.translate(_JS_SPACE)
    kept = [t if b == "_" else c for b, c, t in zip(blanked, code, text, strict=True)]
    for comma in _TRAILING_COMMA.finditer(code):
        kept[comma.start(1)] = " "
    return "".join(kept)


def load_relaxed(text: str) -> object:
    """The value `text` holds, read as Bun reads a package.json; `StrictJSONError` if none."""
    return strict.loads_keeping_first(relaxed_json(text).encode("utf-8"))
