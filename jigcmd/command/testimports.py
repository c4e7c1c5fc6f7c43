"""What `bun test` gives the files it loads by a package name that nothing installs.

Bun's test runner maps `vitest` and `@jest/globals` to `bun:test` in every file it loads (a
test file, or a helper a test imports), never a subpath of them (`vitest/config`), and
`mock.module("pg", …)` (`vi.mock`, `jest.mock` alike) replaces that one specifier for
whatever imports it after the call (`import "pg/lib/client"` still needs `pg`, as a mock of
`pg/lib/client` leaves `import "pg"` needing it). Neither needs
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
    # A package a test mocks a specifier of that files import -> the files that mock one.
    mockers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Each of those packages -> the specifiers of it mocked (`pg`, `pg/lib/client`), sorted.
    replaced: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
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
    mocks = {path: specs for path, specs in mocks.items() if specs}
    if not mocks and not any(name in found.specifiers for name in ALIASES):
        return TestServed(found)  # the usual case, with no walk of the imports
    testing = imported_closure(files, tests)
    only = testing - imported_closure(files, [path for path in commands if path not in tests])
    # The alias itself is mapped, never a subpath of it (`vitest/config` needs the package).
    aliased = {
        name: {path for path in found.specifiers.get(name, ()) if path in only} for name in ALIASES
    }
    served = PackageImports.of(
        {
            spec: [path for path in paths if path not in aliased.get(spec, ())]
            for spec, paths in found.specifiers.items()
        },
        found.computed,
    )
    mockers, replaced = _mocks(mocks, testing, served)
    hit = {spec for specs in replaced.values() for spec in specs}
    unmocked = {package_name(spec) for spec in served.specifiers if spec not in hit}
    return TestServed(
        served,
        mockers,
        replaced,
        frozenset(
            name
            for name in mockers
            if name not in unmocked and all(path in only for path in served.importers[name])
        ),
        frozenset(only),
        frozenset(set().union(*aliased.values())),
    )


def _mocks(
    mocks: Mapping[str, Mapping[str, str]], testing: set[str], served: PackageImports
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """Of what each file mocks (`_mocked`), the specifiers files import that a file `testing`
    (a test, or what it imports) mocks: (package -> the files mocking one, package -> those
    specifiers). A mock replaces the one specifier it names, as Bun 1.4.2 does: a mock of
    `pg/lib/client` leaves `import "pg"` failing, and one of `pg` leaves `pg/lib/client`."""
    mockers: dict[str, list[str]] = {}
    replaced: dict[str, set[str]] = {}
    for path, mocked in mocks.items():
        hits = mocked.keys() & served.specifiers.keys() if path in testing else set()
        for spec in hits:
            replaced.setdefault(mocked[spec], set()).add(spec)
        for name in sorted({mocked[spec] for spec in hits}):
            mockers.setdefault(name, []).append(path)
    return (
        {name: tuple(paths) for name, paths in mockers.items()},
        {name: tuple(sorted(specs)) for name, specs in replaced.items()},
    )


def _mocked(text: str) -> dict[str, str]:
    """The bare specifiers `text` mocks, each with its package (`pg/pool` → `pg`)."""
    code, original = blank(text), text
    specifiers = (original[m.start("spec") : m.end("spec")] for m in _MOCK.finditer(code))
    return {spec: name for spec in specifiers if (name := package_name(spec)) is not None}
