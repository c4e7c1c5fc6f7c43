"""The left-out note names a file a candidate file imports that no `--exclude` sends, a path
starting with '.' or a binary file, with the importer and what to do instead."""

from __future__ import annotations

from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

_PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(16)


def test_an_imported_file_in_a_top_level_dot_directory_is_named_with_where_to_move_it(
    tmp_path: Path,
) -> None:
    """The tester's app9: `__tests__/format.test.ts` imports `../.config/defaults.ts`,
    which a candidate path cannot hold: the note names both and the move, not only the
    directory left out; `request` says the same."""
    root = project(
        tmp_path / "app9",
        {
            ".env": "PORT=3000\n",
            ".config/defaults.ts": 'export const defaults = { greeting: "hello" };\n',
            "package.json": '{"name": "app9"}',
            "__tests__/format.test.ts": (
                'import { test, expect } from "bun:test";\n'
                'import { defaults } from "../.config/defaults.ts";\n'
                'test("d", () => expect(defaults.greeting).toBe("hello"));\n'
            ),
        },
    )
    said = (
        ".config/, .env (a candidate path may not start with '.'; __tests__/format.test.ts "
        "imports .config/defaults.ts, left out: move .config/ to a path that does not start "
        "with '.' (config/, say) and import it from there; Bun loads no .env here (it runs "
        "with --no-env-file), so what the tests read from process.env that a .env file sets "
        "is unset: give it a default in code, or set it in a setup module the tests import)"
    )
    done = jigcmd("request", "tests", "--files", str(root))
    assert done.returncode == 0, done.stderr
    assert said in done.stderr
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert said in done.stderr


def test_an_imported_binary_file_is_named_as_one_no_candidate_can_send(tmp_path: Path) -> None:
    """The tester's bin24: `src/assets.ts` imports `../assets/logo.png` (Bun's file loader);
    the note names the importer, the file, and that it must be made another way."""
    root = project(
        tmp_path / "bin24",
        {
            "package.json": '{"name": "bin24"}',
            "src/assets.ts": 'import logo from "../assets/logo.png";\nexport const at = logo;\n',
            "test/assets.test.ts": (
                'import { test, expect } from "bun:test";\n'
                'import { at } from "../src/assets.ts";\n'
                'test("logo", () => expect(at.length > 0).toBe(true));\n'
            ),
        },
    )
    (root / "assets").mkdir()
    (root / "assets" / "logo.png").write_bytes(_PNG)
    (root / "assets" / "icon.png").write_bytes(_PNG)
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert (
        "assets/icon.png, assets/logo.png (binary; src/assets.ts imports assets/logo.png, left "
        "out: a binary file cannot be sent (a candidate carries text only): have the command "
        "generate it when it runs, or use a text form of it)"
    ) in done.stderr


def test_a_binary_file_nothing_imports_is_only_named(tmp_path: Path) -> None:
    """No candidate file imports the image: the note names it left out, as before."""
    root = project(tmp_path / "app", {"test/a.test.ts": 'import "./b";\n'})
    (root / "logo.png").write_bytes(_PNG)
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "logo.png (binary); the candidate: 1 file" in done.stderr
