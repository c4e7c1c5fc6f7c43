"""`jigcmd run`'s notes on stderr: each said for the command it concerns, none before a refusal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_cli_run import BINDING, CANDIDATES, answer, evidence, jigcmd_cli, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

_FAILING_TEST = 'import { test, expect } from "bun:test";\ntest("new", () => expect(1).toBe(2));\n'
_SNAPSHOT_TEST = (
    'import { test, expect } from "bun:test";\n'
    'test("value", () => expect({ v: 1 }).toMatchSnapshot());\n'
)


def _copy(tmp_path: Path) -> Path:
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    return files


def _notes(stderr: str) -> list[str]:
    """The note lines (`jigcmd run: --files …: …`), not the refusal's own."""
    return [line for line in stderr.splitlines() if line.startswith("jigcmd run: --files ")]


def test_test_files_no_command_names_are_said_sent_and_not_run(lock: Path, tmp_path: Path) -> None:
    """A failing test file added to the project is sent, not run (`1 run, 1 passed`): the run
    names it, with the count, the fix and the `lock` to run; stdout stays the one object."""
    files = _copy(tmp_path)
    (files / "test" / "new.test.ts").write_text(_FAILING_TEST)
    (files / "src" / "widget_spec.tsx").write_text(_FAILING_TEST)
    done = run(lock, tmp_path / "state", "tests", files, "--json")
    assert done.returncode == 0, done.stderr
    evidence(done)  # exactly the keys a run's answer has
    assert answer(done)["tests"]["summary"]["tests"] == 1
    (note,) = [line for line in _notes(done.stderr) if "named by no command" in line]
    assert note == (
        f"jigcmd run: --files {files}: 2 test files sent are named by no command of the "
        "Binding, so not run: src/widget_spec.tsx, test/new.test.ts; to run them, add them to "
        f"a command's `test` list in {BINDING} (at most 16 to a command) (a Binding names only "
        ".test.ts, .test.js, .spec.ts and .spec.js files: rename src/widget_spec.tsx), then "
        f"admit it again: jigcmd lock --binding {BINDING} --lock {lock}"
    )


def test_run_says_the_dependency_note_init_says(lock: Path, tmp_path: Path) -> None:
    """A declared package the command's file imports is never installed: `run` says what
    `init` says (of the commands' files, where `run` says the command's), not only Bun's
    `Cannot find package`."""
    files = _copy(tmp_path)
    (files / "package.json").write_text(
        '{"name": "pad", "module": "src/cli.ts", "dependencies": {"tiny-pad": "^1"}}\n'
    )
    (files / "src" / "pad.ts").write_text('import pad from "tiny-pad";\nexport default pad;\n')
    cli = files / "src" / "cli.ts"
    cli.write_text('import "./pad.ts";\n' + cli.read_text())
    done = run(lock, tmp_path / "state", "cli", files)
    assert done.returncode == 0, done.stderr
    said = [line for line in _notes(done.stderr) if "package.json declares" in line]
    assert said and "1 dependency (tiny-pad: src/pad.ts) that the files of `cli` import" in said[0]
    init = jigcmd_cli("init", str(files))
    assert init.returncode == 0, init.stderr
    prefix = f"jigcmd init: {files}: "
    (from_init,) = [line for line in init.stderr.splitlines() if "package.json declares" in line]
    from_run = said[0].replace("the files of `cli`", "the commands' files")
    assert from_run == f"jigcmd run: --files {files}: " + from_init.removeprefix(prefix)


def test_an_entry_point_gets_no_note_that_only_bun_test_needs(lock: Path, tmp_path: Path) -> None:
    """A `[test]`-only bunfig.toml, a snapshot test and an unnamed test file concern `bun
    test` alone: `cli` says none of them, `tests` says all three."""
    files = _copy(tmp_path)
    (files / "bunfig.toml").write_text('[test]\npreload = ["./setup.ts"]\n')
    (files / "test" / "project.test.ts").write_text(_SNAPSHOT_TEST)
    (files / "test" / "new.test.ts").write_text(_FAILING_TEST)
    cli = run(lock, tmp_path / "state", "cli", files)
    assert cli.returncode == 0, cli.stderr
    assert _notes(cli.stderr) == []
    tests = run(lock, tmp_path / "state", "tests", files)
    assert tests.returncode == 0, tests.stderr
    said = " ".join(_notes(tests.stderr))
    for part in (
        "named by no command",
        "snapshot tests cannot pass",
        "its settings ([test] preload)",
    ):
        assert part in said


