"""package.json's `scripts.test`, whose Bun options a test command never gets.

A developer runs `bun run test`, which runs the script: `bun test --preload ./setup.ts
--timeout 8000 test/unit`, say. A Binding's test command runs `bun test` with the files it
names and jigcmd's own fixed options (docs/binding.md#what-bun-runs-with), never the
script, so its options and path filters do not apply, and the tests fail differently
(a global the preload set is undefined, a slow test times out at Bun's 5 s). The note names
what the script passes and gives a fix for each of the options it knows. Pure.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from jigcmd.command.packagejson import MANIFEST, read_manifest
from jigcmd.errors import bounded

__all__ = ["scripts_test_note"]

# The fix for each option a script passes, by its names; the rest only "do not apply".
_PRELOAD = ("--preload", "-r", "--require", "--import")
_TIMEOUT = ("--timeout",)
_FILTER = ("-t", "--test-name-pattern")
# Options that take a value as the next word (`--timeout 8000`), so it is no path filter.
_VALUED = (*_PRELOAD, *_TIMEOUT, *_FILTER, "--rerun-each", "--coverage-reporter", "--reporter")
_SEPARATORS = ("&&", "||", ";", "|")


def scripts_test_note(files: Mapping[str, str]) -> str | None:
    """The sentence for a `scripts.test` that gives `bun test` options or path filters;
    None when there is none, or it does not run `bun test`."""
    scripts = read_manifest(files.get(MANIFEST)).get("scripts")
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str):
        return None
    given = _bun_test_arguments(script)
    if not given:
        return None
    names, filters = _read(given)
    fixes = []
    if names & set(_PRELOAD):
        fixes.append("import the setup it preloads from the test files that need it")
    if names & set(_TIMEOUT):
        fixes.append("give a slow test its own timeout, test()'s third argument")
    if names & set(_FILTER) or filters:
        fixes.append(
            "a command runs every test of the files its `test` list names: give the tests "
            "the script selects a command of their own"
        )
    fix = f"; {'; '.join(fixes)}" if fixes else ""
    return bounded(
        f"{MANIFEST} scripts.test runs `{script.strip()}`: a test command runs `bun test` "
        f"with the files the Binding names and jigcmd's own options, never the script, so "
        f"what it gives Bun ({' '.join(given)}) does not apply{fix} "
        "(docs/binding.md#what-bun-runs-with)"
    )


def _read(given: list[str]) -> tuple[set[str], list[str]]:
    """The option names among `given` (`--timeout`), and its path filters: the words that
    are neither an option nor the value of one taking the next word."""
    names: set[str] = set()
    filters = []
    valued = False
    for word in given:
        if valued:
            valued = False
        elif word.startswith("-"):
            name, equals, _ = word.partition("=")
            names.add(name)
            valued = not equals and name in _VALUED
        else:
            filters.append(word)
    return names, filters


def _bun_test_arguments(script: str) -> list[str]:
    """The words after `bun test` in `script` (`--timeout 8000`, `test/unit`), a value
    after the option taking it; empty when it runs no `bun test`."""
    try:
        words = shlex.split(script)
    except ValueError:  # an unclosed quote: not a script to read
        return []
    for at in range(len(words) - 1):
        if words[at] == "bun" and words[at + 1] == "test":
            rest = words[at + 2 :]
            end = next((n for n, word in enumerate(rest) if word in _SEPARATORS), len(rest))
            return rest[:end]
    return []
