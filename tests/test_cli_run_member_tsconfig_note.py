"""A workspace package a member's own tsconfig.json maps to its source (through `extends` of
a shared base, the usual monorepo layout, or its own `paths`) is resolved by Bun without
node_modules/: neither `jigcmd init` nor `jigcmd run` says its imports fail (the tester's
ws4 and ws3), while one no config maps is still named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.command.test_scaffold import project
from tests.test_cli_run import jigcmd_cli, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture: its doctor check says whether runs can be made

_DECLARES = "package.json declares"
_MEMBER = '{{ "name": "@ws/{0}", "version": "1.0.0", "module": "src/index.ts"{1} }}'


def _files(member_config: str) -> dict[str, str]:
    """The tester's ws4: `util` imports `@ws/core`, `app`'s test imports `@ws/util`, each
    member's tsconfig.json `member_config`; no root tsconfig.json."""
    files = {
        "package.json": '{ "name": "ws4-root", "private": true, "workspaces": ["packages/*"] }',
        "tsconfig.base.json": (
            '{ "compilerOptions": { "strict": true, "paths": { '
            '"@ws/core": ["./packages/core/src/index.ts"], '
            '"@ws/util": ["./packages/util/src/index.ts"] } } }'
        ),
        "packages/core/package.json": _MEMBER.format("core", ""),
        "packages/core/src/index.ts": "export const add = (a: number, b: number) => a + b;\n",
        "packages/util/package.json": _MEMBER.format(
            "util", ', "dependencies": { "@ws/core": "workspace:*" }'
        ),
        "packages/util/src/index.ts": (
            'import { add } from "@ws/core";\n'
            "export const sum = (xs: number[]) => xs.reduce(add, 0);\n"
        ),
        "packages/app/package.json": _MEMBER.format(
            "app", ', "dependencies": { "@ws/util": "workspace:*" }'
        ),
        "packages/app/test/app.test.ts": (
            'import { test, expect } from "bun:test";\nimport { sum } from "@ws/util";\n'
            'test("app sum", () => expect(sum([4, 5])).toBe(9));\n'
        ),
    }
    for member in ("core", "util", "app"):
        files[f"packages/{member}/tsconfig.json"] = member_config
    return files


def _init_and_run(root: Path) -> tuple[list[str], str]:
    """The dependency notes of `init` and `run` of `tests`, and run's stdout."""
    init = jigcmd_cli("init", str(root))
    assert init.returncode == 0, init.stderr
    binding = str(root / ".jig" / "binding.toml")
    jigcmd_cli("lock", "--binding", binding, check=True)
    state = str(root.parent / "state")
    done = jigcmd_cli(
        "run", "--state-dir", state, "--binding", binding, "tests", "--files", str(root)
    )
    assert done.returncode == 0, done.stderr
    said = (init.stderr + done.stderr).splitlines()
    return [line for line in said if _DECLARES in line], done.stdout


@pytest.mark.parametrize(
    "config",
    [
        '{ "extends": "../../tsconfig.base.json" }',
        '{ "compilerOptions": { "paths": { "@ws/*": ["../*/src/index.ts"] } } }',
    ],
    ids=["extends-base", "own-paths"],
)
def test_a_package_a_members_own_tsconfig_maps_is_not_said_to_fail(
    lock: Path, tmp_path: Path, config: str
) -> None:
    """The run passes as bare Bun's does, and no note says those imports fail."""
    notes, stdout = _init_and_run(project(tmp_path / "ws4", _files(config)))
    assert "tests:      1 run, 1 passed, 0 failed" in stdout, stdout
    assert notes == []


def test_a_package_no_config_maps_is_still_named(lock: Path, tmp_path: Path) -> None:
    """app's tsconfig.json maps nothing: its `@ws/util` import is looked for in
    node_modules/, never sent, so init and run say it fails (util's mapped `@ws/core` not)."""
    files = _files('{ "extends": "../../tsconfig.base.json" }')
    files["packages/app/tsconfig.json"] = '{ "compilerOptions": { "strict": true } }'
    notes, _ = _init_and_run(project(tmp_path / "ws4", files))
    assert len(notes) == 2, notes
    for note in notes:
        assert "1 workspace package (@ws/util: packages/app/test/app.test.ts)" in note, note
        assert "so those imports fail" in note
