"""`jigcmd init`'s dependency note looks for a package as Bun resolves it: from the importing
file's directory up (a workspace member's own node_modules/), and not at all for what Bun
serves with no node_modules/ (a Node built-in; under `bun test`, `vitest` and
`@jest/globals`); a package a test mocks by name is never offered for bundling."""

from __future__ import annotations

import os
from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

_DECLARES = "package.json declares"


def _note(root: Path) -> str | None:
    """The dependency note `init` prints for `root` (None: none), after it succeeded."""
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if _DECLARES in line]
    assert len(notes) <= 1, notes
    return notes[0] if notes else None


def _workspace(root: Path) -> Path:
    """The tester's mono5: `apps/cli` imports the workspace package `@acme/core`, which
    `bun install` linked in apps/cli/node_modules/ (the root's holds only `.bun`)."""
    project(
        root,
        {
            "package.json": '{"name": "mono", "workspaces": ["packages/*", "apps/*"]}',
            "packages/core/package.json": '{"name": "@acme/core", "main": "src/index.ts"}',
            "packages/core/src/index.ts": "export const sum = (a: number, b: number) => a + b;\n",
            "apps/cli/package.json": (
                '{"name": "@acme/cli", "dependencies": {"@acme/core": "workspace:*"}}'
            ),
            "apps/cli/test/main.test.ts": (
                'import { test, expect } from "bun:test";\nimport { sum } from "@acme/core";\n'
                'test("sum", () => expect(sum(1, 2)).toBe(3));\n'
            ),
            "node_modules/.bun/.keep": "",
        },
    )
    link = root / "apps" / "cli" / "node_modules" / "@acme" / "core"
    link.parent.mkdir(parents=True)
    os.symlink("../../../../packages/core", link)
    return root


def test_a_workspace_members_own_node_modules_counts_as_installed(tmp_path: Path) -> None:
    """Bun resolves `@acme/core` from apps/cli/node_modules/: the bundling example is
    offered as it runs, not said to need `bun install` first."""
    note = _note(_workspace(tmp_path / "mono5"))
    assert note is not None
    assert (
        "or bundle on the host, `bun build apps/cli/test/main.test.ts --outdir bundled "
        "--target bun --external bun:test --minify`, and name the bundle instead "
        "(docs/binding.md#dependencies-and-workspaces)"
    ) in note
    assert "not there now" not in note and "bun install" not in note


def test_a_sibling_members_node_modules_is_not_where_bun_looks(tmp_path: Path) -> None:
    """Linked only in packages/core/node_modules/: Bun resolving from apps/cli never looks
    there, so `bun install` is still what the example needs."""
    root = _workspace(tmp_path / "mono5")
    moved = root / "packages" / "core" / "node_modules" / "@acme"
    moved.mkdir(parents=True)
    os.rename(root / "apps" / "cli" / "node_modules" / "@acme" / "core", moved / "core")
    note = _note(root)
    assert note is not None
    assert "once `bun install` has put @acme/core in its node_modules/ (not there now" in note


def test_node_builtin_names_need_no_install(tmp_path: Path) -> None:
    """`events` and `buffer` declared as polyfills load Bun's own modules: no note; the
    polyfill's own idiom `buffer/` does need the package."""
    files = {
        "package.json": '{"name": "b", "dependencies": {"events": "3", "buffer": "6"}}',
        "src/index.ts": (
            'import { EventEmitter } from "events";\nimport { Buffer } from "buffer";\n'
            'import { readFile } from "fs/promises";\nexport class Bus extends EventEmitter {}\n'
        ),
        "test/index.test.ts": 'import { test } from "bun:test";\nimport "../src/index.ts";\n',
    }
    assert _note(project(tmp_path / "builtin22", files)) is None
    files["src/index.ts"] += 'import { Buffer as B } from "buffer/";\n'
    note = _note(project(tmp_path / "slash", files))
    assert note is not None and "1 dependency (buffer: src/index.ts)" in note, note


