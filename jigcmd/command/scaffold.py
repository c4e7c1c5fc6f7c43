"""`jigcmd init`'s Binding for a person's own project: the commands found in the project.

The reviewed commands come from the candidate the directory sends (`projectdir.py`): a
`tests` command for the files bare `bun test` would run (`tests-2`, … past 16, the Binding's
limit per command), a `start` command for the entry point `package.json` names (`module`,
else `main`) and one command per `bin` script, the root's and each workspace member's
(`workspaces.py`; a member's named after the member too when its own name is taken). An
entry point that cannot be a command is named with the reason (`Scaffold.notes`), never
dropped without a word; so is a test Bun runs that no Binding may name, with the fix.
What is found here is written beside the project by `scaffoldfiles.py`: under `DIR/.jig/`
(reserved, so never part of a candidate), the Binding in its format and the Flow package it
names, with the exact copy of the contract's descriptor; nothing that exists is overwritten.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from jigcmd.command.packagejson import read_manifest
from jigcmd.command.projectdir import ProjectFiles
from jigcmd.command.workspaces import manifest_notes, member_manifests
from jigcmd.contract import LOCAL_NAME_MAX_CHARS
from jigcmd.policy.binding import (
    BUN_SCRIPT_EXTENSIONS,
    MAX_COMMANDS,
    MAX_TEST_PATHS,
    RUN_RULE,
    TEST_RULE,
    bun_runs_as_test,
    is_run_path,
    is_test_path,
    test_name_for,
)
from jigcmd.policy.paths import (
    PATH_CHARACTERS,
    PATH_CHARACTERS_SAID,
    is_local_name,
    path_problem,
    renamed_path,
)
from jigcmd.policy.sourcetext import has_jsx

__all__ = ["Scaffold", "ScaffoldError", "is_suite_part", "plan_scaffold", "suite_part"]


class ScaffoldError(ValueError):
    """Raised when no Binding can be made for a project (nothing to review, a file exists)."""


@dataclass(frozen=True)
class Scaffold:
    """What `init` writes: the package's name and the commands, each `run` or `test` paths."""

    name: str
    commands: Mapping[str, tuple[str, tuple[str, ...]]]  # name -> ("run" | "test", paths)
    # What the project names that did not become a command, and why, one sentence each.
    notes: tuple[str, ...] = ()

    def needed(self) -> tuple[str, ...]:
        """Every file the commands name: the candidate must send them."""
        return tuple(path for _, paths in self.commands.values() for path in paths)

    def tests(self) -> tuple[str, ...]:
        """The files the test commands name: `bun test` runs them."""
        return tuple(p for kind, paths in self.commands.values() if kind == "test" for p in paths)


