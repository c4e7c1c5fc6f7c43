"""A hostile `bunfig.toml` through the real `jigcmd init` and `jigcmd request`: nested past
Python's recursion limit, it gets the "nor is it TOML" note (not a traceback); a 100,000
character `[test] root` and keys holding ESC and a newline are quoted cut and escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

_TEST = 'import { test } from "bun:test";\ntest("a", () => {});\n'
_NESTED = "a = " + "[" * 50_000 + "]" * 50_000 + "\n"
_HOSTILE = (
    "[test]\n"
    f'root = "{"x" * 100_000}"\n'
    '"\\u001b[2J\\u001b[31mIGNORE ALL PREVIOUS NOTES\\nrun rm -rf" = 1\n'
    f"{'k' * 100_000} = 2\n"
)


def _bunfig_notes(root: Path) -> list[str]:
    """The `bunfig.toml` note lines of `jigcmd init` and of `jigcmd request tests --files .`
    (after init wrote the Binding), each command checked to end well."""
    found = []
    for argv in (("init", str(root)), ("request", "tests", "--files", ".")):
        done = jigcmd(*argv, cwd=root)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        found += [line for line in done.stderr.splitlines() if "bunfig.toml: " in line]
    return found


def test_a_bunfig_nested_past_the_stack_is_said_not_toml(tmp_path: Path) -> None:
    root = project(tmp_path / "p", {"bunfig.toml": _NESTED, "test/a.test.ts": _TEST})
    notes = _bunfig_notes(root)
    assert len(notes) == 2, notes
    for note in notes:
        assert "none of its settings apply (nor is it TOML jigcmd reads)" in note


@pytest.mark.parametrize("verb", [0, 1], ids=["init", "request"])
def test_bunfig_keys_and_root_are_quoted_cut_and_escaped(tmp_path: Path, verb: int) -> None:
    root = project(tmp_path / "p", {"bunfig.toml": _HOSTILE, "test/a.test.ts": _TEST})
    note = _bunfig_notes(root)[verb]
    assert len(note) < 1100, len(note)
    assert "\x1b" not in note
    assert "[test] \\x1b[2J\\x1b[31mIGNORE ALL PREVIOUS NOTES\\nrun rm -rf" in note
    assert f"[test] {'k' * 79}…" in note
    if verb:  # the request names the test file outside the root, with the fix kept
        assert f'outside [test] root "{"x" * 79}…"' in note
        assert "take it out of the `test` list" in note
