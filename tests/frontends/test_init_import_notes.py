"""What `jigcmd init`'s dependency note says about a project's imports is true of what Bun does.

A test that reaches a declared package through a tsconfig.json `paths` alias (or `baseUrl`)
is told the import fails, not that "none is missing"; an import jigcmd cannot follow is
named as such, never taken for one that reaches nothing.
"""

from __future__ import annotations

from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

_ZOD_SCHEMA = 'import { z } from "zod";\nexport const schema = z.string();\n'
_ALIAS_TEST = (
    'import { expect, test } from "bun:test";\n'
    'import { schema } from "@/schema";\n'
    'test("parses", () => { expect(schema.parse("a")).toBe("a"); });\n'
)


def init_notes(root: Path) -> list[str]:
    """The lines `init` writes about `root`, each stripped of its `jigcmd init: DIR: `."""
    done = jigcmd("init", str(root))
    prefix = f"jigcmd init: {root}: "
    return [line[len(prefix) :] for line in done.stderr.splitlines() if line.startswith(prefix)]


def _dependency_note(root: Path) -> str:
    (note,) = [line for line in init_notes(root) if line.startswith("package.json declares")]
    return note


def test_a_package_reached_through_a_tsconfig_paths_alias_is_said_to_fail(tmp_path: Path) -> None:
    """`@/schema` is `src/schema.ts` by tsconfig.json's `paths`, and it imports `zod`: the
    test reaches zod, so the note says the import fails and never that none is missing."""
    root = project(
        tmp_path / "alias",
        {
            "package.json": '{"name":"alias","dependencies":{"zod":"^3.0.0"}}',
            "tsconfig.json": '{"compilerOptions":{"baseUrl":".","paths":{"@/*":["./src/*"]}}}',
            "src/schema.ts": _ZOD_SCHEMA,
            "test/s.test.ts": _ALIAS_TEST,
        },
    )
    note = _dependency_note(root)
    assert "none is missing" not in note
    assert note.startswith(
        "package.json declares 1 dependency (zod: src/schema.ts) that the commands' files "
        "import: none is installed when a command runs"
    )
    assert "`bun build test/s.test.ts " in note


def test_aliases_follow_the_nearest_config_its_extends_and_base_url(tmp_path: Path) -> None:
    """A package's own tsconfig.json (its `paths` relative to it), and a root one that
    `extends` a relative base setting `baseUrl` (a bare `src/…` under it): each leads to a
    file importing `zod`, as Bun 1.4.2 resolves them (`Cannot find package 'zod'`)."""
    root = project(
        tmp_path / "nested",
        {
            "package.json": '{"name":"nested","dependencies":{"zod":"^3.0.0"}}',
            "tsconfig.json": '{"extends": "./config/base.json"}',
            "config/base.json": '{"compilerOptions": {"baseUrl": "..", // the root\n}}',
            "src/schema.ts": _ZOD_SCHEMA,
            "test/root.test.ts": 'import { schema } from "src/schema";\nconsole.log(schema);\n',
            "packages/app/tsconfig.json": '{"compilerOptions":{"paths":{"~/*":["./lib/*"]}}}',
            "packages/app/lib/use.ts": 'export { schema } from "zod";\n',
            "packages/app/test/app.test.ts": (
                'import { schema } from "~/use";\nconsole.log(schema);\n'
            ),
        },
    )
    note = _dependency_note(root)
    assert "none is missing" not in note
    assert "(zod: packages/app/lib/use.ts, src/schema.ts) that the commands' files import" in (note)


def test_a_workspace_package_reached_through_an_alias_names_the_file_importing_it(
    tmp_path: Path,
) -> None:
    """The tester's mono2: app.test.ts imports `@/total` (packages/app/src/total.ts by the
    root `paths`), which imports the workspace package `@mono/core`: that file is named."""
    root = project(
        tmp_path / "mono2",
        {
            "package.json": '{"name":"mono","private":true,"workspaces":["packages/*"]}',
            "tsconfig.json": (
                '{"compilerOptions":{"strict":true,"baseUrl":".",'
                '"paths":{"@/*":["./packages/app/src/*"]}}}'
            ),
            "packages/app/package.json": (
                '{"name":"@mono/app","dependencies":{"@mono/core":"workspace:*"}}'
            ),
            "packages/app/src/total.ts": 'import { add } from "@mono/core";\n',
            "packages/app/test/app.test.ts": 'import { total } from "@/total";\n',
            "packages/core/package.json": '{"name":"@mono/core","main":"src/index.ts"}',
            "packages/core/src/index.ts": "export const add = 1;\n",
            "test/root.test.ts": 'import { add } from "@mono/core";\n',
        },
    )
    note = _dependency_note(root)
    assert note.startswith(
        "package.json declares 1 workspace package (@mono/core: packages/app/src/total.ts, "
        "test/root.test.ts) that the commands' files import"
    )


def test_an_import_jigcmd_cannot_follow_is_named_instead_of_none_missing(tmp_path: Path) -> None:
    """`#lib/schema` (package.json `imports`) is not followed, and tsconfig.json extends a
    package never sent: the note says which imports it could not follow, not that none of
    the packages is missing."""
    root = project(
        tmp_path / "subpath",
        {
            "package.json": (
                '{"name":"subpath","dependencies":{"zod":"^3.0.0"},"imports":{"#lib/*":"./src/*"}}'
            ),
            "src/schema.ts": _ZOD_SCHEMA,
            "test/s.test.ts": 'import { schema } from "#lib/schema.ts";\n',
        },
    )
    note = _dependency_note(root)
    assert "none is missing" not in note
    assert 'it does not follow `#lib/schema.ts` in test/s.test.ts (a package.json "imports"' in note
    (root / "tsconfig.json").write_text('{"extends": "@tsconfig/bun/tsconfig.json"}')
    (root / "test/s.test.ts").write_text('import { schema } from "lib/schema";\n')
    note = _dependency_note(root)
    assert "none is missing" not in note
    assert "tsconfig.json extends @tsconfig/bun/tsconfig.json" in note


def test_a_test_reaching_no_package_is_still_told_none_is_missing(tmp_path: Path) -> None:
    """Everything the test imports is followed (an alias to a file importing nothing, and
    a Node built-in) and reaches no package: the note says so, as before."""
    root = project(
        tmp_path / "plain",
        {
            "package.json": '{"name":"plain","dependencies":{"zod":"^3.0.0"}}',
            "tsconfig.json": '{"compilerOptions":{"paths":{"@/*":["./src/*"]}}}',
            "src/schema.ts": _ZOD_SCHEMA,
            "src/pure.ts": "export const one = 1;\n",
            "test/p.test.ts": (
                'import { one } from "@/pure";\n'
                'import fs from "node:fs";\nimport path from "path";\n'
            ),
        },
    )
    assert "which reaches none of those imports, so none is missing" in _dependency_note(root)
