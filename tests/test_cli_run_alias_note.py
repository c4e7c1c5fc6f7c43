"""`jigcmd run`'s dependency note for a test reaching a package through a tsconfig.json
`paths` alias: it says the import fails, as the run then shows, never that none is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.command.test_scaffold import project
from tests.test_cli_run import jigcmd_cli, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture: its doctor check says whether runs can be made


def test_a_package_behind_an_alias_is_said_to_fail_and_does(lock: Path, tmp_path: Path) -> None:
    """The tester's `alias` project: `@/schema` is src/schema.ts, which imports `zod`."""
    root = project(
        tmp_path / "alias",
        {
            "package.json": '{"name":"alias","dependencies":{"zod":"^3.0.0"}}',
            "tsconfig.json": '{"compilerOptions":{"baseUrl":".","paths":{"@/*":["./src/*"]}}}',
            "src/schema.ts": 'import { z } from "zod";\nexport const schema = z.string();\n',
            "test/s.test.ts": (
                'import { expect, test } from "bun:test";\n'
                'import { schema } from "@/schema";\n'
                'test("parses", () => { expect(schema.parse("a")).toBe("a"); });\n'
            ),
        },
    )
    assert jigcmd_cli("init", str(root)).returncode == 0
    binding = str(root / ".jig" / "binding.toml")
    jigcmd_cli("lock", "--binding", binding, check=True)
    state = str(tmp_path / "state")
    done = jigcmd_cli(
        "run", "--state-dir", state, "--binding", binding, "tests", "--files", str(root)
    )
    (note,) = [line for line in done.stderr.splitlines() if "package.json declares" in line]
    assert "none is missing" not in note
    assert "(zod: src/schema.ts) that the files of `tests` import: none is installed" in note
    assert "Cannot find package 'zod'" in done.stdout + done.stderr
