"""A test file that fails to load is a failure everywhere the test result is read.

Bun 1.4.2 leaves such a file out of its JUnit report (and writes none when every file fails
so); only its console counts it, ` 1 fail` / ` 1 error`. The summary once said "0 failed" for
it in `jigcmd run`'s text and `--json`, the MCP result and the signed test result. Driven as
callers do: `jigcmd run`, `jigcmd verify`, and `jigcmd serve` through the official MCP SDK
(which checks `structuredContent` against the tool's `outputSchema`).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_types import TextContent

from tests.admitted_example import admit_example, jigcmd_cli
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

OK = 'import { test, expect } from "bun:test";\ntest("ok", () => { expect(1).toBe(1); });\n'
BAD = (
    'import { x } from "nonexistent-pkg";\nimport { test, expect } from "bun:test";\n'
    'test("bad", () => { expect(x).toBe(1); });\n'
)
MIX = {"test/ok.test.ts": OK, "test/bad.test.ts": BAD}
UNHANDLED = "Bun counted 1 unhandled error between tests (test/bad.test.ts)"


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example with `mix` (one file loads, one does not) and `broken` (none loads)."""
    return admit_example(
        tmp_path_factory.mktemp("unloaded"),
        'mix = { test = ["test/bad.test.ts", "test/ok.test.ts"] }\n'
        'broken = { test = ["test/bad.test.ts"] }\n',
    )


def _run(binding: Path, tmp_path: Path, command: str, *extra: str) -> str:
    """`jigcmd run COMMAND --files` on the files of `MIX` it names; its stdout."""
    files = tmp_path / "candidate"
    for name, text in MIX.items():
        if command == "mix" or name == "test/bad.test.ts":
            (files / name).parent.mkdir(parents=True, exist_ok=True)
            (files / name).write_text(text)
    state = str(tmp_path / "state")
    args = ("--binding", str(binding), "--state-dir", state, command, "--files", str(files))
    done = jigcmd_cli("run", *args, *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_run_text_says_a_file_did_not_load_before_the_reports_counts(
    binding: Path, tmp_path: Path
) -> None:
    """`tests:` leads with INCOMPLETE and the file, then the report's own "0 failed"."""
    out = _run(binding, tmp_path, "mix")
    (line,) = [line for line in out.splitlines() if line.startswith("tests:")]
    assert line.startswith(f"tests:      INCOMPLETE: {UNHANDLED}"), line
    assert "a test file that failed to load" in line and "see stderr" in line
    assert "The report alone: 1 run, 1 passed, 0 failed" in line


def test_when_no_file_loads_the_text_says_so_not_only_that_the_report_is_missing(
    binding: Path, tmp_path: Path
) -> None:
    """Bun writes no report at all then: the line says why before it says "missing"."""
    out = _run(binding, tmp_path, "broken")
    (line,) = [line for line in out.splitlines() if line.startswith("tests:")]
    assert line.startswith(f"tests:      INCOMPLETE: {UNHANDLED}"), line
    assert line.endswith(
        "And no per-test results: the runner's report is missing: the runner exited with "
        "code 1 without writing it"
    ), line


def test_json_and_the_signed_test_result_count_the_file_as_failed(
    binding: Path, tmp_path: Path
) -> None:
    """`tests` carries the count and reason; the statement lists it failed; verify says so."""
    answer = json.loads(_run(binding, tmp_path, "mix", "--json"))
    tests = answer["tests"]
    assert tests["summary"]["failed"] == 0
    assert tests["unhandledErrors"] == 1
    assert tests["incomplete"].startswith(UNHANDLED)
    bundle = tmp_path / "bundle.intoto.jsonl"
    bundle.write_text(answer["attestation"]["bundle"])
    verified = jigcmd_cli("verify", str(bundle), "--state-dir", str(tmp_path / "state"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert (
        "ok   test result: FAILED: 1 passed, 1 failed (names from the runner's report, "
        f"candidate-influenced); incomplete: {UNHANDLED}"
    ) in verified.stdout
    predicate = _test_result(answer["attestation"]["bundle"])
    assert predicate["failedTests"] == ["test/bad.test.ts > (unhandled error between tests)"]
    assert predicate["passedTests"] == ["test/ok.test.ts > ok"]
    (report,) = [c for c in predicate["configuration"] if c["name"].startswith("test runner")]
    assert report["annotations"]["incomplete"].startswith(UNHANDLED)


def _test_result(bundle: str) -> dict[str, Any]:
    """The test-result predicate of a bundle (its second DSSE envelope's statement)."""
    envelope = json.loads(bundle.splitlines()[1])
    predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    return predicate


async def test_the_mcp_result_says_it_in_structured_content_and_text(
    binding: Path, tmp_path: Path
) -> None:
    """structuredContent (checked by the SDK against outputSchema) and the text both say it."""
    async with mcp_session(binding, tmp_path / "state") as session:
        ran = await session.call_tool("mix", {"files": MIX})
        missing = await session.call_tool("broken", {"files": {"test/bad.test.ts": BAD}})
    for result in (ran, missing):
        assert result.is_error is False
        structured = result.structured_content
        assert structured is not None
        tests = structured["tests"]
        assert (structured["exitCode"], tests["unhandledErrors"]) == (1, 1)
        assert tests["incomplete"].startswith(UNHANDLED)
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        assert f"Tests INCOMPLETE: {UNHANDLED}" in text
    assert ran.structured_content is not None and missing.structured_content is not None
    assert ran.structured_content["tests"]["summary"]["failed"] == 0
    assert missing.structured_content["tests"]["problem"] == (
        "missing: the runner exited with code 1 without writing it"
    )
