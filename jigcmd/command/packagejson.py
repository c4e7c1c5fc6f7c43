"""A project's package.json, read as Bun reads it: JSON that may hold comments and trailing commas.

Bun's own reader takes `//` and `/* */` comments, a comma after a value before `}` or `]`,
JavaScript's white space and line terminators between tokens, and a repeated key (the first
one counts; it warns); so a package.json with them runs under bare Bun, and jigcmd reads the
same file the same way rather than take it for `{}` or read another entry point. The comments
and strings are found by `sourcetext.blank` (the scan that reads a project's sources), so
there is one scanner of JavaScript-like text, not a second one here. A file that is still
not JSON is said, never taken silently for `{}`. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jigcmd.errors import bounded
from jigcmd.jsonio import strict
from jigcmd.policy.pointers import kind
from jigcmd.policy.sourcetext import blank

__all__ = ["MANIFEST", "manifest_problem", "read_manifest", "relaxed_json"]

MANIFEST = "package.json"
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


def _load(text: str) -> object:
    """The value `text` holds, read as Bun reads a package.json; `StrictJSONError` if none."""
    return strict.loads_keeping_first(relaxed_json(text).encode("utf-8"))


def read_manifest(text: str | None) -> dict[str, object]:
    """A package.json's object; empty when absent, unreadable or not an object (each of
    which `manifest_problem` says)."""
    if text is None:
        return {}
    try:
        value = _load(text)
    except strict.StrictJSONError:
        return {}
    return value if isinstance(value, dict) else {}


def manifest_problem(path: str, files: Mapping[str, str]) -> str | None:
    """The sentence for the package.json at `path` that jigcmd cannot read, naming the file
    and why; None when it is absent or read."""
    text = files.get(path)
    if text is None:
        return None
    try:
        value = _load(text)
    except strict.StrictJSONError as exc:
        # Bun's reader takes more than this (single quotes, `0x10`, text after the object):
        # say what jigcmd reads, not that Bun cannot. The reason may quote the file (a key,
        # a number), as long as the file is: the whole clause is cut.
        why = bounded(
            "not the JSON jigcmd reads (JSON with the comments, trailing commas and white space "
            f"Bun allows; Bun may read more): {exc}"
        )
    else:
        if isinstance(value, dict):
            return None
        why = f"it holds {kind(value)}, not an object"
    return f"{path} is not read: {why}; no entry point, workspace or dependency is taken from it"
