"""`jigcmd run`'s dependency note for a Binding whose commands run bundles (docs/binding.md
"Bundling"): it names what the command's files import, and never says that imports only
unrun files hold fail, nor suggests the `bun build` the Binding already runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.command.test_scaffold import project
from tests.test_cli_run import jigcmd_cli, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture: its doctor check says whether runs can be made

_BINDING = """package = "flows/bundled-demo"
[commands]
tests = { test = ["bundled/ms.test.js"] }
start = { run = "bundled/main.js" }
ext = { run = "bundled/ext.js" }
"""


@pytest.fixture
def bundled(lock: Path, tmp_path: Path) -> Path:
    """A project whose sources import `ms` and whose Binding runs bundles of them, admitted."""
    root = project(
        tmp_path / "bundled-demo",
        {
            "package.json": '{"name": "bundled-demo", "dependencies": {"ms": "^2"}}',
            "src/main.ts": 'import ms from "ms";\nconsole.log(ms(1000));\n',
            "test/ms.test.ts": 'import { test } from "bun:test";\nimport ms from "ms";\n',
            # What `bun build` writes: `ms` inlined, or (ext.js) left `--external`.
            "bundled/main.js": 'console.log("1s");\n',
            "bundled/ms.test.js": 'import{test as t}from"bun:test";t("ms",()=>{});\n',
            "bundled/ext.js": 'import x from"ms";console.log(x(1));\n',
        },
    )
    assert jigcmd_cli("init", str(root)).returncode == 0
    binding = root / ".jig" / "binding.toml"
    binding.write_text(_BINDING)
    jigcmd_cli("lock", "--binding", str(binding), check=True)
    return root


def _note(root: Path, command: str) -> str:
    binding = str(root / ".jig" / "binding.toml")
    state = str(root.parent / "state")
    done = jigcmd_cli(
        "run", "--state-dir", state, "--binding", binding, command, "--files", str(root)
    )
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stderr.splitlines() if "package.json declares" in line]
    return note


def test_a_command_running_a_bundle_is_told_it_misses_nothing(bundled: Path) -> None:
    """`tests` runs bundled/ms.test.js, which imports no package: the note says the files
    importing `ms` are not what it runs, and suggests no bundling."""
    assert _note(bundled, "tests") == (
        f"jigcmd run: --files {bundled}: package.json declares 1 dependency (ms: "
        "bundled/ext.js, src/main.ts, test/ms.test.ts) that candidate files import, but `tests` "
        "runs none of those files: it runs bundled/ms.test.js, which reaches none of those "
        "imports, so none is missing for it (docs/binding.md#dependencies-and-workspaces)"
    )


def test_a_bundle_that_still_imports_a_package_is_named_not_bundled_again(bundled: Path) -> None:
    """`ext` runs a bundle that left `ms` external: the note names that file alone and says
    to build it without `--external`, not the `bun build` that made it."""
    note = _note(bundled, "ext")
    assert "declares 1 dependency (ms: bundled/ext.js) that the files of `ext` import:" in note
    assert "so those imports fail" in note
    assert (
        "build bundled/ext.js, a bundle the Binding runs, again without `--external` for ms" in note
    )
    assert "bun build" not in note
