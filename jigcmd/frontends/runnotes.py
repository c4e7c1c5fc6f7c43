"""The notes `jigcmd run` prints on stderr once a call is accepted, before it runs.

Each says what the run will not do that a person may expect of it: what the candidate left
out, test files sent that no command runs, what Bun runs without (`bunposture.py`) and the
snapshot tests that cannot pass. A note that concerns only `bun test` (snapshots, unnamed
test files, a `bunfig.toml`'s `[test]` table) is said only for a test command; none is
said before a refusal, which is then the one thing to read. Pure: values in, lines out.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from jigcmd.command.bundling import bundle_path
from jigcmd.command.bunposture import bunfig_note, dependencies_note
from jigcmd.command.listing import some
from jigcmd.command.projectdir import ProjectFiles
from jigcmd.command.workspaces import manifest_notes
from jigcmd.policy.binding import (
    MAX_TEST_PATHS,
    CommandPolicy,
    bun_runs_as_test,
    is_test_path,
)

__all__ = ["bundled_tests_note", "run_notes", "unnamed_tests_note"]

# How many of the unnamed test files a note names before "and N more".
_NAMED = 3


def run_notes(
    project: ProjectFiles,
    command: CommandPolicy,
    commands: Mapping[str, CommandPolicy],
    binding: Path,
    lock: Path | None,
) -> list[str]:
    """The notes for running `command` (one of the Binding's `commands`) on `project`, in a
    fixed order; `binding` and `lock` as `run` was given them."""
    files = project.files
    tests = command.kind == "test"
    notes = [
        project.note(),
        *manifest_notes(files),
        unnamed_tests_note(files, commands, binding, lock) if tests else None,
        bundled_tests_note(files, commands) if tests else None,
        project.snapshot_note(command.paths) if tests else None,
        bunfig_note(files, tests=tests),
        dependencies_note(
            files,
            command.paths,
            project.has_package,
            command.name,
            tests=command.paths if tests else (),
        ),
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
    unnamed = [path for path in _unnamed(files, named) if bundle_path(path) not in named]
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


def bundled_tests_note(
    files: Mapping[str, str], commands: Mapping[str, CommandPolicy]
) -> str | None:
    """The sentence for the test files sent that no command names but whose bundle
    (`bundled/<name>.js`, as the dependency note's `bun build` writes it) a test command
    runs: their tests run through the bundle, and the source need not be sent."""
    named = _named_tests(commands)
    sources = [path for path in _unnamed(files, named) if bundle_path(path) in named]
    if not sources:
        return None
    one = len(sources) == 1
    bundles = _some([bundle_path(path) for path in sources])
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


def _unnamed(files: Mapping[str, str], named: set[str]) -> list[str]:
    """The files sent that bare `bun test` would run and no test command names, sorted."""
    return sorted(path for path in files if bun_runs_as_test(path) and path not in named)


def _some(paths: list[str]) -> str:
    return some(paths, _NAMED)
