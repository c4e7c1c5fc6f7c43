"""A suite `init` split across `tests` and `tests-2`: running one part says where the rest is.

Before, `jigcmd run … tests` of a project of 20 test files ended `16 run, 16 passed`, exit
code 0, with not a word of the 4 files in `tests-2`, one of them failing: a partial green
read as the suite's.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.test_cli_run import jigcmd_cli, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture (the doctor's verdict), shared with test_cli_run

_PASSING = (
    'import {{ test, expect }} from "bun:test";\ntest("t{0:02}", () => expect({0}).toBe({0}));\n'
)
_FAILING = 'import { test, expect } from "bun:test";\ntest("t19", () => expect(19).toBe(0));\n'


def _notes(stderr: str, files: Path) -> list[str]:
    prefix = f"jigcmd run: --files {files}: "
    return [line.removeprefix(prefix) for line in stderr.splitlines() if line.startswith(prefix)]


def test_each_part_of_a_split_suite_names_the_others_and_how_to_run_them(
    lock: Path, tmp_path: Path
) -> None:
    """`tests` (16 files, green) says the 4 in `tests-2` are not run, with the line that runs
    them; `tests-2` (red) says the same of the 16 in `tests`."""
    files = tmp_path / "many"
    (files / "test").mkdir(parents=True)
    for n in range(1, 21):
        (files / "test" / f"t{n:02}.test.ts").write_text(
            _FAILING if n == 19 else _PASSING.format(n)
        )
    assert jigcmd_cli("init", str(files)).returncode == 0
    binding = files / ".jig" / "binding.toml"
    assert jigcmd_cli("lock", "--binding", str(binding)).returncode == 0
    state = str(tmp_path / "state")

    def run(command: str) -> list[str]:
        done = jigcmd_cli(
            "run", "--binding", str(binding), "--state-dir", state, command, "--files", str(files)
        )
        assert done.returncode == 0, done.stderr
        return _notes(done.stderr, files)

    def line(command: str) -> str:
        return shlex.join(
            ["jigcmd", "run", "--binding", str(binding), command, "--files", str(files)]
        )

    assert (
        "4 more test files of the project are in `tests-2`, which this run does not run: run it "
        f"too for the whole suite: {line('tests-2')}"
    ) in run("tests")
    assert (
        "16 more test files of the project are in `tests`, which this run does not run: run it "
        f"too for the whole suite: {line('tests')}"
    ) in run("tests-2")
