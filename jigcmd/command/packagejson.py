"""A project's package.json, read as Bun reads it: JSON that may hold comments and trailing commas.

Bun's own reader takes `//` and `/* */` comments and a comma before `}` or `]`, so a
package.json with them runs under bare Bun; jigcmd reads the same file the same way rather
than take it for `{}`. The comments and strings are found by `sourcetext.blank` (the scan
that reads a project's sources), so there is one scanner of JavaScript-like text, not a
second one here. A file that is still not JSON is said, never taken silently for `{}`. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jigcmd.jsonio import strict
from jigcmd.policy.pointers import kind
from jigcmd.policy.sourcetext import blank

__all__ = ["MANIFEST", "manifest_problem", "read_manifest", "relaxed_json"]

MANIFEST = "package.json"
# A comma whose next code is a closing bracket, in text whose comments are blanked.
_TRAILING_COMMA = re.compile(r",(?=\s*+[}\]])")


def relaxed_json(text: str) -> str:
    """`text` with its comments blanked and each trailing comma a space: what JSON reads.
    A leading byte order mark is dropped, as Bun drops it."""
    text = text.removeprefix("\ufeff")
    blanked = blank(text)
    if len(blanked) != len(text):
        return text  # beyond what a candidate holds: left for JSON to refuse
    # A comment's characters are spaces in `blanked`, and not in `text`; a string's contents
    # are underscores there, so no comma inside one is taken for a trailing one.
    kept = [" " if b == " " and not t.isspace() else t for b, t in zip(blanked, text, strict=True)]
    for comma in _TRAILING_COMMA.finditer(blanked):
        kept[comma.start()] = " "
    return "".join(kept)


def _load(text: str) -> object:
    """The value `text` holds, read as Bun reads a package.json; `StrictJSONError` if none."""
    return strict.loads(relaxed_json(text).encode("utf-8"))


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
        why = f"not JSON, even allowing the comments and trailing commas Bun allows ({exc})"
    else:
        if isinstance(value, dict):
            return None
        why = f"it holds {kind(value)}, not an object"
    return f"{path} is not read: {why}; no entry point, workspace or dependency is taken from it"
