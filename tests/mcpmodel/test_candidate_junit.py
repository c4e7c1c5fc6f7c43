"""A JUnit report the candidate writes itself is read or said unreadable, never a crash.

A tester's candidate wrote `line="²"` (true for `str.isdigit`, refused by `int`) or an
XML declaration naming an encoding Python does not have: the service answered UNCERTAIN
with no evidence and left the journal row open. Driven as callers do: `jigcmd serve`
through the official MCP SDK, and `jigcmd run --json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.admitted_example import admit_example, jigcmd_cli
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

SUPERSCRIPT = (
    '<testsuites><testsuite name="f" file="f.ts">'
    '<testcase name="a" line="\u00b2" time="1"/></testsuite></testsuites>'
)
UNKNOWN_ENCODING = '<?xml version="1.0" encoding="x-nope"?><testsuites/>'
UNREADABLE = "unreadable: not readable XML (its XML declaration names no text encoding Python has)"


def _writes(report: str) -> str:
    """A test that writes `report` where Bun's goes, then ends Bun before Bun writes it."""
    return (
        'import { test } from "bun:test";\nimport { writeFileSync } from "node:fs";\n'
        f'test("w", () => {{ writeFileSync("/tmp/jigcmd-junit.xml", {json.dumps(report)}); '
        "process.exit(0); });\n"
    )


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example with `forged`, one test file."""
    return admit_example(
        tmp_path_factory.mktemp("junit"), 'forged = { test = ["test/f.test.ts"] }\n'
    )


async def test_mcp_answers_the_exit_code_with_the_report_read_or_said_unreadable(
    binding: Path, tmp_path: Path
) -> None:
    """The run's evidence is the answer; the report only adds what it says, or its problem."""
    async with mcp_session(binding, tmp_path / "state") as session:
        odd = await session.call_tool("forged", {"files": {"test/f.test.ts": _writes(SUPERSCRIPT)}})
        bad = await session.call_tool(
            "forged", {"files": {"test/f.test.ts": _writes(UNKNOWN_ENCODING)}}
        )
    for result in (odd, bad):
        assert result.is_error is False, result.content
        assert result.structured_content is not None
        assert result.structured_content["exitCode"] == 0
    read = odd.structured_content["tests"]
    assert read["summary"]["tests"] == 1
    (test,) = read["tests"]
    assert (test["name"], test["filePath"], "line" in test) == ("a", "f.ts", False)
    assert bad.structured_content["tests"]["problem"] == UNREADABLE


def test_run_json_answers_with_the_report_said_unreadable(binding: Path, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"
    (candidate / "test").mkdir(parents=True)
    (candidate / "test" / "f.test.ts").write_text(_writes(UNKNOWN_ENCODING))
    state = str(tmp_path / "state")
    done = jigcmd_cli(
        "run",
        "--binding",
        str(binding),
        "--state-dir",
        state,
        "forged",
        "--files",
        str(candidate),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    answer = json.loads(done.stdout)
    assert answer["evidence"]["exitCode"] == 0
    assert answer["tests"]["problem"] == UNREADABLE
