"""`jigcmd init` as a person runs it: the Binding written, the next two commands, and refusals."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.command.test_scaffold import project


def jigcmd(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        capture_output=True, text=True, timeout=60, check=False, cwd=cwd,
    )  # fmt: skip


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return project(
        tmp_path / "app",
        {
            "package.json": '{"name": "app", "module": "main.ts"}',
            "main.ts": "console.log(1)",
            "test/main.test.ts": "",
            "logo.png": "\x00binary",
        },
    )


def test_init_writes_the_binding_and_prints_the_next_two_commands_which_work(app: Path) -> None:
    """The printed `lock` admits the Binding as written; the `run` line names tests and DIR."""
    done = jigcmd("init", str(app))
    assert done.returncode == 0, done.stderr
    binding = app / ".jig" / "binding.toml"
    lines = done.stdout.splitlines()
    assert lines[0] == f"jigcmd init: wrote {binding} with 2 reviewed commands:"
    assert lines[-2:] == [
        f"  jigcmd lock --binding {binding}",
        f"  jigcmd run --binding {binding} tests --files {app}",
    ]
    assert "logo.png (binary)" in done.stderr
    argv = shlex.split(lines[-2])
    argv[0] = str(Path(sys.executable).parent / "jigcmd")
    locked = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert locked.returncode == 0, locked.stderr
    assert (app / ".jig" / "jigcmd.lock").is_file()


def test_a_second_init_overwrites_nothing(app: Path) -> None:
    """Status 2 naming the files that exist; the reviewed Binding is untouched."""
    assert jigcmd("init", str(app)).returncode == 0
    binding = app / ".jig" / "binding.toml"
    binding.write_text(binding.read_text() + "# reviewed\n")
    done = jigcmd("init", str(app))
    assert done.returncode == 2
    assert f"{binding}" in done.stderr and "overwrites nothing" in done.stderr
    assert binding.read_text().endswith("# reviewed\n")


def test_excludes_given_to_init_reappear_in_the_run_line(app: Path) -> None:
    """What init left out, run must leave out too: the printed command carries the globs."""
    done = jigcmd("init", str(app), "--exclude", "/docs/", "--exclude", "*.snap")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].endswith(
        f"--files {app} --exclude /docs/ --exclude '*.snap'"
    )


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"README.md": "hi"}, "no test files"),
        ({"a.test.ts": "", "b c.ts": ""}, "b c.ts: path contains forbidden character ' '"),
    ],
)
def test_a_project_init_cannot_serve_is_refused_with_nothing_written(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    """Nothing to review, or a candidate that breaks a rule: status 2, no .jig/."""
    root = project(tmp_path / "p", files)
    done = jigcmd("init", str(root))
    assert done.returncode == 2
    assert message in done.stderr and "nothing written" in done.stderr
    assert not (root / ".jig").exists()


def test_init_of_a_directory_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    """No traceback: the directory named, status 2."""
    done = jigcmd("init", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr == f"jigcmd init: {tmp_path / 'nope'}: no such directory; nothing written\n"


def test_init_format_ts_writes_the_reference_layout_naming_the_same_commands(app: Path) -> None:
    """--format ts: .jig/jig.ts, .jig/bindings/command.ts with defineBinding, the package;
    the commands are the TOML form's (the envelope test proves one digest)."""
    done = jigcmd("init", "--format", "ts", str(app))
    assert done.returncode == 0, done.stderr
    binding = app / ".jig" / "bindings" / "command.ts"
    assert done.stdout.splitlines()[0] == f"jigcmd init: wrote {binding} with 2 reviewed commands:"
    text = binding.read_text()
    assert "import { defineBinding } from '@jigging/jig'" in text
    assert 'package: "flows/app",' in text and '"start": { run: "main.ts" },' in text
    assert "discover('./bindings')" in (app / ".jig" / "jig.ts").read_text()
    manifest = (app / ".jig" / "flows" / "app" / "FLOW.md").read_text()
    assert "(`../../bindings/command.ts`)" in manifest
    assert f"and the Flow package {app / '.jig' / 'flows' / 'app'} (" in done.stdout
    again = jigcmd("init", "--format", "ts", str(app))
    assert again.returncode == 2 and "jig.ts" in again.stderr


