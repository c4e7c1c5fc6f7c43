"""The `bun build` the dependency note offers: every file of the commands to bundle, and how.

A bundle inlines what a file imports, so a command that names it needs no node_modules/.
The note gives one `bun build` for each of the commands' files that reaches a package,
joined with `&&`, so that one paste makes every bundle the run needs: one build of several
entry points would keep their directories under `bundled/` (Bun 1.4.2 writes
`bundled/a/test/x.test.js`), and a test and an entry point take different flags. A test's
build keeps `bun:test` external, an entry point's does not (docs/binding.md#bundling).
`bundle_paths` is where each build writes its bundle, so `run` can tell a test file sent
beside the bundle a command runs of it: `bundled/<its name>.js`, or, where two of the files
share a name (test/a/x.test.ts, test/b/x.test.ts), a name of the whole path
(`bundled/test-a-x.test.js`, written with `--outfile`), so that no build overwrites
another's bundle. Pure.
"""

from __future__ import annotations

import posixpath
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jigcmd.command.listing import some
from jigcmd.command.testimports import ALIASES, TestServed
from jigcmd.policy.imports import PackageImports

__all__ = [
    "BUNDLES",
    "Bundle",
    "bundle_command",
    "bundle_path",
    "bundle_paths",
    "bundling",
    "whole_bundle_path",
]

# Where `bundle_command` writes its bundles.
BUNDLES = "bundled/"


def bundle_path(path: str) -> str:
    """`bundled/<its name>.js`: the bundle `bun build path --outdir bundled` writes."""
    return f"{BUNDLES}{_stem(posixpath.basename(path))}.js"


def whole_bundle_path(path: str) -> str:
    """`bundled/test-a-x.test.js` for test/a/x.test.ts: a bundle named by the whole path,
    for a file whose name another file of the same builds shares."""
    return f"{BUNDLES}{_stem(path).replace('/', '-')}.js"


def bundle_paths(paths: Iterable[str]) -> dict[str, str]:
    """The bundle each of `paths` is built to: `bundle_path`'s, but `whole_bundle_path`'s
    for every path whose `bundle_path` another of `paths` shares, which one `--outdir`
    build would overwrite."""
    unique = list(dict.fromkeys(paths))
    shared = Counter(map(bundle_path, unique))
    return {
        path: whole_bundle_path(path) if shared[bundle_path(path)] > 1 else bundle_path(path)
        for path in unique
    }


def _stem(path: str) -> str:
    return posixpath.splitext(path)[0]


def bundle_command(path: str, *, test: bool, bundle: str | None = None) -> str:
    """The `bun build` that inlines what `path` imports into `bundle` (by default
    `bundle_path(path)`, which `--outdir` writes; any other with `--outfile`); a test's
    keeps the test runner's `bun:test` an import."""
    external = " --external bun:test" if test else ""
    out = (
        f"--outdir {BUNDLES.rstrip('/')}"
        if bundle is None or bundle == bundle_path(path)
        else f"--outfile {shlex.quote(bundle)}"
    )
    return f"bun build {shlex.quote(path)} {out} --target bun{external} --minify"


@dataclass(frozen=True)
class Bundle:
    """What the bundling example is chosen from: what each file reaches (its mark, as
    `bunposture._marks` makes it), the files to bundle in order of preference (the
    commands' own first, `commands`), those `bun test` runs, and what tests do with
    packages (`served`)."""

    reached: Mapping[str, int]
    names: list[str]
    candidates: tuple[str, ...]
    commands: tuple[str, ...]
    tests: frozenset[str]
    served: TestServed

    @property
    def packages(self) -> int:
        return (1 << len(self.names)) - 1

    def lacking(self, mark: int) -> list[str]:
        """The packages of `mark` the host has not where Bun looks from the importer."""
        lacks = mark >> len(self.names) & self.packages
        return [name for bit, name in enumerate(self.names) if lacks & 1 << bit]

    def aliases(self, mark: int) -> bool:
        """Whether `mark`'s file reaches an import only `bun test` maps (`vitest`)."""
        return bool(mark >> (2 * len(self.names)) & 1)


