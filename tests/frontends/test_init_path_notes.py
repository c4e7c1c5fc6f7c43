"""What `jigcmd init` says of a test file it cannot review, and of an import it left out.

A test file outside the path grammar is told which character, and the name to rename it
to, not that its suffix is wrong; a test importing from a `node_modules/` directory that
was left out is named, with where to move what it imports.
"""

from __future__ import annotations

from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init_import_notes import init_notes


def test_a_test_path_with_a_space_is_told_the_character_and_the_new_name(tmp_path: Path) -> None:
    """`test/a b.test.ts` ends in .test.ts: the first line names the space, the path
    grammar and the name to rename it to, never the suffix."""
    root = project(
        tmp_path / "sp",
        {"package.json": '{"name":"sp"}', "test/a b.test.ts": "", "test/ok.test.ts": ""},
    )
    first = init_notes(root)[0]
    assert "ends in .test.ts" not in first
    assert first == (
        "1 file bare `bun test` runs left out of the commands: test/a b.test.ts (' ', U+0020): "
        "a Binding's path holds only ASCII letters, digits, '_', '.', '/' and '-' "
        "(docs/binding.md); rename it (test/a b.test.ts to test/a-b.test.ts) to have it reviewed"
    )


def test_paths_with_non_ascii_or_spaced_directories_get_ascii_names(tmp_path: Path) -> None:
    """An accent and an emoji, a spaced directory, and a wrong suffix beside them: each
    reason on its own line, the grammar's first."""
    root = project(
        tmp_path / "weird",
        {
            "package.json": '{"name":"weird"}',
            "test/émoji-🚀.test.ts": "",
            "test/my tests/spaced.test.ts": "",
            "test/Foo.Test.ts": "",
            "test/pad.test.ts": "",
        },
    )
    grammar, suffix = init_notes(root)[:2]
    assert grammar == (
        "2 files bare `bun test` runs left out of the commands: test/my tests/spaced.test.ts "
        "(' ', U+0020), test/émoji-🚀.test.ts ('é', U+00E9): a Binding's path holds only "
        "ASCII letters, digits, '_', '.', '/' and '-' (docs/binding.md); rename them "
        "(test/my tests/spaced.test.ts to test/my-tests/spaced.test.ts, test/émoji-🚀.test.ts "
        "to test/emoji.test.ts) to have them reviewed"
    )
    assert suffix.startswith("1 file bare `bun test` runs left out of the commands: ")
    assert "test/Foo.Test.ts: a Binding's test path is a file whose name ends in .test.ts" in (
        suffix
    )


def test_an_import_from_a_left_out_node_modules_directory_is_named_with_the_move(
    tmp_path: Path,
) -> None:
    """The tester's vend: test/v.test.ts imports `../lib/node_modules/strpad/index.ts`,
    never sent: the left-out note names the test, the path and where to move it."""
    root = project(
        tmp_path / "vend",
        {
            "package.json": '{"name":"vend"}',
            "lib/node_modules/strpad/index.ts": "export const strpad = (s: string) => s;\n",
            "node_modules/leftpad/index.js": "module.exports = (s) => s;\n",
            "test/v.test.ts": (
                'import { strpad } from "../lib/node_modules/strpad/index.ts";\n'
                'import leftpad from "leftpad";\n'
            ),
        },
    )
    (note,) = [line for line in init_notes(root) if line.startswith("left out of the candidate")]
    assert note.startswith(
        "left out of the candidate: lib/node_modules/, node_modules/ (never part of a "
        "candidate; test/v.test.ts imports lib/node_modules/strpad/index.ts, left out: move "
        "lib/node_modules/strpad/ out of node_modules/ (to lib/vendor/strpad/, say) and import "
        "it from there)"
    )
