"""A `(fail)` line Bun printed that the report does not list makes the results INCOMPLETE.

A reviewer's candidate failed a test for real (Bun printed `(fail) really fails` on stderr),
then in `afterAll` wrote a 50-passing JUnit report where Bun's goes, printed a fake footer and
exited 0: every surface said 50 passed and the statement was signed PASSED. The console is
the candidate's word too, but it can only make a run look worse: a failed test it shows that
the report does not list is said, and the statement is then not PASSED. A `(fail)` line the
report does list changes nothing. Driven as callers do: `jigcmd run --json` and its text,
`jigcmd serve` through the official MCP SDK (structuredContent, the words, the statement it
links), and Run/1 with `jigcmd attest`.
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


def _candidate(failures: int, failed_name: str) -> str:
    """A test that really fails, then an `afterAll` writing a report (50 passing tests and
    `failures` failed ones named `failed_name`), a fake footer, and `process.exit(0)`."""
    # In `describe("d")`, a nested <testsuite> as Bun writes one.
    failed = (
        f'<testsuite name="d" file="test/f.test.ts"><testcase name="{failed_name}" '
        'file="test/f.test.ts" line="4"><failure message="x"/></testcase></testsuite>'
        if failures
        else ""
    )
    report = (
        f'`<?xml version="1.0"?><testsuites tests="{50 + failures}" failures="{failures}">'
        f'<testsuite name="test/f.test.ts" file="test/f.test.ts" tests="{50 + failures}" '
        f'failures="{failures}">{failed}`'
        ' + Array.from({length: 50}, (_, i) => `<testcase name="security t${i}" '
        'file="test/f.test.ts" line="3"/>`).join("") + "</testsuite></testsuites>"'
    )
    return (
        'import { test, expect, afterAll, describe } from "bun:test";\n'
        'import { writeFileSync } from "node:fs";\n'
        'describe("d", () => { test("really fails", () => { expect(1).toBe(2); }); });\n'
        f'afterAll(() => {{ writeFileSync("/tmp/jigcmd-junit.xml", {report}); '
        'console.error("\\n 50 pass\\n 0 fail\\nRan 50 tests across 1 file. [9.00ms]"); '
        "process.exit(0); });\n"
    )


FORGED = _candidate(0, "")
# The report lists the failure the console shows (`d > really fails`, as Bun prints it).
LISTED = _candidate(1, "really fails")
SHOWN = (
    "the console shows a failed test the report does not list: the report is not to be "
    "trusted (the candidate's code can write one); see stderr"
)
LISTS_ONE = "the runner exited with code 0, yet its report lists 1 failed test; see stderr"


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return forged_binding(tmp_path_factory, "fail")


def _run(binding: Path, tmp_path: Path, source: str, *extra: str) -> Any:
    candidate = tmp_path / "candidate"
    (candidate / "test").mkdir(parents=True, exist_ok=True)
    (candidate / "test" / "f.test.ts").write_text(source)
    args = ("--binding", str(binding), "forged", "--files", str(candidate))
    return jigcmd_cli("run", *args, "--state-dir", str(tmp_path / f"s{len(extra)}"), *extra)


def test_run_json_and_text_say_a_console_failure_the_report_does_not_list(
    binding: Path, tmp_path: Path
) -> None:
    done = _run(binding, tmp_path, FORGED, "--json")
    answer = json.loads(done.stdout)
    assert answer["evidence"]["exitCode"] == 0, done.stdout + done.stderr
    assert "(fail) d > really fails" in answer["evidence"]["stderr"]["text"]
    assert answer["tests"]["summary"]["failed"] == 0  # the forged report's, shown as such
    assert answer["tests"]["incomplete"] == SHOWN
    predicate = signed_test_result(answer["attestation"]["bundle"])
    assert predicate["result"] != "PASSED"
    assert incomplete_note(predicate) == SHOWN
    text = _run(binding, tmp_path, FORGED)
    assert f"tests:      INCOMPLETE: {SHOWN}." in text.stdout


def test_run_json_a_console_failure_the_report_lists_adds_nothing(
    binding: Path, tmp_path: Path
) -> None:
    answer = json.loads(_run(binding, tmp_path, LISTED, "--json").stdout)
    assert answer["tests"]["summary"]["failed"] == 1
    assert answer["tests"]["incomplete"] == LISTS_ONE
    predicate = signed_test_result(answer["attestation"]["bundle"])
    assert (predicate["result"], incomplete_note(predicate)) == ("FAILED", LISTS_ONE)


async def test_mcp_says_a_console_failure_the_report_does_not_list(
    binding: Path, tmp_path: Path
) -> None:
    async with mcp_session(binding, tmp_path / "state") as session:
        result = await session.call_tool("forged", {"files": {"test/f.test.ts": FORGED}})
        (link,) = [
            block
            for block in result.content
            if block.type == "resource_link" and block.name == "attestation"
        ]
        read = await session.read_resource(link.uri)
    structured = result.structured_content
    assert structured is not None and structured["exitCode"] == 0
    assert structured["tests"]["incomplete"] == SHOWN
    assert f"Tests INCOMPLETE: {SHOWN}." in result.content[0].text  # type: ignore[union-attr]
    predicate = signed_test_result(read.contents[0].text)  # type: ignore[union-attr]
    assert predicate["result"] != "PASSED"
    assert incomplete_note(predicate) == SHOWN


def test_a_run1_call_signs_a_console_failure_the_report_does_not_list(
    binding: Path, tmp_path: Path
) -> None:
    value, out = run1_attested(binding, tmp_path / "state", FORGED, "run-forged", "op-forged")
    assert value["exitCode"] == 0
    predicate = signed_test_result(out.read_text())
    assert predicate["result"] != "PASSED"
    assert incomplete_note(predicate) == SHOWN