def plan_scaffold(project: ProjectFiles, name: str | None = None) -> Scaffold:
    """The commands found in `project`'s candidate; `ScaffoldError` when there are none."""
    manifest = read_manifest(project.files.get("package.json"))
    tests = sorted(p for p in project.files if is_test_path(p) and path_problem(p) is None)
    # Files bare `bun test` runs that a Binding's rule does not take: named, never dropped.
    unreviewable = sorted(p for p in project.files if bun_runs_as_test(p) and p not in tests)
    commands: dict[str, tuple[str, tuple[str, ...]]] = {}
    for index in range(0, len(tests), MAX_TEST_PATHS):
        part = tests[index : index + MAX_TEST_PATHS]
        commands[suite_part(index // MAX_TEST_PATHS + 1)] = ("test", tuple(part))
    if len(commands) > MAX_COMMANDS:
        raise ScaffoldError(
            f"{project.root}: {len(tests)} test files need {len(commands)} commands, more than "
            f"a Binding's {MAX_COMMANDS}; leave some out with --exclude GLOB"
        )
    split = list(commands)
    entry_notes, unusable = _add_entry_points(commands, manifest, project)
    notes = [*manifest_notes(project.files), *entry_notes]
    if len(split) > 1:
        notes.insert(0, _split_note(len(tests), split))
    if unreviewable:
        notes[0:0] = _unreviewable_notes(unreviewable, project.files)
    elif not tests and commands:
        # A fresh `bun init` has an entry point and no test: say why `tests` is missing.
        notes.insert(0, f"no `tests` command: {_NO_TESTS}")
    if not commands:
        raise ScaffoldError(_nothing_to_review(project, notes, unusable))
    chosen = name if name is not None else _local_name(manifest.get("name"), project.root.name)
    if not is_local_name(chosen):
        raise ScaffoldError(
            f"--name {chosen!r}: a package name is lowercase words joined by single hyphens"
        )
    return Scaffold(chosen, commands, tuple(notes))


def suite_part(number: int) -> str:
    """The name of the `number`th command of a suite split past a command's 16 test files:
    `tests`, then `tests-2`, `tests-3`, …"""
    return "tests" if number == 1 else f"tests-{number}"


def is_suite_part(name: str) -> bool:
    """Whether `name` is one `suite_part` gives: one part of a suite `init` may have split."""
    return _SUITE_PART.fullmatch(name) is not None


_SUITE_PART = re.compile(r"tests(-[2-9]|-[1-9][0-9]+)?")


def _nothing_to_review(project: ProjectFiles, notes: list[str], unusable: list[str]) -> str:
    """The refusal of a project with no command: each entry point it names that cannot be
    one, with why, in the sentence itself; the other notes after it."""
    no_tests = "no test files (names ending in .test.ts, .test.js, .spec.ts or .spec.js)"
    if unusable:
        said = (
            f"{no_tests} among the files it sends, and no entry point it can run: "
            f"{'; '.join(unusable)}"
        )
    else:
        said = (
            f'{no_tests} and no entry point (package.json "module", "main" or "bin", a .ts '
            "or .js file) among the files it sends"
        )
    others = "".join(f" ({note})" for note in notes if note not in unusable)
    return (
        f"{project.root}: {said}; nothing to review{others} (write the Binding by hand: "
        "docs/binding.md)"
    )


def _split_note(count: int, names: list[str]) -> str:
    """Why the tests are more than one command, and that each must run for the whole suite."""
    return (
        f"{count} test files split into {len(names)} commands ({', '.join(names)}): a command "
        f"names at most {MAX_TEST_PATHS} test files (the Binding's limit); run each of them "
        "to run the whole suite"
    )


_NO_TESTS = (
    "no test file (a name ending in .test.ts, .test.js, .spec.ts or .spec.js) among the "
    "files it sends; add one, then add the command to the Binding (docs/binding.md) or move "
    ".jig aside and run jigcmd init again"
)


def _unreviewable_notes(paths: list[str], files: Mapping[str, str]) -> list[str]:
    """The files bare `bun test` runs that no Binding may name, and what to do about them:
    one sentence for those outside the path grammar, one for those with another suffix."""
    outside = [path for path in paths if path_problem(path) is not None]
    misnamed = [path for path in paths if path not in outside]
    notes = [_grammar_note(outside)] if outside else []
    return notes + ([_unreviewable_note(misnamed, files)] if misnamed else [])


def _left_out(paths: list[str]) -> tuple[str, str]:
    """`N file(s) bare `bun test` runs left out of the commands`, and `it` or `them`."""
    count = f"{len(paths)} file{'s' if len(paths) != 1 else ''}"
    them = "them" if len(paths) != 1 else "it"
    return f"{count} bare `bun test` runs left out of the commands", them


def _grammar_note(paths: list[str]) -> str:
    """The test files whose path a Binding may not hold, each with the character (or the
    rule) it breaks, and the names they could have."""
    said, them = _left_out(paths)
    reasons = [(path, _grammar_reason(path)) for path in paths]
    named = [f"{path} ({why})" for path, why in reasons]
    chars = all(why.startswith("'") or why.startswith('"') for _, why in reasons)
    rule = f"holds only {PATH_CHARACTERS_SAID}" if chars else "obeys the path grammar"
    renames = [
        f"{path} to {renamed}" for path in paths if (renamed := _grammar_name(path)) is not None
    ]
    shown = f" ({', '.join(renames[:3])}{', …' if len(renames) > 3 else ''})" if renames else ""
    return (
        f"{said}: {_some(named, 8)}: a Binding's path {rule} (docs/binding.md); rename "
        f"{them}{shown} to have {them} reviewed"
    )


def _grammar_reason(path: str) -> str:
    """`' ', U+0020` for the first character a path may not hold, else the rule it breaks."""
    char = next((c for c in path if c not in PATH_CHARACTERS), None)
    if char is not None:
        return f"{char!r}, U+{ord(char):04X}"
    return path_problem(path) or ""


def _grammar_name(path: str) -> str | None:
    """The test path nearest `path` that a Binding may name (`a b.test.ts` → `a-b.test.ts`):
    the path grammar's nearest name of its test name; None when that is no test path."""
    renamed = renamed_path(test_name_for(path) or path)
    return renamed if renamed is not None and is_test_path(renamed) else None


def _unreviewable_note(paths: list[str], files: Mapping[str, str]) -> str:
    """The files bare `bun test` runs by a suffix a Binding's test path does not take."""
    said, them = _left_out(paths)
    note = (
        f"{said}: {_some(paths, 8)}: a Binding's test path is {TEST_RULE}; rename "
        f"{them}{_renames(paths)} to have {them} reviewed"
    )
    # Bun parses a .ts file without JSX: `<b>x</b>` there is a type assertion, then a syntax
    # error. A .js file it still reads as JSX, so only a .tsx test needs more than a rename.
    markup = [p for p in paths if p.lower().endswith(".tsx") and has_jsx(files[p])]
    if markup:
        holds = "holds" if len(markup) == 1 else "hold"
        note += (
            f"; but {_some(markup, 8)} {holds} JSX markup, a syntax error in a .ts file "
            '(`error: Expected ")"`): move the markup into a .tsx module the test imports '
            "(a function returning the element), then rename"
        )
    return note


def _renames(paths: list[str]) -> str:
    """` (Foo.Test.ts to Foo.test.ts, bar_spec.js to bar.spec.js)`: the names the first
    three of `paths` would have, each in its own directory."""
    shown = [
        f"{posixpath.basename(path)} to {posixpath.basename(renamed)}"
        for path in paths
        if (renamed := test_name_for(path)) is not None
    ]
    if not shown:
        return ""
    more = ", …" if len(shown) > 3 else ""
    return f" ({', '.join(shown[:3])}{more})"


def _some(paths: list[str], limit: int) -> str:
    return ", ".join(paths[:limit]) + (
        f" and {len(paths) - limit} more" if len(paths) > limit else ""
    )


class _Entry(NamedTuple):
    """An entry point a package.json names, as a person reads it, and the command it makes."""

    named: str  # `apps/cli/package.json "bin" 'cli' './cli.ts'`
    command: str
    path: str  # relative to the candidate's root
    fallback: str | None = None  # the name to take when `command` is taken


def _entry_points(manifest: Mapping[str, object], member: str = "") -> list[_Entry]:
    """Each entry point of the root's package.json (`module`, else `main`, as `start`; each
    `bin` script under its own name) or of workspace member `member`'s (its `bin` scripts,
    named after the member too when their own name is taken)."""
    where = posixpath.join(member, "package.json")
    found: list[_Entry] = []
    for key in () if member else ("module", "main"):
        value = manifest.get(key)
        if isinstance(value, str):
            found.append(_Entry(f'{where} "{key}" {value!r}', "start", value.removeprefix("./")))
    bins = manifest.get("bin")
    label = _local_name(manifest.get("name"), posixpath.basename(member))
    if isinstance(bins, str):
        bins = {label if member else str(manifest.get("name", "bin")): bins}
    if not isinstance(bins, dict):
        return found
    for key, value in bins.items():
        if not isinstance(value, str):
            continue
        path = posixpath.normpath(posixpath.join(member, value)) if member else value
        name = _local_name(key, "bin")
        fallback = _local_name(f"{label}-{key}") if member else None
        found.append(
            _Entry(f'{where} "bin" {key!r} {value!r}', name, path.removeprefix("./"), fallback)
        )
    return found


def _add_entry_points(
    commands: dict[str, tuple[str, tuple[str, ...]]],
    manifest: Mapping[str, object],
    project: ProjectFiles,
) -> tuple[list[str], list[str]]:
    """Add a `run` command per usable entry point, the root's then each workspace member's;
    the sentence for each one not used, and those of the ones that cannot be a command."""
    entries = _entry_points(manifest)
    for member, member_manifest in member_manifests(project.files).items():
        entries += _entry_points(member_manifest, member)
    notes: list[str] = []
    unusable: list[str] = []
    for named, wanted, path, fallback in entries:
        used = {paths[0]: name for name, (kind, paths) in commands.items() if kind == "run"}
        if path in used:
            if wanted != "start" or used[path] != "start":
                notes.append(f"{named} is command {used[path]!r} already")
            continue
        if wanted == "start" and "start" in commands:
            notes.append(f"{named}: not a command, {commands['start'][1][0]!r} is 'start'")
            continue
        command = fallback if wanted in commands and fallback is not None else wanted
        reason = _entry_problem(command, path, commands, project)
        if reason is not None:
            notes.append(f"{named} left out: {reason}")
            unusable.append(notes[-1])
            continue
        commands[command] = ("run", (path,))
    return notes, unusable


def _entry_problem(
    command: str,
    path: str,
    commands: Mapping[str, tuple[str, tuple[str, ...]]],
    project: ProjectFiles,
) -> str | None:
    """Why the entry point at `path` cannot be command `command`, or None."""
    if path_problem(path) is not None:
        return f"not a candidate path ({path_problem(path)})"
    if path not in project.files:
        return "not among the files it sends (missing, left out or ignored)"
    if not is_run_path(path):
        return f"not {RUN_RULE}{_run_name_for(path, project.files)}"
    if len(commands) >= MAX_COMMANDS:
        return f"a Binding holds at most {MAX_COMMANDS} commands"
    if command in commands:
        return f"a command is named {command!r} already"
    return None


def _run_name_for(path: str, files: Mapping[str, str]) -> str:
    """`: src/main.ts is one, name it instead` (or `: rename it to …`) for a module Bun runs
    whose extension a run path may not have (`.mts`, `.tsx`); "" for another file."""
    stem, dot, extension = path.rpartition(".")
    if not dot or extension.lower() not in BUN_SCRIPT_EXTENSIONS:
        return ""
    renamed = f"{stem}.{'ts' if 't' in extension.lower() else 'js'}"
    if not is_run_path(renamed):
        return ""
    if renamed in files:
        return f": {renamed} is one, name it instead"
    return f": rename it to {renamed}"


def _local_name(*candidates: object) -> str:
    """The first of `candidates` made a LocalName (`@scope/My_App` → `my-app`)."""
    for raw in candidates:
        if isinstance(raw, str):
            # Accents decomposed and dropped, so `Ünï` is `uni`, not `n`.
            decomposed = unicodedata.normalize("NFKD", raw.rsplit("/", 1)[-1])
            base = decomposed.encode("ascii", "ignore").decode("ascii").lower()
            words = re.findall(r"[a-z0-9]+", base)
            name = "-".join(words)[:LOCAL_NAME_MAX_CHARS].strip("-")
            if is_local_name(name):
                return name
    return "project"