def test_init_names_the_snapshot_files_and_tests_which_cannot_pass(tmp_path: Path) -> None:
    """Bun's `.snap` files (sent or left out) and `toMatchSnapshot` callers, with the limit."""
    app = project(
        tmp_path / "app",
        {
            "package.json": '{"name": "app", "module": "main.ts"}',
            "main.ts": "export const one = 1;",
            "test/main.test.ts": (
                'import { expect, test } from "bun:test";\n'
                'test("s", () => { expect({ a: 1 }).toMatchSnapshot(); });\n'
            ),
            "test/__snapshots__/main.test.ts.snap": "exports[`s 1`] = `{ a: 1 }`;\n",
        },
    )
    done = jigcmd("init", str(app), "--exclude", "*.snap")
    assert done.returncode == 0, done.stderr
    assert (
        f"jigcmd init: {app}: snapshot tests cannot pass in the envelope: "
        "test/__snapshots__/main.test.ts.snap (snapshot files); test/main.test.ts "
        "(call toMatchSnapshot). The candidate tree is read-only"
    ) in done.stderr


def test_init_says_nothing_of_snapshots_for_a_project_without_any(app: Path) -> None:
    """No `.snap` file and no matcher: no note."""
    done = jigcmd("init", str(app))
    assert done.returncode == 0, done.stderr
    assert "snapshot" not in done.stderr


