"""The notes a call's answer carries: what Bun under jigcmd will not do with the files sent.

`jigcmd run` prints such notes on the operator's terminal (`frontends/runnotes.py`); a
model calling over MCP reads neither that terminal nor the docs, so its answer carries the
ones that concern the called command itself: a package.json jigcmd cannot read, the snapshot
tests that command runs, its tests calling `.only`, a `scripts.test`'s Bun options, a
`bunfig.toml` Bun is not given, the packages it imports that nothing installs, a file it
loads spawning `bun` by name. Made from the validated request alone (never from the run),
so a replay of the call says the same. Pure: the request in, sentences out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from jigcmd.command.bunfig import bunfig_note
from jigcmd.command.bunposture import dependencies_note
from jigcmd.command.packagejson import MANIFEST
from jigcmd.command.snapshots import snapshot_note
from jigcmd.command.testcalls import only_note, spawn_note
from jigcmd.command.testscript import scripts_test_note
from jigcmd.command.workspaces import manifest_notes
from jigcmd.policy.imports import imported_closure
from jigcmd.policy.request import ValidRequest
from jigcmd.policy.tsconfigpaths import config_files

__all__ = ["call_notes"]


def call_notes(valid: ValidRequest) -> tuple[str, ...]:
    """The notes for running `valid`'s command on its files, in `jigcmd run`'s order."""
    files = dict(valid.files)
    command = valid.command
    tests = command.kind == "test"
    reached = _reached(files, command.paths)
    notes = (
        *manifest_notes(files),
        snapshot_note(files, tests=command.paths) if tests else None,
        only_note(files, command.paths) if tests else None,
        scripts_test_note(files) if tests else None,
        bunfig_note(files, tests=tests, named=command.paths if tests else ()),
        dependencies_note(
            reached,
            command.paths,
            runner=command.name,
            tests=command.paths if tests else (),
        ),
        spawn_note(reached, reached),
    )
    return tuple(note for note in notes if note is not None)


def _reached(files: Mapping[str, str], roots: tuple[str, ...]) -> dict[str, str]:
    """What the command runs or imports, with the manifests that say which packages are
    declared and the tsconfig.json files (with what they extend) that map some to files:
    reading every file's imports costs about 46 ms for 256 KiB of source on the call's
    path, and a package only a file it never loads imports is none of the call's business
    (docs/mcp.md)."""
    kept = imported_closure(files, roots) | config_files(files)
    return {
        path: text
        for path, text in files.items()
        if path in kept or posixpath.basename(path) == MANIFEST
    }
