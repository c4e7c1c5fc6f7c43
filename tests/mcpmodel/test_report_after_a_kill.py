"""A JUnit report present after the runner was killed is no finished runner's report.

A tester's candidate wrote an all-passing report where Bun's goes, then killed itself with
SIGKILL (or spun until the deadline): the MCP result said "40 passed, 0 failed" with nothing
incomplete while the signed test result said FAILED. Bun writes its report only as it ends,
so a report there after a signal or a stop is said INCOMPLETE, in the same words everywhere.
Driven as callers do: `jigcmd serve` through the official MCP SDK (structuredContent, the
words, the statement it links), `jigcmd run --json`, and Run/1 with `jigcmd attest`.
"""

from __future__ import annotations

import json
import time
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
from tests.required import unavailable

pytestmark = pytest.mark.envelope

_REPORT = (
    '`<?xml version="1.0"?><testsuites tests="5" failures="0">'
    '<testsuite name="test/f.test.ts" file="test/f.test.ts" tests="5" failures="0">`'
    ' + Array.from({length: 5}, (_, i) => `<testcase name="t${i}" file="test/f.test.ts" '
    'line="3"/>`).join("") + "</testsuite></testsuites>"'
)


def _forging(then: str) -> str:
    """A failing test, then one writing an all-passing report where Bun's goes and `then`."""
    return (
        'import { test, expect } from "bun:test";\n'
        'import { writeFileSync } from "node:fs";\n'
        'test("a", () => { expect(1).toBe(2); });\n'
        f'test("b", () => {{ writeFileSync("/tmp/jigcmd-junit.xml", {_REPORT}); {then} }});\n'
    )


KILLED = _forging('process.kill(process.pid, "SIGKILL");')
SPINS = _forging("while (true) {}")
AFTER_KILL = (
    "the runner was killed by SIGKILL, yet a JUnit report is there, which Bun writes only as "
    "it ends: the report is not a finished runner's (the candidate's code can write one); "
    "see stderr"
)
AT_DEADLINE = AFTER_KILL.replace(
    "the runner was killed by SIGKILL", "the run was stopped at its deadline"
)


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return forged_binding(tmp_path_factory, "kill")


async def _mcp(binding: Path, state: Path, source: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    """One MCP call of `forged` on `source`: its result and the signed test result it links."""
    async with mcp_session(binding, state, *extra) as session:
        result = await session.call_tool("forged", {"files": {"test/f.test.ts": source}})
        (link,) = [
            block
            for block in result.content
            if block.type == "resource_link" and block.name == "attestation"
        ]
        read = await session.read_resource(link.uri)
    return result, signed_test_result(read.contents[0].text)  # type: ignore[union-attr]


async def test_mcp_a_report_after_a_sigkill_is_incomplete_as_the_statement_says(
    binding: Path, tmp_path: Path
) -> None:
    """structuredContent, its words and the signed test result say the same why."""
    result, predicate = await _mcp(binding, tmp_path / "state", KILLED)
    structured = result.structured_content
    assert structured is not None
    assert (structured["exitCode"], structured["signal"]) == (None, "SIGKILL")
    tests = structured["tests"]
    assert tests["summary"]["failed"] == 0  # the forged report's, shown as such
    assert tests["incomplete"] == AFTER_KILL
    assert f"Tests INCOMPLETE: {AFTER_KILL}." in result.content[0].text
    assert predicate["result"] == "FAILED"
    assert incomplete_note(predicate) == AFTER_KILL


async def test_mcp_a_report_after_the_deadline_is_incomplete_as_the_statement_says(
    binding: Path, tmp_path: Path
) -> None:
    deadline = str(int((time.time() + 5) * 1000))
    extra = ("--root-deadline-unix-ms", deadline)
    result, predicate = await _mcp(binding, tmp_path / "state", SPINS, *extra)
    structured = result.structured_content
    assert result.is_error is True and structured is not None
    assert structured["stopReason"] == "deadline"
    assert structured["tests"]["incomplete"] == AT_DEADLINE
    assert f"Tests INCOMPLETE: {AT_DEADLINE}." in result.content[0].text
    assert (predicate["result"], incomplete_note(predicate)) == ("FAILED", AT_DEADLINE)


def test_run_json_and_its_text_say_a_report_after_the_deadline_isincomplete_note(
    binding: Path, tmp_path: Path
) -> None:
    candidate = tmp_path / "candidate"
    (candidate / "test").mkdir(parents=True)
    (candidate / "test" / "f.test.ts").write_text(SPINS)
    args = ("--binding", str(binding), "forged", "--files", str(candidate), "--timeout", "2")
    done = jigcmd_cli("run", *args, "--state-dir", str(tmp_path / "a"), "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["tests"]["incomplete"] == AT_DEADLINE
    predicate = signed_test_result(answer["attestation"]["bundle"])
    assert (predicate["result"], incomplete_note(predicate)) == ("FAILED", AT_DEADLINE)
    text = jigcmd_cli("run", *args, "--state-dir", str(tmp_path / "b"))
    assert f"tests:      INCOMPLETE: {AT_DEADLINE}. The report alone: 5 run" in text.stdout


def test_a_run1_call_signs_the_report_after_a_sigkillincomplete_note(
    binding: Path, tmp_path: Path
) -> None:
    """Run/1 answers the evidence alone (killed by SIGKILL); its statement says why too."""
    value, out = run1_attested(binding, tmp_path / "state", KILLED, "run-killed", "op-killed")
    assert (value["exitCode"], value["signal"]) == (None, "SIGKILL")
    predicate = signed_test_result(out.read_text())
    assert (predicate["result"], incomplete_note(predicate)) == ("FAILED", AFTER_KILL)


def test_run_json_says_a_report_after_an_oom_kill_came_at_the_memory_limit(
    binding: Path, tmp_path: Path
) -> None:
    """In the words a missing report's problem uses for the same end (round 32, rev3,
    finding 5), not "killed by SIGKILL"."""
    candidate = tmp_path / "candidate"
    (candidate / "test").mkdir(parents=True)
    fills = _forging("const a = []; while (true) a.push(Buffer.alloc(8 << 20, 1));")
    (candidate / "test" / "f.test.ts").write_text(fills)
    args = ("--binding", str(binding), "forged", "--files", str(candidate), "--json")
    answer = json.loads(jigcmd_cli("run", *args, "--state-dir", str(tmp_path / "s")).stdout)
    if not answer["report"]["oomKilled"]:
        unavailable("the envelope's memory limit was not what ended the run here")
    at_the_limit = AFTER_KILL.replace("killed by SIGKILL", "killed at the envelope's memory limit")
    assert answer["tests"]["incomplete"] == at_the_limit
    predicate = signed_test_result(answer["attestation"]["bundle"])
    assert (predicate["result"], incomplete_note(predicate)) == ("FAILED", at_the_limit)
