"""What `bun test` gives the files it loads by a package name that nothing installs.

Bun's test runner maps `vitest` and `@jest/globals` to `bun:test` in every file it loads (a
test file, or a helper a test imports), and `mock.module("pg", …)` (`vi.mock`, `jest.mock`
alike) replaces a package by name for whatever imports it after the call. Neither needs
node_modules/, so the dependency note (`bunposture.py`) must not say such imports fail. Nor
does either survive a bundle: `bun build` resolves `vitest` to the real package (or fails
without it) and the runner does not map a bundle's imports again, and a bundle holds the
real package a mock was to replace. So the note's bundling example skips files that reach
them. Checked with Bun 1.4.2; only files no entry point loads count, since `bun FILE` maps
and mocks nothing. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jigcmd.policy.binding import bun_runs_as_test
from jigcmd.policy.imports import PackageImports, imported_closure, package_name
from jigcmd.policy.sourcetext import blank, is_source

__all__ = ["ALIASES", "TestServed", "served_by_tests"]

# What `bun test` maps to `bun:test` in the files it loads.
ALIASES = ("@jest/globals", "vitest")
# `mock.module("pg", …)`, `vi.mock("pg", …)`, `jest.mock("pg", …)`: its specifier a literal.
_MOCK = re.compile(
    r"""\b(?:mock\s*+\.\s*+module|vi\s*+\.\s*+mock|jest\s*+\.\s*+mock)\s*+\(\s*+"""
    r"""["'](?P<spec>[^"'\n]++)["']"""
)


@dataclass(frozen=True)
class TestServed:
    """A candidate's package imports with what `bun test` serves told apart."""

    # The imports left once the test runner's aliases in files only tests load are dropped.
    found: PackageImports
    # A package a test mocks by name -> the files that mock it.
    mockers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Those of them only tests import: whether their imports load depends on when they run.
    mocked: frozenset[str] = frozenset()
    # The files only tests load (no entry point does), and those of them importing an alias.
    only: frozenset[str] = frozenset()
    aliasing: frozenset[str] = frozenset()


def served_by_tests(
    files: Mapping[str, str],
    found: PackageImports,
    commands: Sequence[str],
    tests: Sequence[str],
) -> TestServed:
    """Tell apart in `found` (`package_imports(files)`) what `bun test` serves: `commands`
    are every file the commands name, `tests` those of them `bun test` runs; with no
    commands, the files bare `bun test` would run are the tests."""
    if not commands:
        tests = [path for path in files if bun_runs_as_test(path)]
    # Read only where the word is: blanking every file again would double the note's cost.
    sources = (path for path in sorted(files) if is_source(path) and "mock" in files[path])
    mocks = {path: _mocked(files[path]) for path in sources}
    mocks = {path: names for path, names in mocks.items() if names}
    if not mocks and not any(name in found.importers for name in ALIASES):
        return TestServed(found)  # the usual case, with no walk of the imports
    testing = imported_closure(files, tests)
    only = testing - imported_closure(files, [path for path in commands if path not in tests])
    aliasing = {path for name in ALIASES for path in found.importers.get(name, ()) if path in only}
    importers = {
        name: kept
        for name, paths in found.importers.items()
        if (kept := tuple(path for path in paths if name not in ALIASES or path not in only))
    }
    mockers: dict[str, list[str]] = {}
    for path, names in mocks.items():
        for name in names if path in testing else ():
            mockers.setdefault(name, []).append(path)
    return TestServed(
        PackageImports(importers, found.computed),
        {name: tuple(paths) for name, paths in mockers.items()},
        frozenset(
            name
            for name in mockers
            if importers.get(name) and all(path in only for path in importers[name])
        ),
        frozenset(only),
        frozenset(aliasing),
    )


def _mocked(text: str) -> set[str]:
    """The packages `text` replaces by name (`mock.module("pg/pool", …)` → `pg`)."""
    code, original = blank(text), text
    specifiers = (original[m.start("spec") : m.end("spec")] for m in _MOCK.finditer(code))
    return {name for spec in specifiers if (name := package_name(spec)) is not None}
