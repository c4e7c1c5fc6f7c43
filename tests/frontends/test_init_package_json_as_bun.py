"""`jigcmd init` reads package.json, and a source's comments, where Bun 1.4 ends them: each
case is run by the real Bun too, and the entry point both take is the same file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd
from tests.required import require_runtime

_NOT_READ = "package.json is not read"

# package.json → the file Bun runs for `bun run .` ("" for none), and whether jigcmd says
# it cannot read the file (Bun then runs nothing either).
_CASES = {
    "a // comment ends at CR": ('{"name": "demo", // c\r "main": "evil.ts"\n}\n', "evil.ts"),
    "… at U+2028": ('{"name": "demo", // c\u2028 "main": "evil.ts"\n}\n', "evil.ts"),
    "… at U+2029": ('{"name": "demo", // c\u2029 "main": "evil.ts"\n}\n', "evil.ts"),
    "… not at U+0085": ('{"name": "demo", // c\u0085 "main": "evil.ts"\n}\n', ""),
    "JavaScript's white space": (
        '{"name": "demo",\u205f\u3000\ufeff\v"main": "evil.ts"}',
        "evil.ts",
    ),
    "not U+200B": ('{"name": "demo",\u200b"main": "evil.ts"}', _NOT_READ),
    "the first of a repeated key": ('{"main": "a.ts", "name": "demo", "main": "evil.ts"}', "a.ts"),
    "a trailing comma": ('{"name": "demo", "main": "evil.ts", /* c */ }', "evil.ts"),
    "a lone comma in an array": ('{"name": "demo", "main": "evil.ts", "files": [,]}', _NOT_READ),
    "a lone comma in an object": ('{"name": "demo", "main": "evil.ts", "x": {,}}', _NOT_READ),
    "two trailing commas": ('{"name": "demo", "main": "evil.ts",,}', _NOT_READ),
}


def _bun_runs(root: Path) -> str:
    """The file `bun run .` runs in `root` ("" for none): each says its name."""
    done = subprocess.run(
        [require_runtime().path, "run", "."],
        capture_output=True, text=True, timeout=60, check=False, cwd=root,
    )  # fmt: skip
    ran = [line.removeprefix("ran ") for line in done.stdout.splitlines()]
    return ran[0] if ran else ""


@pytest.mark.parametrize(("manifest", "expected"), _CASES.values(), ids=list(_CASES))
def test_the_entry_point_is_the_one_bun_runs(tmp_path: Path, manifest: str, expected: str) -> None:
    """`start` is the file `bun run .` runs; where Bun reads no file, init says it is not read."""
    root = project(
        tmp_path / "app",
        {
            "a.ts": 'console.log("ran a.ts");\n',
            "evil.ts": 'console.log("ran evil.ts");\n',
            "test/x.test.ts": 'import { test } from "bun:test";\ntest("t", () => {});\n',
        },
    )
    (root / "package.json").write_bytes(manifest.encode("utf-8"))
    ran = _bun_runs(root)
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    start = [line.split()[2] for line in done.stdout.splitlines() if line.startswith("  start ")]
    if expected == _NOT_READ:
        assert (ran, start) == ("", [])
        assert _NOT_READ in done.stderr
    else:
        assert (ran, start) == (expected, [expected] if expected else [])
        assert _NOT_READ not in done.stderr


def test_an_import_after_a_comment_ended_by_cr_is_an_import(tmp_path: Path) -> None:
    """`// c` ended by a lone CR, then `import "ms"`: Bun loads `ms` (here from a local
    node_modules, which no candidate holds), and the dependency note names the importer."""
    root = project(
        tmp_path / "app",
        {
            "package.json": '{"name": "app", "module": "main.ts", "dependencies": {"ms": "^2"}}',
            "main.ts": '// the clock\rimport "ms";\n',
            "node_modules/ms/package.json": '{"name": "ms", "main": "index.js"}',
            "node_modules/ms/index.js": 'console.log("ran ms");\n',
            "test/x.test.ts": 'import { test } from "bun:test";\ntest("t", () => {});\n',
        },
    )
    ran = subprocess.run(
        [require_runtime().path, "main.ts"],
        capture_output=True, text=True, timeout=60, check=False, cwd=root,
    )  # fmt: skip
    assert ran.stdout == "ran ms\n", ran.stderr
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "package.json declares 1 dependency (ms: main.ts)" in done.stderr


def test_a_note_on_a_package_json_not_read_is_cut_whatever_it_quotes(tmp_path: Path) -> None:
    """An unsafe integer under a 5,000-character key: the note names the file and the rule,
    and is as long as any other note; the same key repeated is read, the first value kept."""
    key = "k" * 5_000
    root = project(
        tmp_path / "app",
        {
            "package.json": f'{{"name": "app", "{key}": 123456789012345678901234567890}}',
            "test/x.test.ts": 'import { test } from "bun:test";\ntest("t", () => {});\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if _NOT_READ in line]
    assert len(said) == 1 and "integer 123456789012345678901234567890 at '/kkk" in said[0]
    assert said[0].endswith("…; no entry point, workspace or dependency is taken from it")
    assert len(said[0]) < 1_300
    (root / "package.json").write_text(f'{{"name": "app", "{key}": 1, "{key}": 2}}')
    (root / ".jig").rename(tmp_path / "first-binding")
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert _NOT_READ not in done.stderr
