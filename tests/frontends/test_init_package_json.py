"""`jigcmd init` reads package.json as Bun does: comments and trailing commas are no reason to
take it for `{}`, and one it cannot read is named on stderr with why."""

from __future__ import annotations

from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

_JSONC = """{
  // the CLI entry
  "name": "jsonc-demo", /* as published */
  "module": "src/main.ts",
  "dependencies": { "ms": "^2.1.3", },
}
"""


def test_a_package_json_with_comments_and_trailing_commas_is_read(tmp_path: Path) -> None:
    """Bun reads it: `start` is its module, the Flow package its name, and the dependency
    note names the package; nothing says the file was not read."""
    root = project(
        tmp_path / "dir-name",
        {
            "package.json": _JSONC,
            "src/main.ts": 'import ms from "ms";\nconsole.log(ms(1000));\n',
            "test/ms.test.ts": 'import { test } from "bun:test";\ntest("t", () => {});\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "  start    bun src/main.ts ARGS…" in done.stdout
    assert f"{root}/.jig/flows/jsonc-demo " in done.stdout
    assert "package.json declares 1 dependency (ms: src/main.ts)" in done.stderr
    assert "not read" not in done.stderr


def test_a_package_json_that_is_not_json_even_so_is_named_with_why(tmp_path: Path) -> None:
    """One stderr line names the file and the reason; the tests are still a command."""
    root = project(
        tmp_path / "app",
        {
            "package.json": '{\n  "name": "app",\n  "module": "main.ts" "bin": "x"\n}\n',
            "main.ts": "console.log(1)\n",
            "test/a.test.ts": "",
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "package.json is not read" in line]
    assert said == [
        f"jigcmd init: {root}: package.json is not read: not the JSON jigcmd reads (JSON "
        "with the comments, trailing commas and white space Bun allows; Bun may read more): "
        "malformed JSON: expected ',' or '}' (byte 41); no entry point, workspace or "
        "dependency is taken from it"
    ]


def test_a_package_json_bun_reads_but_jigcmd_does_not_is_not_called_unreadable(
    tmp_path: Path,
) -> None:
    """Single quotes: Bun reads them, so the line says what jigcmd reads, not that Bun cannot."""
    root = project(
        tmp_path / "app",
        {"package.json": "{'name': 'app'}\n", "main.ts": "console.log(1)\n", "test/a.test.ts": ""},
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "package.json is not read" in line]
    assert said == [
        f"jigcmd init: {root}: package.json is not read: not the JSON jigcmd reads (JSON "
        "with the comments, trailing commas and white space Bun allows; Bun may read more): "
        "malformed JSON: object keys must be strings (byte 1); no entry point, workspace or "
        "dependency is taken from it"
    ]


def test_a_bin_named_past_eight_characters_keeps_the_command_list_in_columns(
    tmp_path: Path,
) -> None:
    """The tester's cjs16: a `bin` string takes the package's name, `legacy-cjs`; every
    command's `bun` starts in one column, past the longest name."""
    root = project(
        tmp_path / "cjs16",
        {
            "package.json": '{"name": "legacy-cjs", "main": "lib/index.js", "bin": "lib/cli.js"}',
            "lib/index.js": "module.exports = 1;\n",
            "lib/cli.js": "console.log(1);\n",
            "test/index.test.js": 'const { test } = require("bun:test");\ntest("t", () => {});\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    listed = [line for line in done.stdout.splitlines() if line.endswith(("ARGS…", ".js"))]
    assert listed == [
        "  tests      bun test test/index.test.js",
        "  start      bun lib/index.js ARGS…",
        "  legacy-cjs bun lib/cli.js ARGS…",
    ]
