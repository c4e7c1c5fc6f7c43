"""What plain Bun would do with a project that Bun under jigcmd does not, said before it matters.

Bun runs with a fixed posture (`planner.BUN_FLAGS`): no `bunfig.toml` (`bunfig.py`), no
`.env`, no install, no network. A project that counts on its `bunfig.toml` (a `[test]
preload`) or on its installed `dependencies` fails differently under jigcmd than under
bare `bun test`, and before these notes nothing said why. Each function takes the
candidate's files (path → text) and returns the sentences `init` and `run` print on stderr;
none is a refusal (the candidate may not need what is missing). Pure.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence

from jigcmd.command.bundling import Bundle, bundling
from jigcmd.command.bunfig import bunfig_note
from jigcmd.command.listing import cut, some
from jigcmd.command.packagejson import read_manifest
from jigcmd.command.testimports import TestServed, served_by_tests
from jigcmd.errors import bounded
from jigcmd.policy.imports import (
    PackageImports,
    Unfollowed,
    package_imports,
    reached_marks,
    unfollowed,
)

__all__ = ["dependencies_note", "posture_notes"]
# The package.json fields whose packages `bun install` would put in node_modules/.
_DEPENDENCY_FIELDS = ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies")


# Whether a package is in the host's node_modules/ where Bun looks for it from the importing
# file (package name, importing file), where `bun build` would find it.
Installed = Callable[[str, str], bool]


def _anywhere(name: str, importer: str) -> bool:
    """Every package counts as installed on the host when the caller cannot tell."""
    return True


def dependencies_note(
    files: Mapping[str, str],
    commands: Sequence[str] = (),
    installed: Installed = _anywhere,
    runner: str | None = None,
    tests: Sequence[str] = (),
) -> str | None:
    """The sentence for the declared packages some candidate file imports by name, which
    will not be there: each comes from node_modules/, never sent, and nothing installs it.

    A package nothing imports (a linter, `typescript`) is not named: no command loads it;
    nor is an import the importing file's nearest tsconfig.json (with what it `extends`)
    maps to a candidate file (`compilerOptions.paths`, `package_imports`), which Bun
    resolves without node_modules/, nor a Node built-in (`events`), nor what `bun test`
    maps in the files only `tests` (of the `commands`) load (`vitest`, `testimports.py`).
    A package such tests mock by every specifier files import it by is named without
    saying its imports fail: that depends on when they run.
    Files that compute what they import are named, since what they load is unknown. Given
    the files the commands name (`commands`; `runner`, the one command's name, when they
    are one command's), the files named are those the commands run or import, and when
    those import none of the packages (a Binding that runs bundles), the note says so
    instead of that the imports fail. The bundling example (`bundling.py`) is a `bun build`
    for each of the `commands`' files that reaches a package (a test's keeping `bun:test`
    external, `tests`), said to need `bun install` first where a package is not
    `installed` on the host as Bun resolves it from the importing file, and never for a
    file that reaches a mocked package.
    """
    external, workspace = _declared(files)
    if not external and not workspace:
        return None
    served = served_by_tests(files, package_imports(files), commands, tests)
    found = served.found
    used = [name for name in external if name in found.importers]
    local = [name for name in workspace if name in found.importers]
    if not used and not local:
        return _computed_note(external + workspace, found)
    names = used + local
    marks = _marks(names, found, served, installed)
    reached = reached_marks(files, tuple(commands) or sorted(marks), marks)
    ran = found.within(reached.keys()) if commands else found
    run = [name for name in names if ran.importers.get(name)]
    if not run and not ran.computed:
        blind = unfollowed(files, reached.keys())
        return _not_run_note(found, _parts(used, local, found), commands, runner, blind)
    if not run:  # only a file computing what it imports is run: what it loads is unknown
        ran, run = found, names
    candidates = (*commands, *sorted(path for path in marks if path in reached))
    bundle = Bundle(reached, names, candidates, tuple(commands), frozenset(tests), served)
    who = "candidate files" if not commands else _loaders(runner)
    mocks = _mocks_clause([name for name in run if name in served.mockers], served)
    asserted = [name for name in run if name not in served.mocked]
    if not asserted:
        shown = _parts([n for n in used if n in run], [n for n in local if n in run], ran)
        return _mocked_note(shown, who=who, mocks=mocks)
    return _missing_note(
        ran,
        [name for name in used if name in asserted],
        [name for name in local if name in asserted],
        who=who,
        bundling=bundling(bundle, ran, asserted),
        rest=_unrun(names, run, found, runner) + (f"; {mocks}" if mocks else ""),
    )


def _marks(
    names: list[str], found: PackageImports, served: TestServed, installed: Installed
) -> dict[str, int]:
    """Each importing file's mark: bit i, it imports `names[i]`; bit n + i (n names), the
    host has no `names[i]` where Bun would look from that file; bit 2n, it imports what
    only `bun test` maps (`vitest`), which a bundle cannot keep."""
    n = len(names)
    marks: dict[str, int] = {}
    # Whether a package is there depends on the importing file's directory: asked once each.
    lookups: dict[tuple[str, str], bool] = {}
    for bit, name in enumerate(names):
        for path in found.importers[name]:
            place = (name, posixpath.dirname(path))
            if place not in lookups:
                lookups[place] = installed(name, path)
            lacks = 0 if lookups[place] else 1 << (n + bit)
            marks[path] = marks.get(path, 0) | 1 << bit | lacks
    for path in served.aliasing:
        marks[path] = marks.get(path, 0) | 1 << (2 * n)
    return marks


def _unrun(names: list[str], run: list[str], found: PackageImports, runner: str | None) -> str:
    """The clause for the packages of `names` only files no command runs import."""
    skipped = [name for name in names if name not in run]
    if not skipped:
        return ""
    runs = "no command runs" if runner is None else f"`{runner}` does not run"
    return (
        f"; {some(skipped)} {'is' if len(skipped) == 1 else 'are'} imported only by files "
        f"{runs} ({_who(skipped, found)})"
    )


def _computed_note(names: list[str], found: PackageImports) -> str | None:
    """The sentence for declared packages no file imports by name, when some file computes
    what it imports."""
    if not found.computed:
        return None
    return (
        f"package.json declares {_count(len(names), 'package', 'packages')} ({some(names)}) "
        f"no file imports by name, but {_computes(found)} (import(…) or require(…) of a "
        "value): a package loaded that way is not installed when a command runs "
        "(docs/binding.md#dependencies-and-workspaces)"
    )


def _computes(found: PackageImports) -> str:
    """`a.ts computes what it imports`, `a.ts, b.ts compute what they import`."""
    verb = "computes what it imports" if len(found.computed) == 1 else "compute what they import"
    return f"{some(list(found.computed))} {verb}"


def _parts(used: list[str], local: list[str], found: PackageImports) -> str:
    """`1 dependency (zod: a.ts) and 1 workspace package (@mono/core: b.ts)`."""
    parts = []
    if used:
        parts.append(f"{_count(len(used), 'dependency', 'dependencies')} ({_who(used, found)})")
    if local:
        parts.append(
            f"{_count(len(local), 'workspace package', 'workspace packages')} "
            f"({_who(local, found)})"
        )
    return " and ".join(parts)


def _missing_note(
    found: PackageImports,
    used: list[str],
    local: list[str],
    *,
    who: str,
    bundling: str,
    rest: str,
) -> str:
    """The sentence for packages that files which run import: those imports fail. The fix
    offers `bundling` ("" for none) last, then says `rest` ("; …" each)."""
    also = f" ({_computes(found)} too)" if found.computed else ""
    paths = 'map a workspace package to its source with tsconfig.json "compilerOptions.paths"'
    ways = f"{paths}, or {bundling}{rest}" if bundling else f"or {paths}{rest}"
    return (
        f"package.json declares {_parts(used, local, found)} that {who} import{also}: none "
        "is installed when a command runs (node_modules/ is never sent, nothing is installed, "
        "there is no network), so those imports fail unless the candidate holds the source: "
        f"vendor it into the project, {ways} (docs/binding.md#dependencies-and-workspaces)"
    )


def _mocks_clause(mocked: list[str], served: TestServed) -> str:
    """What to know of the packages of `mocked`, a specifier of each of which tests replace
    by name: whether an import of it loads depends on when it runs; never bundle what
    imports it."""
    if not mocked:
        return ""
    mockers = sorted({path for name in mocked for path in served.mockers[name]})
    # The specifiers, not the packages: a mock replaces only the one it names.
    replaced = [spec for name in mocked for spec in served.replaced[name]]
    one = len(replaced) == 1
    it = "it" if one else "them"
    return (
        f"{some(replaced)} {'is' if one else 'are'} replaced by name in {some(mockers)} "
        f"(mock.module): an import of {it} that runs after that call gets the mock, one that "
        "runs before it (a static import in the test file, or in a file the test imports "
        f"statically) finds no package; do not bundle a test that loads {it}: a bundle holds "
        "the real package, which the mock then no longer replaces"
    )


def _mocked_note(parts: str, *, who: str, mocks: str) -> str:
    """The sentence for packages that only tests load, each replaced by name in a test
    (`mocks`): nothing installs them, and whether their imports load depends on when."""
    return (
        f"package.json declares {parts} that {who} import: none is installed when a command "
        "runs (node_modules/ is never sent, nothing is installed, there is no network), but "
        f"{mocks} (docs/binding.md#dependencies-and-workspaces)"
    )


def _loaders(runner: str | None) -> str:
    """Whose files import the packages named: every command's (the files each runs, and
    what those import), or the one named `runner`'s."""
    return "the commands' files" if runner is None else f"the files of `{runner}`"


