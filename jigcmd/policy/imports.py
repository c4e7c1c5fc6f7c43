"""What candidate files import: each other by relative specifiers, packages by name. Pure.

Hints for people, never rules. When a directory holds too many files, the fix names what
the command's tests (or entry point) reach through `import … from "./…"`, `export … from`,
`import("./…")` and `require("./…")`, and through a bare specifier a tsconfig.json maps to
a candidate file (`tsconfigpaths.py`), so that `--exclude` can keep exactly those. When a
package.json declares packages (never installed for a command), `init` names those some
file imports by name (`package_imports`), so that it warns about what will fail and not
about a linter nothing loads. Anything computed at run time is not followed, but the files
that compute a specifier are named, since what they load is unknown; so are the specifiers
jigcmd cannot follow (`unfollowed`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field

from jigcmd.policy.bunbuiltins import is_builtin
from jigcmd.policy.sourcetext import SCAN_CHARS, blank, has_jsx, is_source
from jigcmd.policy.tsconfigpaths import Aliases, Unknown

__all__ = [
    "PackageImports",
    "Unfollowed",
    "imported_closure",
    "importers",
    "left_out_imports",
    "package_imports",
    "reached_marks",
    "unfollowed",
]

# Every repetition is possessive and its alternatives never overlap, so no part is tried
# twice from one start: a scan is linear in the text whatever a file holds.
_SPECIFIER = re.compile(
    r"""(?:\bfrom\s*+|\bimport\s*+(?:\(\s*+)?|\brequire\s*+\(\s*+)["']([^"'\n]++)["']"""
)
_RELATIVE = ("./", "../")
_SUFFIXES = ("", ".ts", ".tsx", ".js", ".jsx", ".mts", ".mjs", ".cts", ".cjs", ".json")
_INDEX = ("/index.ts", "/index.tsx", "/index.js", "/index.jsx")


def _resolve(importer: str, specifier: str, files: Mapping[str, str]) -> str | None:
    """The file of `files` a relative `specifier` in `importer` names."""
    base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), specifier))
    if base.startswith("../") or base == "..":
        return None
    return _file_at(base, files)


def _file_at(base: str, files: Mapping[str, str]) -> str | None:
    """The file of `files` Bun loads for `base`, a path as a specifier names it."""
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
    return set(importers(files, roots))


def importers(files: Mapping[str, str], roots: Iterable[str]) -> dict[str, str]:
    """`imported_closure` with who imports each file: reached path → one file importing it
    ("" for a root). A file given as "" (one too large or not text to read) is reached, and
    its own imports are not known."""
    follow = _Follow(files)
    seen = {root: "" for root in roots if root in files}
    pending = list(seen)
    while pending:
        importer = pending.pop()
        for target in follow.imports(importer):
            if target not in seen:
                seen[target] = importer
                pending.append(target)
    return seen


def left_out_imports(files: Mapping[str, str], left_out: Set[str]) -> dict[str, tuple[str, str]]:
    """For each of `left_out` (a file, or a directory as `dir/`) that a file of `files`
    imports by a relative specifier: (the first file importing it, the path it imports)."""
    found: dict[str, tuple[str, str]] = {}
    if not left_out:
        return found
    directories = _tree(entry for entry in left_out if entry.endswith("/"))
    for importer in sorted(path for path in files if is_source(path)):
        for specifier in _SPECIFIER.findall(files[importer]):
            if not specifier.startswith(_RELATIVE):
                continue
            base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), specifier))
            entry = _left_out_entry(base, left_out, directories)
            # Resolved only then: a file the candidate holds is what Bun imports first.
            if entry is None or entry in found or _resolve(importer, specifier, files):
                continue
            found[entry] = (importer, base)
    return found


# A directory's path parts, each a key of its parent's node; `_END` marks an entry's last.
# A part is never "", so `_END` is never a directory's name.
_Tree = dict[str, "_Tree"]
_END = ""


def _tree(directories: Iterable[str]) -> _Tree:
    """The directories (each `dir/`) as a tree of their path parts."""
    root: _Tree = {}
    for directory in directories:
        node = root
        for part in directory[:-1].split("/"):
            node = node.setdefault(part, {})
        node[_END] = {}
    return root


def _left_out_entry(base: str, entries: Set[str], directories: _Tree) -> str | None:
    """The one of `entries` that holds what `base` (a specifier made a path) names: the file
    itself, else the shortest of `directories` (`_tree` of the directory entries) above it.

    The directories are found in one walk down `base`'s parts, where looking each of its
    prefixes up would build and hash a string per part: quadratic in a long specifier."""
    for suffix in (*_SUFFIXES, *_INDEX):
        if base + suffix in entries:
            return base + suffix
    parts = base.split("/")
    node = directories
    for depth, part in enumerate(parts, start=1):
        if part not in node:
            return None
        node = node[part]
        if _END in node:
            return "/".join(parts[:depth]) + "/"
    return None


class _Follow:
    """Where candidate files' specifiers lead: relative ones, and bare ones a config maps."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = files
        self.aliases = Aliases(files)

    def imports(self, importer: str) -> list[str]:
        """The files of `files` that `importer` imports by a specifier jigcmd follows."""
        targets = (self.target(importer, spec) for spec in _SPECIFIER.findall(self.files[importer]))
        return [target for target in targets if target is not None]

    def target(self, importer: str, specifier: str) -> str | None:
        """The file `specifier` in `importer` names; None for none (a package, say)."""
        if specifier.startswith(_RELATIVE):
            return _resolve(importer, specifier, self.files)
        if package_name(specifier) is None:
            return None  # absolute, a `#` import or a scheme
        bases = self.aliases.targets(importer, specifier)
        if isinstance(bases, Unknown):
            return None
        found = (_file_at(base, self.files) for base in bases)
        return next((path for path in found if path is not None), None)


@dataclass(frozen=True)
class Unfollowed:
    """A specifier whose file jigcmd cannot tell, where it is, and why, in words."""

    importer: str
    specifier: str
    why: str


def unfollowed(files: Mapping[str, str], paths: Iterable[str]) -> list[Unfollowed]:
    """The specifiers in `paths` (files of `files`) that may name a candidate file jigcmd
    cannot tell: a `#` import (package.json `imports`), and a bare one under a config
    `tsconfigpaths` cannot read (a Node built-in aside)."""
    follow = _Follow(files)
    found: list[Unfollowed] = []
    for importer in sorted(path for path in paths if path in files and is_source(path)):
        for specifier in dict.fromkeys(_SPECIFIER.findall(files[importer])):
            if specifier.startswith("#"):
                why = 'a package.json "imports" specifier'
                found.append(Unfollowed(importer, specifier, why))
                continue
            name = package_name(specifier)
            if name is None or is_builtin(name) or specifier.startswith(_RELATIVE):
                continue
            bases = follow.aliases.targets(importer, specifier)
            if isinstance(bases, Unknown):
                found.append(Unfollowed(importer, specifier, bases.why))
    return found


def reached_marks(
    files: Mapping[str, str], roots: Iterable[str], marks: Mapping[str, int]
) -> dict[str, int]:
    """For each of `roots` and every file they import, transitively: the union (bitwise or)
    of the `marks` of the files it reaches, itself included.

    One walk for all the roots (Tarjan's strongly connected components, without recursion:
    files that import each other reach the same files), so each file is read and each of its
    specifiers resolved once, where a closure per root would be quadratic in a barrel layout.
    """
    follow = _Follow(files)
    order: dict[str, int] = {}  # file -> when the walk came to it
    low: dict[str, int] = {}  # the earliest file on `stack` it is known to reach
    partial: dict[str, int] = {}  # marks gathered so far, for a file whose component is open
    reach: dict[str, int] = {}  # the answer, for a file whose component is closed
    stack: list[str] = []

    def enter(path: str) -> tuple[str, Iterator[str]]:
        order[path] = low[path] = len(order)
        partial[path] = marks.get(path, 0)
        stack.append(path)
        return path, iter(follow.imports(path))

    for root in roots:
        if root not in files or root in order:
            continue
        walk = [enter(root)]
        while walk:
            path, targets = walk[-1]
            for target in targets:
                if target not in order:
                    walk.append(enter(target))
                    break
                if target in reach:
                    partial[path] |= reach[target]
                else:  # still on the stack: the same component as `path`
                    low[path] = min(low[path], order[target])
            else:
                walk.pop()
                if low[path] == order[path]:
                    _close(path, stack, partial, reach)
                if walk:
                    above = walk[-1][0]
                    low[above] = min(low[above], low[path])
                    partial[above] |= reach.get(path, 0)
    return reach


def _close(head: str, stack: list[str], partial: dict[str, int], reach: dict[str, int]) -> None:
    """Pop the component `head` begins off `stack`: each member reaches what all of them do."""
    members: list[str] = []
    union = 0
    while not members or members[-1] != head:
        members.append(stack.pop())
        union |= partial.pop(members[-1])
    for member in members:
        reach[member] = union


# `import … from "x"`, `export … from "x"` and `import "x"`, the clause never crossing a
# string, a `;` or another statement; `import type`/`export type` are erased before Bun runs.
_STATEMENT = re.compile(
    r"""\b(?:import|export)\s++(?P<type>type\s++)?"""
    r"""(?:(?:(?!\b(?:import|export)\b)[^;"'`]){0,2000}?\bfrom\s*+)?["'](?P<spec>[^"'\n]++)["']"""
)
_CALL = re.compile(r"""\b(?:import|require)\s*+\(\s*+["'](?P<spec>[^"'\n]++)["']""")
# `import(name)`, `` require(`./${x}`) ``: what it loads is decided when it runs.
_COMPUTED = re.compile(r"""\b(?:import|require)\s*+\(\s*+(?!["')])""")
# Where Bun's automatic JSX runtime comes from: a file's pragma, else tsconfig.json's option.
_PRAGMA = re.compile(r"@jsxImportSource\s+([^\s*]+)")
_TSCONFIG_SOURCE = re.compile(r'"jsxImportSource"\s*:\s*"([^"]+)"')


@dataclass(frozen=True)
class PackageImports:
    """Who imports which package by name, and which files compute what they import."""

    importers: Mapping[str, tuple[str, ...]]  # package -> the files importing it, sorted
    computed: tuple[str, ...] = ()
    # Each specifier of those packages (`pg`, `pg/lib/client`) -> the files importing it by
    # that very text, sorted: what `bun test` maps or a mock replaces is one specifier.
    specifiers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, specifiers: Mapping[str, Iterable[str]], computed: Iterable[str] = ()
    ) -> PackageImports:
        """Built from each bare specifier's importing files: its package's importers too."""
        importers: dict[str, set[str]] = {}
        for specifier, paths in specifiers.items():
            name = package_name(specifier)
            if name is not None:
                importers.setdefault(name, set()).update(paths)
        return cls(_sorted(importers), tuple(computed), _sorted(specifiers))

    def within(self, paths: Set[str]) -> PackageImports:
        """The same, for the files among `paths` only (what some commands run or import)."""
        return PackageImports.of(
            {
                spec: [path for path in files if path in paths]
                for spec, files in self.specifiers.items()
            },
            (path for path in self.computed if path in paths),
        )


def _sorted(found: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """`found` (a name -> files) in order, each name's files sorted, and none left none."""
    return {name: kept for name, files in sorted(found.items()) if (kept := tuple(sorted(files)))}


def package_name(specifier: str) -> str | None:
    """The package a bare specifier names (`pkg/sub` → `pkg`, `@s/pkg/sub` → `@s/pkg`);
    None for a relative or absolute path, a `#` import or a scheme (`bun:`, `node:`)."""
    if specifier[:1] in (".", "/", "#") or ":" in specifier:
        return None
    parts = specifier.split("/")
    name = "/".join(parts[:2]) if specifier.startswith("@") else parts[0]
    return name if name and not name.endswith("/") and name != "@" else None


def package_imports(files: Mapping[str, str]) -> PackageImports:
    """Every package a source file in `files` imports by name (the JSX runtime included),
    but Bun's built-in modules (`bunbuiltins.py`), which no install provides, and a
    specifier the importing file's nearest tsconfig.json (with what it `extends`) maps to a
    candidate file: Bun loads that file, never node_modules/ (`_Follow`, as the import walk)."""
    tsconfig = _TSCONFIG_SOURCE.search(files.get("tsconfig.json", ""))
    jsx_source = tsconfig.group(1) if tsconfig is not None else "react"
    follow = _Follow(files)
    by_specifier: dict[str, set[str]] = {}
    computed: list[str] = []
    for path, text in sorted(files.items()):
        if not is_source(path):
            continue
        # Matched where strings are blanked (an import inside a string is none), the
        # specifier then read from the text at the same offsets.
        code, original = blank(text), text[:SCAN_CHARS]
        matches = [m for m in _STATEMENT.finditer(code) if m["type"] is None]
        matches += _CALL.finditer(code)
        specifiers = [original[m.start("spec") : m.end("spec")] for m in matches]
        if has_jsx(text):  # Bun imports `<source>/jsx-dev-runtime` for the markup
            pragma = _PRAGMA.search(text)
            source = pragma.group(1) if pragma is not None else jsx_source
            specifiers.append(f"{source}/jsx-dev-runtime")
        for specifier in specifiers:
            name = package_name(specifier)
            # Bun's own `events` is what loads, whatever package.json declares.
            if name is None or is_builtin(specifier) or follow.target(path, specifier):
                continue
            by_specifier.setdefault(specifier, set()).add(path)
        if _COMPUTED.search(code):
            computed.append(path)
    return PackageImports.of(by_specifier, computed)
