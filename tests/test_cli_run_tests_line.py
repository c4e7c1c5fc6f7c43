"""`jigcmd run`'s `tests:` line: each failing test by its describe path, and why a stopped
test run has no per-test results."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli_run import lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py


def _candidate(tmp_path: Path, test_source: str) -> Path:
    """A candidate whose `test/project.test.ts` (the example's test path) is `test_source`."""
    path = tmp_path / "candidate"
    (path / "test").mkdir(parents=True)
    (path / "test" / "project.test.ts").write_text(test_source)
    return path


def test_failing_tests_are_named_by_their_describe_path(lock: Path, tmp_path: Path) -> None:
    """Under `describe.each` every case's test has the same name: the path tells them apart,
    as MCP's words do (`add(5,5) > = 11`)."""
    files = _candidate(
        tmp_path,
        'import { describe, test, expect } from "bun:test";\n'
        'describe.each([[1, 1], [5, 5]])("add(%i,%i)", (a, b) => {\n'
        '  test("= 11", () => expect(a + b).toBe(11));\n'
        "});\n",
    )
    done = run(lock, tmp_path / "state", "tests", files)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("tests:")]
    assert line.startswith(
        "tests:      2 run, 0 passed, 2 failed (add(1,1) > = 11, add(5,5) > = 11), "
    )


def test_a_test_run_stopped_at_its_deadline_says_why_it_has_no_per_test_results(
    lock: Path, tmp_path: Path
) -> None:
    """The runner killed at `--timeout` wrote no report: the text says so, naming the limit."""
    files = _candidate(
        tmp_path,
        'import { test } from "bun:test";\n'
        'test("spins", () => { console.log("started"); while (true) {} });\n',
    )
    done = run(lock, tmp_path / "state", "tests", files, "--timeout", "1.5")
    assert done.returncode == 4, done.stdout + done.stderr
    assert (
        "tests:      no per-test results: the runner was stopped at its deadline (--timeout "
        "1.5) before it ended; what it printed until then is below\n"
    ) in done.stdout