def _not_run_note(
    found: PackageImports,
    parts: str,
    commands: Sequence[str],
    runner: str | None,
    blind: list[Unfollowed],
) -> str:
    """The sentence for packages only files no command runs import (the commands run
    bundles, say): nothing fails for want of them, unless an import jigcmd does not
    follow (`blind`) leads there, which is said instead."""
    named = sorted(set(commands))
    if runner is None:
        runs = f"the commands run none of those files: they run {some(named)}"
        them = "them"
    else:
        runs = f"`{runner}` runs none of those files: it runs {some(named)}"
        them = "it"
    reach = "reaches" if len(named) == 1 else "reach"
    declared = f"package.json declares {parts} that candidate files import, but "
    where = "(docs/binding.md#dependencies-and-workspaces)"
    if blind:
        items, rest = cut(blind, 3)
        shown = "; ".join(
            f"`{bounded(item.specifier)}` in {item.importer} ({item.why})" for item in items
        )
        more = f"; and {rest} more" if rest else ""
        return (
            f"{declared}{runs}, which {reach} none of those imports by the specifiers jigcmd "
            f"follows; it does not follow {shown}{more}: if one leads to those files, their "
            "imports fail, for none of those packages is installed when a command runs "
            f"{where}"
        )
    missing = f"none of those imports, so none is missing for {them}"
    return f"{declared}{runs}, which {reach} {missing} {where}"


