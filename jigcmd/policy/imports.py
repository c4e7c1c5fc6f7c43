"""Which candidate files a command's own files import, by their relative specifiers. Pure.

A hint for people, never a rule: when a directory holds too many files, the fix names what
the command's tests (or entry point) reach through `import … from "./…"`, `export … from`,
`import("./…")` and `require("./…")`, so that `--exclude` can keep exactly those. Bare
specifiers (packages) and anything computed at run time are not followed.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping

__all__ = ["imported_closure"]

_SPECIFIER = re.compile(
    r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["'](\.{1,2}/[^"'\n]+)["']"""
)
_SUFFIXES = ("", ".ts", ".tsx", ".js", ".jsx", ".mts", ".mjs", ".cts", ".cjs", ".json")
_INDEX = ("/index.ts", "/index.tsx", "/index.js", "/index.jsx")


def _resolve(importer: str, specifier: str, files: Mapping[str, str]) -> str | None:
    base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), specifier))
    if base.startswith("../") or base == "..":
        return None
    for suffix in (*_SUFFIXES, *_INDEX):
        if base + suffix in files:
            return base + suffix
    # `./x.js` written for a `./x.ts` source, as TypeScript lets one write it.
    stem, dot, extension = base.rpartition(".")
    if dot and extension in ("js", "jsx", "mjs", "cjs"):
        for suffix in (".ts", ".tsx", ".mts", ".cts"):
            if stem + suffix in files:
                return stem + suffix
    return None


def imported_closure(files: Mapping[str, str], roots: Iterable[str]) -> set[str]:
    """`roots` and every file of `files` (path → text) they import, transitively."""
    seen = {root for root in roots if root in files}
    pending = list(seen)
    while pending:
        importer = pending.pop()
        for specifier in _SPECIFIER.findall(files[importer]):
            target = _resolve(importer, specifier, files)
            if target is not None and target not in seen:
                seen.add(target)
                pending.append(target)
    return seen
