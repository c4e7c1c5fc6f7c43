"""Bun's footer, read where it is: past stderr's 64 KiB cap, and when no test ran.

A test file that failed to load is counted only by the footer ending Bun's stderr; a test
printing more than the cap before it pushed the footer out of the retained text, and the
failure out of `jigcmd run --json`, the MCP result and the signed test result. An empty test
file (Bun writes no report when no test ran) was said to have ended before its report.
Driven as callers do: `jigcmd run` and `jigcmd serve` through the official MCP SDK.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.admitted_example import admit_example, jigcmd_cli
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

# The tester's project (p17): ~140 KB on stderr, then a file importing a missing package.
NOISY = (
    'import { test, expect } from "bun:test";\n'
    'test("noisy fail", () => { for (let i = 0; i < 2000; i++) console.error("noise line " + '
    'i + " " + "z".repeat(60)); expect(1).toBe(2); });\n'
    'test("pass", () => expect(1).toBe(1));\n'
)
UNLOADED = (
    'import {test,expect} from "bun:test"; import x from "missing-pkg"; '
    'test("never",()=>expect(x).toBe(1));\n'
)
FLOOD = {"test/b.test.ts": NOISY, "test/z.test.ts": UNLOADED}
UNHANDLED = "Bun counted 1 unhandled error between tests, failures that are no test's result"


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example with `flood` (p17's shape) and `empty` (a test file with no test)."""
    return admit_example(
        tmp_path_factory.mktemp("footer"),
        'flood = { test = ["test/b.test.ts", "test/z.test.ts"] }\n'
        'empty = { test = ["test/empty.test.ts"] }\n',
    )


def _run(binding: Path, tmp_path: Path, command: str, files: dict[str, str], *extra: str) -> str:
    """`jigcmd run COMMAND --files` on `files`; its stdout."""
    candidate = tmp_path / "candidate"
    for name, text in files.items():
        (candidate / name).parent.mkdir(parents=True, exist_ok=True)
        (candidate / name).write_text(text)
    state = str(tmp_path / "state")
    args = ("--binding", str(binding), "--state-dir", state, command, "--files", str(candidate))
    done = jigcmd_cli("run", *args, *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_past_the_stderr_cap_a_file_that_did_not_load_is_still_counted(
    binding: Path, tmp_path: Path
) -> None:
    """`--json` and the signed test result count it, from the footer past the cap."""
    answer = json.loads(_run(binding, tmp_path, "flood", FLOOD, "--json"))
    evidence, tests = answer["evidence"], answer["tests"]
    assert (evidence["exitCode"], evidence["stderr"]["truncated"]) == (1, True)
    assert "Ran 3 tests across 2 files" not in evidence["stderr"]["text"]
    assert tests["summary"]["failed"] == 1
    assert tests["unhandledErrors"] == 1
    assert tests["incomplete"].startswith(UNHANDLED)
    predicate = _test_result(answer["attestation"]["bundle"])
    assert predicate["failedTests"] == [
        "test/b.test.ts > noisy fail",
        "(unhandled error between tests)",
    ]
    (report,) = [c for c in predicate["configuration"] if c["name"].startswith("test runner")]
    assert report["annotations"]["incomplete"].startswith(UNHANDLED)


def _test_result(bundle: str) -> dict[str, Any]:
    """The test-result predicate of a bundle (its second DSSE envelope's statement)."""
    envelope = json.loads(bundle.splitlines()[1])
    predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    return predicate


async def test_past_the_stderr_cap_the_mcp_result_counts_it_too(
    binding: Path, tmp_path: Path
) -> None:
    """structuredContent (checked by the SDK against outputSchema) says it."""
    async with mcp_session(binding, tmp_path / "state") as session:
        result = await session.call_tool("flood", {"files": FLOOD})
    structured = result.structured_content
    assert result.is_error is False and structured is not None
    assert (structured["exitCode"], structured["tests"]["unhandledErrors"]) == (1, 1)
    assert structured["tests"]["incomplete"].startswith(UNHANDLED)


def test_a_missing_report_after_no_test_ran_says_so_in_the_consoles_words(
    binding: Path, tmp_path: Path
) -> None:
    """Bun 1.4.2 writes no report when no test ran: not "ended before writing it"."""
    out = _run(binding, tmp_path, "empty", {"test/empty.test.ts": ""})
    lines = [line for line in out.splitlines() if line.startswith(("ended:", "tests:"))]
    assert lines == [
        "ended:      exit code 0 (stop reason: exited, cleanup: complete)",
        "tests:      no per-test results: the runner's report is missing: its console says "
        "no test ran (Ran 0 tests across 1 file), and Bun writes no report then; exit code 0 "
        "does not mean the tests passed",
    ]
