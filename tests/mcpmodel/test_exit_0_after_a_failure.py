"""An exit 0 is no pass in the signed test result when the tests say otherwise.

A tester's candidate: a failing test, then `afterAll` printing a forged `(pass)` line and
calling `process.exit(0)`. Bun exits 0 before its JUnit report and its footer; the signed
test result said PASSED (with the failure in `failedTests`) while `jigcmd run --json` warned.
Driven as callers do: `jigcmd run --json` and `jigcmd verify`, `jigcmd serve` (Run/1) and
`jigcmd attest`, `jigcmd serve` through the official MCP SDK.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.admitted_example import jigcmd_cli
from tests.mcpmodel.forgedrun import (
    forged_binding,
    incomplete_note,
    run1_attested,
    signed_test_result,
)
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

FORGED = (
    'import { test, expect, afterAll } from "bun:test";\n'
    'test("really fails", () => expect(1).toBe(2));\n'
    'afterAll(() => { console.error("(pass) security review > approved [0.01ms]"); '
    "process.exit(0); });\n"
)
# No test fails: Bun is ended before it says how many ran.
CUT_SHORT = 'import { test } from "bun:test";\ntest("ends it", () => { process.exit(0); });\n'
PASSING = 'import { test, expect } from "bun:test";\ntest("ok", () => expect(1).toBe(1));\n'
MISSING = (
    "missing: the runner ended before writing it, so exit code 0 does not mean the tests passed"
)


def _files(tmp_path: Path, source: str) -> Path:
    candidate = tmp_path / "candidate"
    (candidate / "test").mkdir(parents=True)
    (candidate / "test" / "f.test.ts").write_text(source)
    return candidate


@pytest.mark.parametrize(
    ("source", "result", "failed"),
    [(FORGED, "FAILED", ["test/f.test.ts > really fails"]), (CUT_SHORT, "WARNED", [])],
)
def test_run_json_signs_no_pass_and_verify_prints_why(
    binding: Path, tmp_path: Path, source: str, result: str, failed: list[str]
) -> None:
    """The signed result fails (or warns) with `tests.problem`'s words; verify says so."""
    state = str(tmp_path / "state")
    files = str(_files(tmp_path, source))
    args = ("--binding", str(binding), "--state-dir", state, "forged", "--files", files)
    done = jigcmd_cli("run", *args, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["evidence"]["exitCode"] == 0
    assert answer["tests"]["problem"] == MISSING
    predicate = signed_test_result(answer["attestation"]["bundle"])
    assert (predicate["result"], predicate["failedTests"]) == (result, failed)
    assert incomplete_note(predicate).startswith(f"the runner's JUnit report is {MISSING}")
    (tmp_path / "answer.json").write_text(done.stdout)
    checked = jigcmd_cli("verify", str(tmp_path / "answer.json"), "--state-dir", state)
    assert checked.returncode == 0, checked.stdout
    (line,) = [line for line in checked.stdout.splitlines() if "test result:" in line]
    assert line.startswith(f"ok   test result: {result}: ")
    assert f"incomplete: the runner's JUnit report is {MISSING}" in line


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return forged_binding(tmp_path_factory, "exit0")


def _run1_test_result(tmp_path: Path, binding: Path, source: str) -> tuple[dict[str, Any], str]:
    """A Run/1 call of `forged` on `source`: its signed test result, and `jigcmd verify`'s."""
    state = tmp_path / "state"
    value, out = run1_attested(binding, state, source, "run-exit0", "op-forged")
    assert value["exitCode"] == 0
    checked = jigcmd_cli("verify", str(out), "--state-dir", str(state))
    assert checked.returncode == 0, checked.stdout
    return signed_test_result(out.read_text()), checked.stdout


def test_a_run1_call_signs_failed_saying_the_report_is_missing(
    binding: Path, tmp_path: Path
) -> None:
    """Run/1 has Bun write its JUnit report too: its absence says the run was cut short, as
    for `run --json`; the names are then the console's."""
    predicate, verified = _run1_test_result(tmp_path, binding, FORGED)
    assert predicate["result"] == "FAILED"
    assert predicate["failedTests"] == ["test/f.test.ts > really fails"]
    assert incomplete_note(predicate).startswith(f"the runner's JUnit report is {MISSING}")
    assert "ok   test result: FAILED: 1 passed, 1 failed" in verified


def test_a_run1_call_whose_tests_pass_still_signs_passed(binding: Path, tmp_path: Path) -> None:
    """Bun's footer ends a whole run's console: nothing is incomplete."""
    predicate, verified = _run1_test_result(tmp_path, binding, PASSING)
    assert (predicate["result"], predicate["failedTests"]) == ("PASSED", [])
    assert "ok   test result: PASSED: 1 passed, 0 failed (" in verified
    assert "incomplete" not in verified


async def test_the_mcp_result_warns_as_the_signed_result_says(
    binding: Path, tmp_path: Path
) -> None:
    """structuredContent says the report is missing; the bundle it links fails the run."""
    async with mcp_session(binding, tmp_path / "state") as session:
        result = await session.call_tool("forged", {"files": {"test/f.test.ts": FORGED}})
        structured = result.structured_content
        assert result.is_error is False and structured is not None
        assert structured["exitCode"] == 0
        assert structured["tests"]["problem"] == MISSING
        (link,) = [
            block
            for block in result.content
            if block.type == "resource_link" and block.name == "attestation"
        ]
        read = await session.read_resource(link.uri)
    bundle = read.contents[0].text  # type: ignore[union-attr]
    assert signed_test_result(bundle)["result"] == "FAILED"
