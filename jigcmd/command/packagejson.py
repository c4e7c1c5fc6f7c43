"""A project's package.json, read as Bun reads it: JSON that may hold comments and trailing commas.

Bun's own reader takes `//` and `/* */` comments, a comma after a value before `}` or `]`,
JavaScript's white space and line terminators between tokens, and a repeated key (the first
one counts; it warns); so a package.json with them runs under bare Bun, and jigcmd reads the
same file the same way (`relaxedjson.py`) rather than take it for `{}` or read another entry
point. A file that is still not JSON is said, never taken silently for `{}`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from jigcmd.errors import bounded
from jigcmd.jsonio import strict
from jigcmd.policy.pointers import kind
from jigcmd.policy.relaxedjson import load_relaxed

__all__ = ["MANIFEST", "manifest_problem", "read_manifest"]

MANIFEST = "package.json"


def read_manifest(text: str | None) -> dict[str, object]:
    """A package.json's object; empty when absent, unreadable or not an object (each of
    which `manifest_problem` says)."""
    if text is None:
        return {}
    try:
        value = load_relaxed(text)
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
        value = load_relaxed(text)
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