def test_a_bunfig_setting_running_a_file_reads_is_said_for_an_entry_point(
    lock: Path, tmp_path: Path
) -> None:
    """A top-level `preload` applies to `bun src/cli.ts` too, and is not loaded."""
    files = _copy(tmp_path)
    (files / "bunfig.toml").write_text('preload = ["./setup.ts"]\n[test]\nroot = "test"\n')
    done = run(lock, tmp_path / "state", "cli", files)
    assert done.returncode == 0, done.stderr
    assert _notes(done.stderr) == [
        f"jigcmd run: --files {files}: bunfig.toml: Bun runs without it (jigcmd gives Bun "
        "--config=/dev/null, so no project can change Bun's own options): its settings for "
        "running a file (preload) do not apply; import the setup it preloads from the entry "
        "point (docs/binding.md#what-bun-runs-with)"
    ]


def test_the_bunfig_note_of_a_run_names_its_settings_and_the_tests_outside_root(
    lock: Path, tmp_path: Path
) -> None:
    """A commented-out preload is no preload; `[test] root` is named, with the command's
    test file outside it, which bare `bun test` would never run."""
    files = _copy(tmp_path)
    (files / "bunfig.toml").write_text('[test]\n# preload = ["./setup.ts"]\nroot = "src"\n')
    done = run(lock, tmp_path / "state", "tests", files)
    assert done.returncode == 0, done.stderr
    assert _notes(done.stderr) == [
        f"jigcmd run: --files {files}: bunfig.toml: Bun runs without it (jigcmd gives Bun "
        "--config=/dev/null, so no project can change Bun's own options): its settings "
        "([test] root) do not apply; the Binding names the test files it runs, "
        'test/project.test.ts outside [test] root "src" among them, which bare `bun test` '
        "never runs: take it out of the `test` list to run what bare `bun test` runs "
        "(docs/binding.md#what-bun-runs-with)"
    ]


def test_a_refused_call_says_only_why(lock: Path, tmp_path: Path) -> None:
    """`tests -- --bail` is refused: its one line, with the fix (a command of fewer test
    files), no note before it (left-out files, bunfig, snapshots, unnamed tests, a
    dependency), whatever the candidate."""
    files = _copy(tmp_path)
    (files / "bunfig.toml").write_text('[test]\npreload = ["./setup.ts"]\n')
    (files / "test" / "new.test.ts").write_text(_SNAPSHOT_TEST)
    (files / "package.json").write_text('{"dependencies": {"tiny-pad": "^1"}}\n')
    (files / "src" / "pad.ts").write_text('import pad from "tiny-pad";\nexport default pad;\n')
    (files / "node_modules").mkdir()
    done = run(lock, tmp_path / "state", "tests", files, "--", "--bail")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "jigcmd run: INVALID_INPUT: /args: test command 'tests' accepts no arguments (got 1); "
        "fix: call it with no arguments; to run only some of its test files, the Binding needs "
        "a command whose `test` list names just those, admitted again with `jigcmd lock` (bun "
        "test's own options, such as --bail or -t, have no equivalent)"
    ]


def test_a_test_command_running_no_snapshot_test_gets_no_snapshot_note(
    lock: Path, tmp_path: Path
) -> None:
    """The project's snapshot test is another file, which `tests` does not run: its note is
    for the command that runs it, not said for every test command of the project."""
    files = _copy(tmp_path)
    (files / "test" / "snap.test.ts").write_text(_SNAPSHOT_TEST)
    done = run(lock, tmp_path / "state", "tests", files)
    assert done.returncode == 0, done.stderr
    assert any("named by no command" in line for line in _notes(done.stderr))
    assert not [line for line in _notes(done.stderr) if "snapshot" in line]


def test_run_names_an_imported_dot_directory_file_before_the_run(
    lock: Path, tmp_path: Path
) -> None:
    """The test imports `../.config/value.ts`, which `--files` leaves out: the note before
    the run names the importer, the file and the move, and the run is Bun's own failure."""
    files = _copy(tmp_path)
    (files / ".config").mkdir()
    (files / ".config" / "value.ts").write_text("export const value = 2;\n")
    test = files / "test" / "project.test.ts"
    test.write_text(test.read_text().replace("../src/value.ts", "../.config/value.ts"))
    done = run(lock, tmp_path / "state", "tests", files)
    assert done.returncode == 0, done.stderr
    assert _notes(done.stderr)[0] == (
        f"jigcmd run: --files {files}: left out of the candidate: .config/ (a candidate path "
        "may not start with '.'; test/project.test.ts imports .config/value.ts, left out: "
        "move .config/ to a path that does not start with '.' (config/, say) and import it "
        "from there); the candidate: 3 files, 410 bytes"
    )
    assert "Cannot find module '../.config/value.ts'" in done.stderr + done.stdout
