"""Calls in a candidate's source that bare Bun runs and Bun in the envelope refuses.

Two, each found by a scan of the file's text with its comments and string literals blanked
(`sourcetext.blank`: a hint, never a parse; a regular expression literal holding a quote can
fool it on that line):

- `.only` (`test.only`, `it.only`, `describe.only`, and chains such as `test.only.each`):
  `bun test` runs in CI mode here (`CI=true`), where Bun refuses `.only` with ".only is
  disabled in CI environments" and the run ends with no per-test results;
- `spawn(["bun", …])` or `spawnSync(["bun", …])` (and `spawn("bun", …)`): the envelope has
  no `PATH`, so no child finds `bun` by name; `process.execPath` is the Bun running.

Pure: the candidate's files in, a sentence out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from jigcmd.policy.sourcetext import blank, is_source

__all__ = ["only_note", "spawn_note"]

# `test.only`, `it . only(`, `describe.only.each`: a member `only` of one of Bun's test
# functions, outside comments and strings.
_ONLY = re.compile(r"(?<![\w$.])(?:test|it|describe)\s*+\.\s*+only\b")
# A spawn whose program is a string literal; the literal's text is read in the original.
_SPAWN = re.compile(r"(?<![\w$])spawn(?:Sync)?\s*+\(\s*+\[?\s*+([\"'`])")
# How many files the notes name before "and N more".
_NAMED = 4


def only_note(files: Mapping[str, str], tests: Iterable[str]) -> str | None:
    """The sentence for the files of `tests` that call `.only`; None for none."""
    calling = sorted(path for path in tests if path in files and _ONLY.search(blank(files[path])))
    if not calling:
        return None
    one = len(calling) == 1
    return (
        f"{_some(calling)} call{'s' if one else ''} .only (test.only, describe.only, it.only): "
        'bun test runs in CI mode here (CI=true), where Bun refuses .only (".only is disabled '
        'in CI environments"; the CI=false it suggests is not yours to set), so the run ends '
        "with no per-test results; remove .only, or give the focused tests a file and a "
        'command of their own (docs/cli.md, "Comparing with bare `bun test`")'
    )


def spawn_note(files: Mapping[str, str], paths: Iterable[str]) -> str | None:
    """The sentence for the files of `paths` that spawn `bun` by name; None for none."""
    spawning = sorted(
        path for path in paths if path in files and is_source(path) and _spawns_bun(files[path])
    )
    if not spawning:
        return None
    one = len(spawning) == 1
    return (
        f"{_some(spawning)} spawn{'s' if one else ''} `bun` by name: a command runs with no "
        "PATH, so that fails (Executable not found in $PATH); spawn process.execPath, the "
        "Bun running the command, in its place (docs/cli.md#comparing-with-bare-bun-test)"
    )


def _spawns_bun(text: str) -> bool:
    """Whether `text` calls spawn or spawnSync with the program `bun` as a literal."""
    for found in _SPAWN.finditer(blank(text)):
        quote = found.group(1)
        if text.startswith(f"bun{quote}", found.end()):
            return True
    return False


def _some(paths: list[str]) -> str:
    more = f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else ""
    return ", ".join(paths[:_NAMED]) + more