def test_init_says_what_bun_would_have_that_the_envelope_has_not(tmp_path: Path) -> None:
    """A bunfig.toml Bun will not read, declared dependencies and workspace packages that
    will not be installed, and an entry point left out: each is one line on stderr."""
    root = project(
        tmp_path / "p",
        {
            "package.json": '{"name": "p", "main": "src/index.ts", "bin": "src/cli.ts",'
            ' "dependencies": {"zod": "^3"}, "devDependencies": {"@types/bun": "1"}}',
            "packages/web/package.json": '{"dependencies": {"@mono/core": "workspace:*"}}',
            "packages/web/index.ts": 'export { core } from "@mono/core/src"',
            "bunfig.toml": '[test]\npreload = ["./test/setup.ts"]\n',
            "src/index.ts": "import { z } from 'zod'",
            "test/a.test.ts": 'import "../src/index.ts";\nimport "../packages/web/index.ts";\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert f"jigcmd init: {root}: bunfig.toml: Bun runs without it" in done.stderr
    assert "its settings ([test] preload) do not apply" in done.stderr
    assert (
        f"jigcmd init: {root}: package.json declares 1 dependency (zod: src/index.ts) and 1 "
        "workspace package (@mono/core: packages/web/index.ts) that the commands' files "
        "import: none is installed when a command runs"
    ) in done.stderr
    # The bundling example is for each command's file that reaches an import, ready to paste
    # (the entry point's without `--external bun:test`).
    assert (
        "`bun build test/a.test.ts --outdir bundled --target bun --external bun:test --minify "
        "&& bun build src/index.ts --outdir bundled --target bun --minify`"
    ) in done.stderr
    assert "docs/binding.md#dependencies-and-workspaces" in done.stderr
    assert (
        f"jigcmd init: {root}: package.json \"bin\" 'p' 'src/cli.ts' left out: not among the "
        "files it sends (missing, left out or ignored)"
    ) in lines


def test_init_names_no_declared_package_that_no_file_imports(tmp_path: Path) -> None:
    """A template's devDependencies (bun-types, typescript, eslint) nothing imports: no
    warning, though a `/// <reference types>` and a commented-out import name them."""
    root = project(
        tmp_path / "t",
        {
            "package.json": '{"name": "t", "devDependencies": {"bun-types": "1",'
            ' "typescript": "5", "eslint": "9"}, "peerDependencies": {"tsup": "8"}}',
            "src/counter.ts": '/// <reference types="bun-types" />\n'
            '// import ts from "typescript"\nexport const one = 1;\n',
            "src/counter.test.ts": 'import { one } from "./counter";\nimport "bun:test";\n'
            'import type { Linter } from "eslint";\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "declares" not in done.stderr


def test_init_says_a_computed_import_may_load_what_is_not_installed(tmp_path: Path) -> None:
    """No literal import of a declared package, but an `import(name)`: the file is named,
    never a false all-clear."""
    root = project(
        tmp_path / "t",
        {
            "package.json": '{"name": "t", "dependencies": {"left-pad": "1"}}',
            "src/load.test.ts": "const name = 'left-pad';\nawait import(name);\n",
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert (
        f"jigcmd init: {root}: package.json declares 1 package (left-pad) no file imports by "
        "name, but src/load.test.ts computes what it imports"
    ) in done.stderr


def test_init_says_a_tsx_test_with_markup_needs_it_moved_not_only_renamed(
    tmp_path: Path,
) -> None:
    """`render(<Teaser>…</Teaser>)` is a syntax error once renamed to .test.ts: the note says
    so for that file, and not for a .tsx test without markup (a generic is no markup)."""
    root = project(
        tmp_path / "ui",
        {
            "teaser.test.tsx": 'import { Teaser } from "./teaser";\n'
            'test("t", () => { render(<Teaser>Test Content</Teaser>); render(<Teaser />); });\n',
            "plain.test.tsx": "const a = new Map<string, number>(); // </b>\n"
            'const s = "<b>x</b>";\n',
            "teaser.tsx": "export const Teaser = () => null;\n",
            "ok.test.ts": "",
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert (
        "2 files bare `bun test` runs left out of the commands: plain.test.tsx, teaser.test.tsx: "
    ) in done.stderr
    assert (
        "to have them reviewed; but teaser.test.tsx holds JSX markup, a syntax error in a .ts "
        'file (`error: Expected ")"`): move the markup into a .tsx module the test imports '
        "(a function returning the element), then rename\n"
    ) in done.stderr


def test_init_makes_workspace_members_bin_scripts_commands_without_collisions(
    tmp_path: Path,
) -> None:
    """Each member's `bin` runs from its directory's path, under its own name, or under the
    member's name and its own when that is taken; a nested package.json that is no member
    (a fixture) gives no command. The Binding written is one `lock` admits."""
    root = project(
        tmp_path / "mono",
        {
            "package.json": '{"name": "mono", "workspaces": {"packages": ["apps/*"]}}',
            "apps/cli/package.json": '{"name": "@mono/cli", "bin": {"cli": "./cli.ts"}}',
            "apps/cli/cli.ts": "console.log(process.argv)",
            "apps/tool/package.json": '{"name": "@mono/tool", "bin": {"cli": "bin/main.js"}}',
            "apps/tool/bin/main.js": "",
            "test/fixtures/pkg/package.json": '{"bin": {"fixture": "./f.ts"}}',
            "test/fixtures/pkg/f.ts": "",
            "test/a.test.ts": "",
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    binding = root / ".jig" / "binding.toml"
    text = binding.read_text()
    assert '[commands.cli]\nrun = "apps/cli/cli.ts"' in text
    assert '[commands.tool-cli]\nrun = "apps/tool/bin/main.js"' in text
    assert "fixture" not in text
    assert "  cli      bun apps/cli/cli.ts ARGS…" in done.stdout.splitlines()
    locked = jigcmd("lock", "--binding", str(binding))
    assert locked.returncode == 0, locked.stderr


def test_init_names_no_workspace_package_tsconfig_maps_to_its_source(tmp_path: Path) -> None:
    """Once tsconfig.json's `paths` maps `@mono/core` (the note's own fix) to a candidate
    file, Bun resolves it without node_modules/, so only the package still missing is named;
    a mapping to a file the candidate lacks is not enough (Bun 1.4.2 then looks in
    node_modules/)."""
    root = project(
        tmp_path / "mono",
        {
            "package.json": '{"name": "mono", "dependencies": {"@mono/core": "workspace:*",'
            ' "@mono/ui": "workspace:*", "zod": "3"}}',
            "tsconfig.json": '{\n  // Bun reads these\n  "compilerOptions": {"paths": '
            '{"@mono/core": ["./packages/core/src/index.ts"], "@mono/ui/*": ["./ui/*"],},},\n}',
            "packages/core/src/index.ts": "export const core = 1;",
            "ui/button.ts": "export const button = 1;",
            "test/a.test.ts": 'import { core } from "@mono/core";\nimport "@mono/ui/button";\n'
            'import { z } from "zod";\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "package.json declares 1 dependency (zod: test/a.test.ts) that" in done.stderr
    assert "@mono/" not in done.stderr
    (root / "ui" / "button.ts").unlink()
    done = jigcmd("init", str(root))
    assert "1 workspace package (@mono/ui: test/a.test.ts)" in done.stderr


def test_a_project_without_a_test_file_is_told_why_it_has_no_tests_command(
    tmp_path: Path,
) -> None:
    """A fresh `bun init` (an entry point, no test): `start` alone, and stderr says why no
    `tests`; the printed `run` line names the command that exists."""
    app = project(
        tmp_path / "app",
        {"package.json": '{"name": "app", "module": "index.ts"}', "index.ts": "console.log(1)"},
    )
    done = jigcmd("init", str(app))
    assert done.returncode == 0, done.stderr
    binding = app / ".jig" / "binding.toml"
    assert done.stdout.splitlines()[0] == f"jigcmd init: wrote {binding} with 1 reviewed command:"
    assert (
        f"jigcmd init: {app}: no `tests` command: no test file (a name ending in .test.ts, "
        ".test.js, .spec.ts or .spec.js) among the files it sends; add one"
    ) in done.stderr
    assert done.stdout.splitlines()[-1] == f"  jigcmd run --binding {binding} start --files {app}"