def bundling(bundle: Bundle, found: PackageImports, names: list[str]) -> str:
    """`bundle on the host, `bun build …`, and name the bundle instead`, for the files to
    bundle (`_to_bundle`); said to need `bun install` first where the host lacks a package
    they reach, or to import `bun:test` first. Never the `bun build` of a bundle a command
    already runs (building it the same way again changes nothing): that one is said to be
    built again without `--external`."""
    paths = _to_bundle(bundle)
    again = [path for path in paths if path in bundle.commands and path.startswith(BUNDLES)]
    said = [_again(again, found, names)] if again else []
    fresh = [path for path in paths if path not in again]
    if fresh:
        said.append(_build(bundle, fresh, names))
    return ", and ".join(said)


def _again(paths: list[str], found: PackageImports, names: list[str]) -> str:
    """The bundles the Binding runs that still import a package by name."""
    imported = [name for name in names if set(paths) & set(found.importers.get(name, ()))]
    one = len(paths) == 1
    return (
        f"build {some(paths)}, {'a bundle' if one else 'bundles'} the Binding runs, again "
        f"without `--external` for {some(imported or names)}, which "
        f"{'it still imports' if one else 'they still import'} by name"
    )


def _build(bundle: Bundle, paths: list[str], names: list[str]) -> str:
    """The `bun build` of each of `paths`, with what must come first."""
    bundles = bundle_paths(paths)
    build = " && ".join(
        bundle_command(path, test=path in bundle.tests, bundle=bundles[path]) for path in paths
    )
    build = f"`{build}`"
    aliasing = [path for path in paths if bundle.aliases(bundle.reached[path])]
    first = (
        f"import bun:test in place of {' and '.join(ALIASES)} in what {some(aliasing)} "
        f"load{'s' if len(aliasing) == 1 else ''} (`bun test` maps them in the files it "
        "runs, never in a bundle), then "
        if aliasing
        else ""
    )
    instead = (
        "and name the bundle instead"
        if len(paths) == 1
        else f"and name each bundle ({', '.join(bundles.values())}) instead of its file"
    )
    chosen = 0
    for path in paths:
        chosen |= bundle.reached[path]
    lacking = bundle.lacking(chosen)
    if lacking:
        return (
            f"{first}bundle on the host once `bun install` has put {some(lacking)} in its "
            f"node_modules/ (not there now, so {build} cannot resolve "
            f"{'it' if len(lacking) == 1 else 'them'}), {instead}"
        )
    missing = 0
    for value in bundle.reached.values():
        missing |= value
    absent = [name for name in bundle.lacking(missing) if name in names]
    unbundled = (
        f"; {some(absent)} {'is' if len(absent) == 1 else 'are'} not in the host's "
        "node_modules/ either: `bun install` first to bundle a file importing "
        f"{'it' if len(absent) == 1 else 'them'}"
        if absent
        else ""
    )
    return f"{first}bundle on the host, {build}, {instead}{unbundled}"


def _to_bundle(bundle: Bundle) -> list[str]:
    """Every one of the commands' files reaching a package, so that one pass makes all
    the bundles the commands need; with none (no commands given), the first candidate
    reaching one, with every package it reaches installed and no import only `bun test`
    maps, else the first reaching any. Never a file only tests load that reaches a package
    a test mocks: its bundle would hold the real package, which the mock no longer replaces.
    """
    names, served = bundle.names, bundle.served
    mocked = sum(1 << bit for bit, name in enumerate(names) if name in served.mockers)

    def fits(path: str) -> bool:
        mark = bundle.reached.get(path, 0)
        return bool(mark & bundle.packages) and not (path in served.only and mark & mocked)

    chosen = [path for path in dict.fromkeys(bundle.commands) if fits(path)]
    if chosen:
        return chosen
    first = None
    for path in filter(fits, bundle.candidates):
        mark = bundle.reached[path]
        if not bundle.lacking(mark) and not bundle.aliases(mark):
            return [path]
        first = first or path
    return [first] if first is not None else []