def test_vitest_and_jest_globals_in_what_only_tests_load_need_no_install(tmp_path: Path) -> None:
    """`bun test` maps both to bun:test in a test and in a helper it imports: no note."""
    files = {
        "package.json": '{"name": "v", "devDependencies": {"vitest": "1", "@jest/globals": "29"}}',
        "test/helper.ts": 'import { expect } from "vitest";\nexport const one = expect(1);\n',
        "test/a.test.ts": (
            'import { it } from "vitest";\nimport "./helper.ts";\nit("a", () => {});\n'
        ),
        "test/b.test.ts": 'import { test } from "@jest/globals";\ntest("b", () => {});\n',
    }
    assert _note(project(tmp_path / "vitest23", files)) is None


def test_vitest_imported_by_an_entry_point_is_named(tmp_path: Path) -> None:
    """`bun src/main.ts` maps nothing: its `vitest` import fails and is said to."""
    files = {
        "package.json": '{"name": "v", "module": "src/main.ts", "dependencies": {"vitest": "1"}}',
        "src/main.ts": 'import { expect } from "vitest";\nconsole.log(expect);\n',
        "test/a.test.ts": 'import { it } from "vitest";\nit("a", () => {});\n',
    }
    note = _note(project(tmp_path / "entry", files))
    assert note is not None
    assert "1 dependency (vitest: src/main.ts) that the commands' files import" in note
    assert "so those imports fail" in note


def test_a_package_only_tests_load_and_a_test_mocks_is_hedged_and_never_bundled(
    tmp_path: Path,
) -> None:
    """The tester's mockdep12 without its entry point: the test replaces `pg` with
    mock.module before importing the code under test, so nothing says the import fails,
    and no `bun build` is offered (it would inline the real pg past the mock)."""
    files = {
        "package.json": '{"name": "m", "dependencies": {"pg": "8"}}',
        "src/repo.ts": 'import pg from "pg";\nexport const client = () => new pg.Client();\n',
        "test/repo.test.ts": (
            'import { test, mock } from "bun:test";\n'
            'mock.module("pg", () => ({ default: { Client: class {} } }));\n'
            'test("c", async () => { await import("../src/repo.ts"); });\n'
        ),
    }
    note = _note(project(tmp_path / "mockdep12", files))
    assert note is not None
    assert note.endswith(
        "package.json declares 1 dependency (pg: src/repo.ts) that the commands' files import: "
        "none is installed when a command runs (node_modules/ is never sent, nothing is "
        "installed, there is no network), but pg is replaced by name in test/repo.test.ts "
        "(mock.module): an import of it that runs after that call gets the mock, one that "
        "runs before it (a static import in the test file, or in a file the test imports "
        "statically) finds no package; do not bundle a test that loads it: a bundle holds "
        "the real package, which the mock then no longer replaces "
        "(docs/binding.md#dependencies-and-workspaces)"
    )
    assert "fail" not in note and "bun build" not in note


def test_a_mocked_package_an_entry_point_loads_is_bundled_only_for_the_entry_point(
    tmp_path: Path,
) -> None:
    """The tester's mockdep12 as it is: `start` runs src/repo.ts, whose `pg` import does
    fail; the bundling example is that entry point, never the test that mocks `pg`."""
    files = {
        "package.json": '{"name": "m", "main": "src/repo.ts", "dependencies": {"pg": "8"}}',
        "src/repo.ts": 'import pg from "pg";\nexport const client = () => new pg.Client();\n',
        "test/repo.test.ts": (
            'import { test, mock } from "bun:test";\nmock.module("pg", () => ({}));\n'
            'test("c", async () => { await import("../src/repo.ts"); });\n'
        ),
        "node_modules/pg/index.js": "module.exports = {};\n",
    }
    note = _note(project(tmp_path / "mockdep12", files))
    assert note is not None
    assert "so those imports fail" in note
    assert "`bun build src/repo.ts --outdir bundled" in note
    assert "bun build test/repo.test.ts" not in note
    assert "pg is replaced by name in test/repo.test.ts (mock.module)" in note


