"""Bun's snapshot files in a project, named because no snapshot test can pass on them here.

Bun opens a test file's `__snapshots__/<test>.snap` for writing even when it only compares,
and makes the directory when it is missing. The candidate tree at `/work` is a read-only
mount while the candidate runs (docs/envelope.md, "Snapshot tests: why the tree stays
sealed"), so every `toMatchSnapshot` fails there, whether its snapshot was sent or not.
`snapshot_note` says so in one line, naming what the project holds of them: the snapshot
files (sent or left out) and the test files that call a snapshot matcher. Pure: paths and
texts in, a sentence out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

__all__ = ["snapshot_note"]

# The matchers that read a `.snap` file (`toMatchInlineSnapshot` keeps its value in the test).
_MATCHERS = ("toMatchSnapshot(", "toThrowErrorMatchingSnapshot(")
_SNAPSHOT_DIR = "__snapshots__"
# How many names the note gives per kind before "and N more".
_NAMED = 4


def snapshot_note(files: Mapping[str, str], left_out: Iterable[str] = ()) -> str | None:
    """One line naming the project's snapshot files and tests, and the limit; None if none.

    `files` is what would be sent (path to text), `left_out` the paths left out of it.
    """
    stored = sorted(path for path in (*files, *left_out) if _is_snapshot(path))
    calling = sorted(
        path
        for path, text in files.items()
        if not _is_snapshot(path) and any(matcher in text for matcher in _MATCHERS)
    )
    if not stored and not calling:
        return None
    found = []
    if stored:
        found.append(f"{_named(stored)} (snapshot files)")
    if calling:
        found.append(f"{_named(calling)} (call toMatchSnapshot)")
    return (
        f"snapshot tests cannot pass in the envelope: {'; '.join(found)}. The candidate tree "
        "is read-only and Bun opens a .snap file for writing, so each toMatchSnapshot fails, "
        "its snapshot sent or not; use explicit expectations (toEqual), or "
        "toMatchInlineSnapshot with its value written in the test (docs/cli.md, "
        '"Snapshot tests")'
    )


def _is_snapshot(path: str) -> bool:
    parts = PurePosixPath(path.rstrip("/")).parts
    return _SNAPSHOT_DIR in parts or path.endswith(".snap")


def _named(paths: list[str]) -> str:
    more = f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else ""
    return ", ".join(paths[:_NAMED]) + more
