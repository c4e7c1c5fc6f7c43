"""`jigcmd run`'s dependency note says no import fails that the run then shows passing: Node
built-ins, `vitest` and `@jest/globals` in a test, a package the test mocks by name; and
it looks for a workspace member's package where `bun install` linked it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.command.test_scaffold import project
from tests.test_cli_run import jigcmd_cli, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture: its doctor check says whether runs can be made

_FILES = {
    "package.json": (
        '{"name": "served", "dependencies": {"events": "3", "pg": "8"}, '
        '"devDependencies": {"vitest": "1", "@jest/globals": "29"}}'
    ),
    "src/repo.ts": (
        'import { EventEmitter } from "events";\nimport pg from "pg";\n'
        "export const bus = new EventEmitter();\n"
        "export const count = async () => (await new pg.Client().query()).rows[0].n;\n"
    ),
    "test/repo.test.ts": (
        'import { test, expect, mock } from "bun:test";\n'
        'mock.module("pg", () => ({ default: { Client: class { query = async () => '
        "({ rows: [{ n: 42 }] }) } } }));\n"
        'test("count", async () => {\n'
        '  const { count } = await import("../src/repo.ts");\n'
        "  expect(await count()).toBe(42);\n});\n"
    ),
    "test/vi.test.ts": (
        'import { describe, it, expect, vi } from "vitest";\n'
        'describe("vi", () => { it("fn", () => { const f = vi.fn(); f(1); '
        "expect(f).toHaveBeenCalledWith(1); }); });\n"
    ),
    "test/jest.test.ts": (
        'import { test, expect, jest } from "@jest/globals";\n'
        'test("jest", () => { expect(jest.fn()()).toBeUndefined(); });\n'
    ),
}


def _run(root: Path, tmp_path: Path, command: str = "tests") -> tuple[list[str], str]:
    """`init`, `lock`, then `run COMMAND`: the dependency notes and the `tests:` line."""
    assert jigcmd_cli("init", str(root)).returncode == 0
    binding = str(root / ".jig" / "binding.toml")
    jigcmd_cli("lock", "--binding", binding, check=True)
    state = str(tmp_path / "state")
    done = jigcmd_cli(
        "run", "--state-dir", state, "--binding", binding, command, "--files", str(root)
    )
    notes = [line for line in done.stderr.splitlines() if "package.json declares" in line]
    (tests,) = [line for line in done.stdout.splitlines() if line.startswith("tests:")]
    return notes, tests


def test_no_note_says_an_import_fails_that_bun_test_serves(lock: Path, tmp_path: Path) -> None:
    """The tester's builtin22, vitest23 and mockdep12 in one project: every test passes
    with no node_modules/, and the one note names `pg` without saying it fails and without
    a `bun build`, which would put the real `pg` past the mock."""
    notes, tests = _run(project(tmp_path / "served", dict(_FILES)), tmp_path)
    assert tests.startswith("tests:      3 run, 3 passed, 0 failed"), tests
    (note,) = notes
    assert "declares 1 dependency (pg: src/repo.ts) that the files of `tests` import" in note
    assert "pg is replaced by name in test/repo.test.ts (mock.module)" in note
    assert "do not bundle a test that loads it" in note
    assert "fail" not in note and "bun build" not in note
    assert "events" not in note and "vitest" not in note and "@jest/globals" not in note


def test_a_workspace_members_package_is_found_in_its_own_node_modules(
    lock: Path, tmp_path: Path
) -> None:
    """`bun install` linked `@acme/core` in apps/cli/node_modules/: the bundling example is
    offered as it is, not as needing `bun install` first."""
    root = project(
        tmp_path / "mono5",
        {
            "package.json": '{"name": "mono", "workspaces": ["packages/*", "apps/*"]}',
            "packages/core/package.json": '{"name": "@acme/core", "main": "index.ts"}',
            "packages/core/index.ts": "export const one = 1;\n",
            "apps/cli/package.json": (
                '{"name": "cli", "dependencies": {"@acme/core": "workspace:*"}}'
            ),
            "apps/cli/test/main.test.ts": (
                'import { test } from "bun:test";\nimport { one } from "@acme/core";\n'
                'test("one", () => {});\n'
            ),
        },
    )
    link = root / "apps" / "cli" / "node_modules" / "@acme" / "core"
    link.parent.mkdir(parents=True)
    os.symlink("../../../../packages/core", link)
    (note,), _ = _run(root, tmp_path)
    assert (
        "or bundle on the host, `bun build apps/cli/test/main.test.ts --outdir bundled "
        "--target bun --external bun:test --minify`, and name the bundle instead"
    ) in note
    assert "not there now" not in note


def test_a_mock_of_a_subpath_is_not_said_to_serve_the_package(lock: Path, tmp_path: Path) -> None:
    """The reviewer's mocksub: the test mocks `pg/lib/client`, src/repo.ts imports `pg`,
    and the run fails `Cannot find package 'pg'`: the note says that import fails, as it
    does, and names no mock."""
    files = {
        "package.json": '{"name": "mocksub", "dependencies": {"pg": "8"}}',
        "src/repo.ts": 'import pg from "pg";\nexport const countUsers = () => new pg.Client();\n',
        "test/repo.test.ts": (
            'import { test, expect, mock } from "bun:test";\n'
            'mock.module("pg/lib/client", () => ({ default: class {} }));\n'
            'test("countUsers", async () => {\n'
            '  const { countUsers } = await import("../src/repo.ts");\n'
            '  expect(typeof countUsers).toBe("function");\n});\n'
        ),
    }
    notes, tests = _run(project(tmp_path / "mocksub", files), tmp_path)
    assert tests.startswith("tests:      1 run, 0 passed, 1 failed"), tests
    (note,) = notes
    assert "declares 1 dependency (pg: src/repo.ts) that the files of `tests` import" in note
    assert "so those imports fail" in note and "vendor it into the project" in note
    assert "replaced by name" not in note, note
