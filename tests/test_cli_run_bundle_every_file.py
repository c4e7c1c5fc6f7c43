"""The dependency note's bundling fix, followed once as written, makes every command pass:
one `bun build` per file of the commands that needs one (an entry point's without
`--external bun:test`, as docs/binding.md writes it), and then `run` tells a test file
replaced by its bundle that it runs through it, not to add it back (the tester's `ws` and
`deps`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.bundlefix import build_as_suggested, suggested_bundles
from tests.command.test_scaffold import project
from tests.required import require_runtime
from tests.test_cli_run import jigcmd_cli, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture: its doctor check says whether runs can be made

_HEAD = 'import { test, expect } from "bun:test";\n'
_FILES = {
    "package.json": ('{"name": "pads", "module": "src/cli.ts", "dependencies": {"tiny-pad": "1"}}'),
    "src/pad.ts": 'import pad from "tiny-pad";\nexport const padded = (s: string) => pad(s);\n',
    "src/cli.ts": 'import { padded } from "./pad.ts";\nconsole.log(padded(process.argv[2]));\n',
    "test/pad.test.ts": (
        _HEAD + 'import { padded } from "../src/pad.ts";\n'
        'test("pad", () => expect(padded("a")).toBe("__a"));\n'
    ),
    "lib/extra.test.ts": (
        _HEAD + 'import pad from "tiny-pad";\ntest("extra", () => expect(pad("b")).toBe("__b"));\n'
    ),
    # What `bun install` would have put there: the host's copy the bundles inline.
    "node_modules/tiny-pad/package.json": '{"name": "tiny-pad", "main": "index.js"}',
    "node_modules/tiny-pad/index.js": "export default (s) => `__${s}`;\n",
}
# The fix the note offers: `bundle on the host, `<commands>`, and name each bundle (…)`.


def _run(root: Path, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    binding = str(root / ".jig" / "binding.toml")
    state = str(root.parent / "state")
    done = jigcmd_cli(
        "run", "--state-dir", state, "--binding", binding, command, "--files", str(root), *args
    )
    assert done.returncode == 0, done.stderr
    return done


def test_following_the_bundling_fix_once_makes_every_command_pass(
    lock: Path, tmp_path: Path
) -> None:
    """Two tests and an entry point reach `tiny-pad`: the note gives a build for each; run
    as given, with the bundles named, both tests and the entry point pass, and the sources
    the bundles replace are said to run through them, never to be added back."""
    require_runtime()
    root = project(tmp_path / "pads", _FILES)
    builds, bundles = suggested_bundles(root)
    assert len(builds.split(" && ")) == 3 == len(bundles), builds
    build_as_suggested(root, builds)
    binding = root / ".jig" / "binding.toml"
    text = binding.read_text()
    for source in ("test/pad.test.ts", "lib/extra.test.ts", "src/cli.ts"):
        bundle = "bundled/" + Path(source).name.removesuffix(".ts") + ".js"
        assert bundle in bundles and (root / bundle).is_file()
        text = text.replace(f'"{source}"', f'"{bundle}"')
    binding.write_text(text)
    jigcmd_cli("lock", "--binding", str(binding), check=True)
    tests = _run(root, "tests")
    assert "tests:      2 run, 2 passed, 0 failed" in tests.stdout, tests.stdout + tests.stderr
    assert "so not run" not in tests.stderr
    assert (
        "lib/extra.test.ts, test/pad.test.ts are named by no command of the Binding but run "
        "through their bundles (bundled/extra.test.js, bundled/pad.test.js), which a test "
        "command names: nothing to add back;"
    ) in tests.stderr
    assert "--exclude /lib/extra.test.ts --exclude /test/pad.test.ts" in tests.stderr
    start = _run(root, "start", "--", "c")
    assert "exit code 0" in start.stdout and "| __c" in start.stdout, start.stdout


def test_an_entry_points_bundle_command_keeps_no_bun_test_external(
    lock: Path, tmp_path: Path
) -> None:
    """`run start` before any bundling: its build is the entry point's, as docs/binding.md
    writes it (`--external bun:test` is only a test's)."""
    root = project(tmp_path / "pads", _FILES)
    assert jigcmd_cli("init", str(root)).returncode == 0
    jigcmd_cli("lock", "--binding", str(root / ".jig" / "binding.toml"), check=True)
    done = _run(root, "start", "--", "c")
    assert (
        "or bundle on the host, `bun build src/cli.ts --outdir bundled --target bun --minify`, "
        "and name the bundle instead"
    ) in done.stderr, done.stderr


def test_an_unnamed_test_with_no_bundle_run_is_still_asked_to_be_added(
    lock: Path, tmp_path: Path
) -> None:
    """Beside a test replaced by its bundle, a new test file whose bundle nothing runs
    is named as before: sent and not run."""
    files = {
        "package.json": '{"name": "b"}',
        "test/pad.test.ts": _HEAD + 'test("pad", () => expect(1).toBe(1));\n',
        "bundled/pad.test.js": 'import{test as t}from"bun:test";t("pad",()=>{});\n',
        "test/new.test.ts": _HEAD + 'test("new", () => expect(1).toBe(1));\n',
    }
    root = project(tmp_path / "b", files)
    assert jigcmd_cli("init", str(root)).returncode == 0
    binding = root / ".jig" / "binding.toml"
    binding.write_text(
        'package = "flows/b"\n[commands]\ntests = { test = ["bundled/pad.test.js"] }\n'
    )
    jigcmd_cli("lock", "--binding", str(binding), check=True)
    done = _run(root, "tests")
    assert "1 test file sent is named by no command of the Binding, so not run: " in done.stderr
    assert "not run: test/new.test.ts; to run it" in done.stderr
    assert (
        "test/pad.test.ts is named by no command of the Binding but run through its bundle "
        "(bundled/pad.test.js), which a test command names: nothing to add back; the bundle "
        "holds what its tests need, so you may leave it out of the candidate: "
        "--exclude /test/pad.test.ts (docs/binding.md#bundling)"
    ) in done.stderr
