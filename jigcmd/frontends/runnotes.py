"""The notes `jigcmd run` prints on stderr once a call is accepted, before it runs.

Each says what the run will not do that a person may expect of it: what the candidate left
out, test files sent that no command runs, the other parts of a suite `init` split across
commands (`tests`, `tests-2`, …), what Bun runs without (`bunposture.py`, `bunfig.py`, a
`scripts.test`'s options: `testscript.py`), the snapshot tests that cannot pass, and the
calls Bun refuses here (`.only`, `bun` spawned by name: `testcalls.py`). A note that concerns
only `bun test` (snapshots, `.only`, `scripts.test`, unnamed test files, a `bunfig.toml`'s
`[test]` table) is said only for a test command; none is
said before a refusal, which is then the one thing to read. Pure: values in, lines out.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from jigcmd.command.bundling import bundle_paths, whole_bundle_path
from jigcmd.command.bunfig import bunfig_note
from jigcmd.command.bunposture import dependencies_note
from jigcmd.command.listing import some
from jigcmd.command.projectdir import ProjectFiles
from jigcmd.command.scaffold import is_suite_part
from jigcmd.command.testcalls import only_note, spawn_note
from jigcmd.command.testscript import scripts_test_note
from jigcmd.command.workspaces import manifest_notes
from jigcmd.policy.binding import (
    MAX_TEST_PATHS,
    CommandPolicy,
    bun_runs_as_test,
    is_test_path,
)
from jigcmd.policy.imports import imported_closure

__all__ = ["bundled_tests_note", "run_notes", "unnamed_tests_note"]

# How many of the unnamed test files a note names before "and N more".
_NAMED = 3


def run_notes(
    project: ProjectFiles,
    command: CommandPolicy,
    commands: Mapping[str, CommandPolicy],
    binding: Path,
    lock: Path | None,
    *,
    excludes: Sequence[str] = (),
) -> list[str]:
    """The notes for running `command` (one of the Binding's `commands`) on `project`, in a
    fixed order; `binding`, `lock` and `excludes` as `run` was given them."""
    files = project.files
    tests = command.kind == "test"
    runs = _RunLine(binding, lock, project.root, excludes)
    notes = [
        project.note(),
        *manifest_notes(files),
        unnamed_tests_note(files, commands, binding, lock) if tests else None,
        _other_parts_note(command, commands, runs) if tests else None,
        bundled_tests_note(files, commands) if tests else None,
        project.snapshot_note(command.paths) if tests else None,
        only_note(files, command.paths) if tests else None,
        scripts_test_note(files) if tests else None,
        bunfig_note(files, tests=tests, named=command.paths if tests else ()),
        dependencies_note(
            files,
            command.paths,
            project.has_package,
            command.name,
            tests=command.paths if tests else (),
        ),
        spawn_note(files, imported_closure(files, command.paths)),
    ]
    return [note for note in notes if note is not None]


def unnamed_tests_note(
    files: Mapping[str, str],
    commands: Mapping[str, CommandPolicy],
    binding: Path,
    lock: Path | None = None,
) -> str | None:
    """The sentence for the files sent that bare `bun test` would run and no test command
    of the Binding names (a test file added since `init`): sent, yet never run, which the
    counts alone (`1 run, 1 passed`) do not show. A test whose bundle a command runs is
    run that way (`bundled_tests_note`), never asked to be added back."""
    named = _named_tests(commands)
    bundled = _bundles_run(_unnamed(files, named), named)
    unnamed = [path for path in _unnamed(files, named) if path not in bundled]
    if not unnamed:
        return None
    count = len(unnamed)
    files_are, them = (
        (f"{count} test files sent are", "them") if count > 1 else ("1 test file sent is", "it")
    )
    unnameable = [path for path in unnamed if not is_test_path(path)]
    rename = (
        f" (a Binding names only .test.ts, .test.js, .spec.ts and .spec.js files: rename "
        f"{_some(unnameable)})"
        if unnameable
        else ""
    )
    to = "" if lock is None else f" --lock {shlex.quote(str(lock))}"
    return (
        f"{files_are} named by no command of the Binding, so not run: {_some(unnamed)}; to run "
        f"{them}, add {them} to a command's `test` list in {binding} (at most "
        f"{MAX_TEST_PATHS} to a command){rename}, then admit it again: "
        f"jigcmd lock --binding {shlex.quote(str(binding))}{to}"
    )


class _RunLine:
    """`jigcmd run` of another command, as this one was given its options."""

    def __init__(
        self, binding: Path, lock: Path | None, root: Path, excludes: Sequence[str]
    ) -> None:
        self._head = ["jigcmd", "run", "--binding", str(binding)]
        self._head += [] if lock is None else ["--lock", str(lock)]
        self._tail = ["--files", str(root)] + [a for g in excludes for a in ("--exclude", g)]

    def of(self, command: str) -> str:
        return shlex.join([*self._head, command, *self._tail])


def _other_parts_note(
    command: CommandPolicy, commands: Mapping[str, CommandPolicy], runs: _RunLine
) -> str | None:
    """The test files of the suite's other parts (`init` splits a suite past 16 files into
    `tests`, `tests-2`, …), and how to run them: the counts of one part (`16 run, 16
    passed`, exit code 0) would otherwise read as the whole suite's, a failing part unsaid."""
    if not is_suite_part(command.name):
        return None
    own = set(command.paths)
    others = {
        name: [path for path in policy.paths if path not in own]
        for name, policy in commands.items()
        if name != command.name and policy.kind == "test" and is_suite_part(name)
    }
    others = {name: paths for name, paths in others.items() if paths}
    if not others:
        return None
    count = len({path for paths in others.values() for path in paths})
    named = [
        f"`{name}`" + (f" ({len(paths)})" if len(others) > 1 else "")
        for name, paths in others.items()
    ]
    where = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    files = (
        f"{count} more test files of the project are"
        if count != 1
        else "1 more test file of the project is"
    )
    run = "run it too" if len(others) == 1 else "run each too"
    return (
        f"{files} in {where}, which this run does not run: {run} for the whole suite: "
        + "; ".join(runs.of(name) for name in others)
    )


