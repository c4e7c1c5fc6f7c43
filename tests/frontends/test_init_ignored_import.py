"""The left-out note names a git-ignored file a candidate file imports, and the `--exclude`
that brings it back, rather than an unrelated ignored file."""

from __future__ import annotations

from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd
from tests.gitrepo import git

_TEST = """import { expect, test } from "bun:test";
test("generated", async () => {
  expect((await import("./fixtures/generated/data.json")).default.gen).toBe(true);
});
"""


def test_an_ignored_directory_a_test_imports_is_named_with_the_exclude_that_sends_it(
    tmp_path: Path,
) -> None:
    """`test/fixtures/generated/` is ignored and a test `import()`s a file there: the note
    names the test, the file and `--exclude '!/test/fixtures/generated/'`, which sends it."""
    root = project(
        tmp_path / "app",
        {
            ".gitignore": "*.log\ntest/fixtures/generated/\n",
            "debug.log": "noise\n",
            "package.json": '{"name": "app"}',
            "test/app.test.ts": _TEST,
            "test/fixtures/generated/data.json": '{"gen": true}\n',
        },
    )
    git(root, "init", "-q")
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert (
        "debug.log, test/fixtures/generated/ (.gitignore; test/app.test.ts imports "
        "test/fixtures/generated/data.json, left out: bring it back with --exclude "
        "'!/test/fixtures/generated/')"
    ) in done.stderr
    assert "'!/debug.log'" not in done.stderr
    brought = jigcmd("init", str(root), "--exclude", "!/test/fixtures/generated/")
    assert brought.returncode == 2  # the Binding is there: the note alone is what is read
    assert "test/fixtures/generated/" not in brought.stderr
    assert "--exclude '!/debug.log'" in brought.stderr


def test_with_no_ignored_file_imported_the_note_says_how_to_bring_one_back(
    tmp_path: Path,
) -> None:
    """Nothing imports what is ignored: the note's example is its first file, as before."""
    root = project(
        tmp_path / "app",
        {".gitignore": "*.log\n", "debug.log": "noise\n", "test/a.test.ts": 'import "./b";\n'},
    )
    git(root, "init", "-q")
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "debug.log (.gitignore; bring one back with --exclude '!/debug.log')" in done.stderr
