"""`jigcmd init` names what bare `bun test` does with a project that Bun under jigcmd does not:
`.only` (CI mode), a `scripts.test`'s options, a `bunfig.toml`'s settings, `.env` files and
spawning `bun` by name; each note only when the project holds what it names."""

from __future__ import annotations

from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

_HEAD = 'import { test, expect } from "bun:test";\n'


def _notes(root: Path) -> list[str]:
    """The note lines `jigcmd init` prints for `root` (the prefix taken off)."""
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    prefix = f"jigcmd init: {root}: "
    return [line.removeprefix(prefix) for line in done.stderr.splitlines()]


def test_a_test_file_calling_only_is_named_with_the_fix(tmp_path: Path) -> None:
    """`test.only` and `describe.only.each` fail in CI mode: the files calling them are named;
    one that mentions `.only` in a comment or a string is not."""
    root = project(
        tmp_path / "p",
        {
            "test/focus.test.ts": _HEAD + 'test.only("focused", () => expect(1).toBe(1));\n',
            "test/each.test.ts": _HEAD + "describe . only.each([1])('%i', (n) => {});\n",
            "test/quiet.test.ts": _HEAD
            + '// test.only("x", …) is refused in CI\n'
            + 'test("s", () => expect("it.only").toBe("it.only"));\n',
        },
    )
    (note,) = [line for line in _notes(root) if ".only" in line]
    assert note.startswith(
        "test/each.test.ts, test/focus.test.ts call .only (test.only, describe.only, it.only): "
        "bun test runs in CI mode here (CI=true), where Bun refuses .only"
    )
    assert "remove .only, or give the focused tests a file and a command of their own" in note


def test_scripts_test_options_are_named_with_a_fix_for_each(tmp_path: Path) -> None:
    """`bun run test` passes `--timeout 8000 --preload ./test/setup.ts`; a command never
    does: the note names them, with the preload's and the timeout's fixes."""
    root = project(
        tmp_path / "p",
        {
            "package.json": '{"name": "p", "scripts": {"test": '
            '"bun test --timeout 8000 --preload ./test/setup.ts"}}',
            "test/setup.ts": "globalThis.SEED = 7;\n",
            "test/slow.test.ts": _HEAD + 'test("seed", () => expect(globalThis.SEED).toBe(7));\n',
        },
    )
    (note,) = [line for line in _notes(root) if "scripts.test" in line]
    assert note == (
        "package.json scripts.test runs `bun test --timeout 8000 --preload ./test/setup.ts`: a "
        "test command runs `bun test` with the files the Binding names and jigcmd's own "
        "options, never the script, so what it gives Bun (--timeout 8000 --preload "
        "./test/setup.ts) does not apply; import the setup it preloads from the test files "
        "that need it; give a slow test its own timeout, test()'s third argument "
        "(docs/binding.md#what-bun-runs-with)"
    )


def test_a_plain_scripts_test_gets_no_note(tmp_path: Path) -> None:
    """`bun test` alone, or a script that is not `bun test`: nothing is lost."""
    for script in ("bun test", "tsc --noEmit"):
        root = project(
            tmp_path / script.replace(" ", "_"),
            {
                "package.json": f'{{"name": "p", "scripts": {{"test": "{script}"}}}}',
                "test/a.test.ts": _HEAD + 'test("a", () => expect(1).toBe(1));\n',
            },
        )
        assert not [line for line in _notes(root) if "scripts.test" in line]


def test_the_bunfig_note_names_what_the_file_sets_and_fixes_only_that(tmp_path: Path) -> None:
    """`[test] root` and coverage, a commented-out preload: the settings named, no preload
    fix, and the test file init named outside `root`, which bare `bun test` never runs."""
    root = project(
        tmp_path / "p",
        {
            "bunfig.toml": '[test]\n# preload = ["./setup.ts"]\nroot = "test"\ncoverage = true\n',
            "test/a.test.ts": _HEAD + 'test("a", () => expect(1).toBe(1));\n',
            "e2e/api.test.ts": _HEAD + 'test("api", () => expect(1).toBe(1));\n',
        },
    )
    (note,) = [line for line in _notes(root) if line.startswith("bunfig.toml")]
    assert note == (
        "bunfig.toml: Bun runs without it (jigcmd gives Bun --config=/dev/null, so no project "
        "can change Bun's own options): its settings ([test] root, [test] coverage) do not "
        "apply; the Binding names the test files it runs, e2e/api.test.ts outside [test] root "
        '"test" among them, which bare `bun test` never runs: take it out of the `test` list '
        "to run what bare `bun test` runs (docs/binding.md#what-bun-runs-with)"
    )


def test_a_bunfig_preload_gets_its_fix_and_an_install_table_no_note(tmp_path: Path) -> None:
    """A real `[test] preload` is named with its fix; `[install]` alone concerns nothing that
    runs (nothing is installed), so it gets no note."""
    root = project(
        tmp_path / "p",
        {
            "bunfig.toml": '[test]\npreload = ["./test/setup.ts"]\n',
            "test/a.test.ts": _HEAD + 'test("a", () => expect(1).toBe(1));\n',
        },
    )
    (note,) = [line for line in _notes(root) if line.startswith("bunfig.toml")]
    assert note.endswith(
        "options): its settings ([test] preload) do not apply; import the setup it preloads "
        "from the test files that need it (docs/binding.md#what-bun-runs-with)"
    )
    (root / "bunfig.toml").write_text("[install]\nexact = true\n")
    (root / ".jig").rename(tmp_path / "first-jig")
    assert not [line for line in _notes(root) if "bunfig.toml" in line]


def test_env_files_are_said_not_loaded_by_bun_with_the_fix(tmp_path: Path) -> None:
    """`.env` and `.env.test` are left out for their leading dot, and even sent Bun would not
    load them (`--no-env-file`): the note says so and where the values go instead."""
    root = project(
        tmp_path / "p",
        {
            ".env": "API_URL=http://localhost:1\n",
            ".env.test": "API_KEY=testkey\n",
            "test/a.test.ts": _HEAD + 'test("a", () => expect(process.env.API_KEY).toBe("k"));\n',
        },
    )
    (note,) = [line for line in _notes(root) if line.startswith("left out")]
    assert (
        ".env, .env.test (a candidate path may not start with '.'; Bun loads no .env here (it "
        "runs with --no-env-file), so what the tests read from process.env that a .env file "
        "sets is unset: give it a default in code, or set it in a setup module the tests "
        "import)"
    ) in note


def test_spawning_bun_by_name_is_named_with_process_exec_path(tmp_path: Path) -> None:
    """`Bun.spawn(["bun", …])` finds no `bun` (no PATH); `process.execPath` is the fix, and a
    file spawning it, or naming `"bun"` in a comment, is not named."""
    root = project(
        tmp_path / "p",
        {
            "test/by-name.test.ts": _HEAD
            + 'test("s", () => { Bun.spawnSync(["bun", "run", "x.ts"]); });\n',
            "test/exec-path.test.ts": _HEAD
            + '// Bun.spawn(["bun", "x.ts"]) finds no bun\n'
            + 'test("s", () => { Bun.spawn([process.execPath, "x.ts"]); });\n',
        },
    )
    (note,) = [line for line in _notes(root) if "by name" in line]
    assert note == (
        "test/by-name.test.ts spawns `bun` by name: a command runs with no PATH, so that "
        "fails (Executable not found in $PATH); spawn process.execPath, the Bun running the "
        "command, in its place (docs/cli.md#comparing-with-bare-bun-test)"
    )
