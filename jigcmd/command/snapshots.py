"""Bun's snapshot files in a project, named because no snapshot test can pass on them here.

Bun opens a test file's `__snapshots__/<test>.snap` for writing even when it only compares,
and makes the directory when it is missing. The candidate tree at `/work` is a read-only
mount while the candidate runs (docs/envelope.md, "Snapshot tests: why the tree stays
sealed"), so every `toMatchSnapshot` fails there, whether its snapshot was sent or not.
`bun test` runs in Bun's CI mode (docs/envelope.md, "`bun test` in CI mode"), so an inline
snapshot matcher without its value fails too, where Bun would otherwise write the value.
`snapshot_note` says so in one line, naming what the project holds of them: the snapshot
files (sent or left out) and the test files that call a snapshot matcher, of one command's
tests when given them. Pure: paths and texts in, a sentence out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from jigcmd.policy.imports import imported_closure

__all__ = ["snapshot_note"]

# The matchers that read a `.snap` file, and the inline ones called without their value
# (with it, `toMatchInlineSnapshot` compares what the test holds and can pass).
_MATCHERS = ("toMatchSnapshot(", "toThrowErrorMatchingSnapshot(")
_UNWRITTEN = ("toMatchInlineSnapshot()", "toThrowErrorMatchingInlineSnapshot()")
_SNAPSHOT_DIR = "__snapshots__"
# How many names the note gives per kind before "and N more".
_NAMED = 4


def snapshot_note(
    files: Mapping[str, str], left_out: Iterable[str] = (), tests: Sequence[str] | None = None
) -> str | None:
    """One line naming the project's snapshot files and tests, and the limit; None if none.

    `files` is what would be sent (path to text), `left_out` the paths left out of it.
    `tests`: one command's test files, to name only what they run (the files they import
    included) and the snapshot files beside them; None for the whole project.
    """
    stored = sorted(
        path for path in (*files, *left_out) if _is_snapshot(path) and _beside(path, tests)
    )
    calling = _calling(files, files, _MATCHERS)
    unwritten = _calling(files, files, _UNWRITTEN)
    if tests is not None and (calling or unwritten):
        # Only then: the walk reads every file the tests reach, on each call's path.
        ran = imported_closure(files, tests)
        calling = [path for path in calling if path in ran]
        unwritten = [path for path in unwritten if path in ran]
    if not stored and not calling and not unwritten:
        return None
    found = []
    if stored:
        found.append(f"{_named(stored)} (snapshot files)")
    if calling:
        found.append(f"{_named(calling)} (call toMatchSnapshot)")
    if unwritten:
        found.append(f"{_named(unwritten)} (call toMatchInlineSnapshot() without its value)")
    return (
        f"snapshot tests cannot pass in the envelope: {'; '.join(found)}. The candidate tree "
        "is read-only and Bun opens a .snap file for writing, so each toMatchSnapshot fails, "
        "its snapshot sent or not; bun test runs in CI mode, so an inline snapshot without its "
        "value fails too; use explicit expectations (toEqual), or toMatchInlineSnapshot with "
        'its value written in the test (docs/cli.md, "Snapshot tests")'
    )


def _calling(files: Mapping[str, str], ran: Iterable[str], matchers: tuple[str, ...]) -> list[str]:
    """The files of `ran` (not snapshot files) whose text calls one of `matchers`."""
    return sorted(
        path
        for path in ran
        if not _is_snapshot(path) and any(matcher in files[path] for matcher in matchers)
    )


def _beside(path: str, tests: Sequence[str] | None) -> bool:
    """Whether a snapshot file (or a left-out `__snapshots__/`) is one of `tests`' own:
    Bun keeps `dir/a.test.ts`'s in `dir/__snapshots__/a.test.ts.snap`."""
    if tests is None:
        return True
    parts = PurePosixPath(path.rstrip("/")).parts
    if _SNAPSHOT_DIR not in parts:
        return False
    at = parts.index(_SNAPSHOT_DIR)
    folder = "/".join(parts[:at])
    rest = parts[at + 1 :]
    for test in tests:
        if posixpath.dirname(test) != folder:
            continue
        if not rest or rest == (posixpath.basename(test) + ".snap",):
            return True
    return False


def _is_snapshot(path: str) -> bool:
    parts = PurePosixPath(path.rstrip("/")).parts
    return _SNAPSHOT_DIR in parts or path.endswith(".snap")


def _named(paths: list[str]) -> str:
    more = f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else ""
    return ", ".join(paths[:_NAMED]) + more
