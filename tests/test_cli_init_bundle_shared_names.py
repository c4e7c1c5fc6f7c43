"""Two command files of one name (test/a/x.test.ts, test/b/x.test.ts): the dependency
note's `bun build`s write two bundles, never one over the other (one `--outdir bundled`
each wrote `bundled/x.test.js` twice, so only the last test's bundle was left), and `run`
tells each source that it runs through its own bundle (the reviewer's p4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bundlefix import build_as_suggested, suggested_bundles
from tests.command.test_scaffold import project
from tests.required import require_runtime
from tests.test_cli_run import jigcmd_cli, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture: its doctor check says whether runs can be made

_HEAD = 'import { test, expect } from "bun:test";\nimport pad from "tiny-pad";\n'
_FILES = {
    "package.json": '{"name": "pads", "dependencies": {"tiny-pad": "1"}}',
    "test/a/x.test.ts": _HEAD + 'test("a", () => expect(pad("a")).toBe("__a"));\n',
    "test/b/x.test.ts": _HEAD + 'test("b", () => expect(pad("b")).toBe("__b"));\n',
    # What `bun install` would have put there: the host's copy the bundles inline.
    "node_modules/tiny-pad/package.json": '{"name": "tiny-pad", "main": "index.js"}',
    "node_modules/tiny-pad/index.js": "export default (s) => `__${s}`;\n",
}


def test_same_named_test_files_get_bundles_of_their_own(lock: Path, tmp_path: Path) -> None:
    require_runtime()
    root = project(tmp_path / "jigcmd-r32K-pads", _FILES)
    builds, bundles = suggested_bundles(root)
    assert bundles == ["bundled/test-a-x.test.js", "bundled/test-b-x.test.js"], bundles
    build_as_suggested(root, builds)
    made = [(root / bundle).read_text() for bundle in bundles]
    assert made[0] != made[1]
    assert '"a"' in made[0] and '"b"' in made[1], made
    binding = root / ".jig" / "binding.toml"
    text = binding.read_text()
    for source, bundle in zip(("test/a/x.test.ts", "test/b/x.test.ts"), bundles, strict=True):
        text = text.replace(f'"{source}"', f'"{bundle}"')
    binding.write_text(text)
    jigcmd_cli("lock", "--binding", str(binding), check=True)
    state = str(tmp_path / "state")
    tests = jigcmd_cli(
        "run", "--state-dir", state, "--binding", str(binding), "tests", "--files", str(root)
    )
    assert tests.returncode == 0, tests.stderr
    assert "tests:      2 run, 2 passed, 0 failed" in tests.stdout, tests.stdout + tests.stderr
    assert (
        "test/a/x.test.ts, test/b/x.test.ts are named by no command of the Binding but run "
        "through their bundles (bundled/test-a-x.test.js, bundled/test-b-x.test.js)"
    ) in tests.stderr, tests.stderr