def bundled_tests_note(
    files: Mapping[str, str], commands: Mapping[str, CommandPolicy]
) -> str | None:
    """The sentence for the test files sent that no command names but whose bundle
    (`bundled/<name>.js`, or `bundled/test-a-x.test.js` where names are shared, as the
    dependency note's `bun build` writes it) a test command runs: their tests run through
    the bundle, and the source need not be sent."""
    named = _named_tests(commands)
    bundled = _bundles_run(_unnamed(files, named), named)
    sources = list(bundled)
    if not sources:
        return None
    one = len(sources) == 1
    bundles = _some(list(bundled.values()))
    excludes = " ".join(f"--exclude {shlex.quote('/' + path)}" for path in sources)
    they, bundle, each = ("it", "its bundle", "the") if one else ("them", "their bundles", "each")
    return (
        f"{_some(sources)} {'is' if one else 'are'} named by no command of the Binding but run "
        f"through {bundle} ({bundles}), which a test command names: nothing to add back; "
        f"{each} bundle holds what its tests need, so you may leave {they} out of the "
        f"candidate: {excludes} (docs/binding.md#bundling)"
    )


def _named_tests(commands: Mapping[str, CommandPolicy]) -> set[str]:
    """Every test path a test command of the Binding names."""
    return {path for policy in commands.values() if policy.kind == "test" for path in policy.paths}


def _bundles_run(sources: list[str], named: set[str]) -> dict[str, str]:
    """The bundle a test command names of each of `sources` that has one: the name the
    dependency note gives it among them (`bundle_paths`), or the one of its whole path,
    which the note gives where the files it bundled shared a name (not always these)."""
    simple = bundle_paths(sources)
    found = {}
    for source in sources:
        bundle = next((b for b in (simple[source], whole_bundle_path(source)) if b in named), None)
        if bundle is not None:
            found[source] = bundle
    return found


def _unnamed(files: Mapping[str, str], named: set[str]) -> list[str]:
    """The files sent that bare `bun test` would run and no test command names, sorted."""
    return sorted(path for path in files if bun_runs_as_test(path) and path not in named)


def _some(paths: list[str]) -> str:
    return some(paths, _NAMED)
