"""`jigcmd init` with no command to write names the entry point it could not take, and why,
in its refusal; the rename it suggests for a test file fits that file's name."""

from __future__ import annotations

from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd


def test_an_unusable_entry_point_alone_is_named_with_why_in_the_refusal(tmp_path: Path) -> None:
    """`"module": "src/main.mts"` and no test file: the refusal names it, the reason and
    the rename, instead of saying the project has no entry point."""
    root = project(
        tmp_path / "odd",
        {"package.json": '{"name": "odd", "module": "src/main.mts"}', "src/main.mts": ""},
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 2
    assert done.stderr == (
        f"jigcmd init: {root}: no test files (names ending in .test.ts, .test.js, .spec.ts or "
        ".spec.js) among the files it sends, and no entry point it can run: package.json "
        "\"module\" 'src/main.mts' left out: not a .ts or .js file (docs/binding.md): rename "
        "it to src/main.ts; nothing to review (write the Binding by hand: docs/binding.md); "
        "nothing written\n"
    )


def test_the_rename_hint_names_each_test_file_s_own_new_name(tmp_path: Path) -> None:
    """`Foo.Test.ts` and `bar_spec.js` (which bare `bun test` runs): the hint renames them
    to `Foo.test.ts` and `bar.spec.js`, and a `.ts` beside the `.mts` entry is named."""
    root = project(
        tmp_path / "odd",
        {
            "package.json": '{"name": "odd", "module": "src/main.mts"}',
            "src/main.mts": "",
            "src/main.ts": "",
            "test/Foo.Test.ts": "",
            "test/bar_spec.js": "",
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 2
    assert "rename them (Foo.Test.ts to Foo.test.ts, bar_spec.js to bar.spec.js) to" in done.stderr
    assert "e.g. x.test.tsx" not in done.stderr
    assert (
        "no entry point it can run: package.json \"module\" 'src/main.mts' left out: not a "
        ".ts or .js file (docs/binding.md): src/main.ts is one, name it instead; nothing"
    ) in done.stderr