def test_a_test_importing_vitest_is_bundled_once_it_imports_bun_test(tmp_path: Path) -> None:
    """A test importing `zod` and `vitest`: a bundle keeps `vitest` for `bun test` to map,
    which it never does in a bundle, so the example says to import bun:test first."""
    files = {
        "package.json": '{"name": "z", "dependencies": {"zod": "3", "vitest": "1"}}',
        "test/a.test.ts": (
            'import { it } from "vitest";\nimport { z } from "zod";\nit("a", () => {});\n'
        ),
        "node_modules/zod/index.js": "module.exports = {};\n",
    }
    note = _note(project(tmp_path / "zv", files))
    assert note is not None
    assert "1 dependency (zod: test/a.test.ts)" in note and "vitest:" not in note
    assert (
        "or import bun:test in place of @jest/globals and vitest in what test/a.test.ts loads "
        "(`bun test` maps them in the files it runs, never in a bundle), then bundle on the "
        "host, `bun build test/a.test.ts --outdir bundled --target bun --external bun:test "
        "--minify`, and name the bundle instead"
    ) in note


def _mocking(imported: str, mocked: str) -> dict[str, str]:
    """src/repo.ts imports `imported`; the test mocks `mocked`, then imports src/repo.ts."""
    return {
        "package.json": '{"name": "m", "dependencies": {"pg": "8"}}',
        "src/repo.ts": f'import pg from "{imported}";\nexport const client = () => pg;\n',
        "test/repo.test.ts": (
            'import { test, mock } from "bun:test";\n'
            f'mock.module("{mocked}", () => ({{ default: {{}} }}));\n'
            'test("c", async () => { await import("../src/repo.ts"); });\n'
        ),
    }


def test_a_mock_serves_only_the_specifier_it_names(tmp_path: Path) -> None:
    """The reviewer's mocksub: Bun's mock.module replaces the one specifier it is given, so
    a mock of `pg/lib/client` leaves `import "pg"` failing (`Cannot find package 'pg'`), and
    a mock of `pg` leaves `import "pg/lib/client"` failing; the note says those imports
    fail and offers a fix, and names no mock. A mock of the very specifier imported hedges."""
    for imported, mocked in (("pg", "pg/lib/client"), ("pg/lib/client", "pg")):
        note = _note(project(tmp_path / f"sub{len(imported)}", _mocking(imported, mocked)))
        assert note is not None
        assert "1 dependency (pg: src/repo.ts)" in note and "so those imports fail" in note
        assert "vendor it into the project" in note and "`bun build" in note
        assert "replaced by name" not in note and "mock.module" not in note, note
    note = _note(project(tmp_path / "same", _mocking("pg/lib/client", "pg/lib/client")))
    assert note is not None
    assert "pg/lib/client is replaced by name in test/repo.test.ts (mock.module)" in note
    assert "fail" not in note and "bun build" not in note
    both = _mocking("pg/lib/client", "pg/lib/client")
    both["src/repo.ts"] += 'import "pg";\n'
    note = _note(project(tmp_path / "both", both))
    assert note is not None and "so those imports fail" in note
    assert "; pg/lib/client is replaced by name in test/repo.test.ts (mock.module)" in note


def test_a_subpath_of_vitest_is_not_mapped(tmp_path: Path) -> None:
    """`bun test` maps `vitest` and `@jest/globals` themselves, never a subpath of either
    (`vitest/config`: `Cannot find module`): a test importing one needs the package."""
    files = {
        "package.json": '{"name": "v", "devDependencies": {"vitest": "1", "@jest/globals": "29"}}',
        "test/a.test.ts": (
            'import { it } from "vitest";\nimport { defineConfig } from "vitest/config";\n'
            'it("a", () => {});\n'
        ),
        "test/b.test.ts": 'import { it } from "vitest";\nit("b", () => {});\n',
        "test/c.test.ts": 'import { test } from "@jest/globals/build";\ntest("c", () => {});\n',
    }
    note = _note(project(tmp_path / "vsub", files))
    assert note is not None
    assert (
        "2 dependencies (@jest/globals: test/c.test.ts; vitest: test/a.test.ts) that the "
        "commands' files import"
    ) in note, note
    assert "so those imports fail" in note