def posture_notes(
    files: Mapping[str, str],
    commands: Sequence[str] = (),
    installed: Installed = _anywhere,
    tests: Sequence[str] = (),
) -> list[str]:
    """Every note that applies to the candidate `files` (`commands`: the files the commands
    name, `tests` those `bun test` runs; `installed`: whether the host has a package, for
    the bundling example), in a fixed order."""
    notes = (
        bunfig_note(files, named=tests),
        dependencies_note(files, commands, installed, tests=tests),
    )
    return [note for note in notes if note is not None]


def _declared(files: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The names every package.json in `files` declares: (from a registry, from the
    workspace), each sorted. `@types/*` are types only: Bun never imports them."""
    external: set[str] = set()
    workspace: set[str] = set()
    for path, text in files.items():
        if path != "package.json" and not path.endswith("/package.json"):
            continue
        manifest = read_manifest(text)  # one not read is said by `manifest_notes`
        for field in _DEPENDENCY_FIELDS:
            value = manifest.get(field)
            if not isinstance(value, dict):
                continue
            for name, version in value.items():
                if str(name).startswith("@types/"):
                    continue
                local = isinstance(version, str) and version.startswith("workspace:")
                (workspace if local else external).add(str(name))
    return sorted(external), sorted(workspace - external)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _who(names: list[str], found: PackageImports) -> str:
    """`zod: a.ts, b.ts; yargs: cli.ts`, the first three packages and two files of each
    (`cut`: four, or three, when the rest is one)."""
    shown = []
    named, rest = cut(names, 3)
    for name in named:
        paths, others = cut(found.importers[name], 2)
        more = f" and {others} more" if others else ""
        shown.append(f"{name}: {', '.join(paths)}{more}")
    return "; ".join(shown) + (f"; and {rest} more" if rest else "")
