"""A test command stopped by its deadline or a cancel says why it has no per-test results.

A tester's test command slept past its deadline: the MCP result's `tests` was `null`, as a
command that is not a test command has it, and its words had no `Tests:` line. Driven as
callers do: `jigcmd serve` through the official MCP SDK (live and replayed after a
restart) and `jigcmd run --json`, at the deadline and at a cancel (a stop signal).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp_types import RequestParamsMeta

from tests.admitted_example import admit_example, jigcmd_cli
from tests.lifetime.watch import Watch, wait_for
from tests.mcpsession import mcp_session
from tests.mcpverify import verify_result

pytestmark = pytest.mark.envelope

SLOW = (
    'import { test } from "bun:test";\n'
    'test("slow", async () => { await Bun.sleep(20000); }, 100000);\n'
)
AT_DEADLINE = "missing: the run was stopped at its deadline before the runner wrote it"
CANCELLED = "missing: the run was cancelled before the runner wrote it"
KEY = cast("RequestParamsMeta", {"dev.jigcmd/operationId": "op-slow"})


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example with `slow`, one test file."""
    return admit_example(tmp_path_factory.mktemp("slow"), 'slow = { test = ["test/f.test.ts"] }\n')


def _candidate(tmp_path: Path, source: str) -> Path:
    candidate = tmp_path / "candidate"
    (candidate / "test").mkdir(parents=True)
    (candidate / "test" / "f.test.ts").write_text(source)
    return candidate


def _stopped(result: Any) -> tuple[dict[str, Any], str]:
    """The stopped result's `tests` and its words."""
    structured = result.structured_content
    assert result.is_error is True and structured is not None
    assert structured["stopReason"] == "deadline"
    tests: dict[str, Any] = structured["tests"]
    text: str = result.content[0].text
    return tests, text


async def test_mcp_result_of_a_test_command_at_its_deadline_has_tests_saying_why_none(
    binding: Path, tmp_path: Path
) -> None:
    """`tests.problem` and the words' `Tests:` line, live and in the replay after a restart."""
    state = tmp_path / "state"
    deadline = str(int((time.time() + 5) * 1000))
    args = ("--run-id", "run-slow")
    files = {"test/f.test.ts": SLOW}
    async with mcp_session(binding, state, *args, "--root-deadline-unix-ms", deadline) as session:
        first = await session.call_tool("slow", {"files": files}, meta=KEY)
    tests, text = _stopped(first)
    assert (tests["candidateInfluenced"], tests["problem"]) == (True, AT_DEADLINE)
    assert f"Tests: no per-test results: the runner's report is {AT_DEADLINE}" in text
    # `jigcmd verify` still reads the words as those of structuredContent.
    whole = first.model_dump(mode="json", by_alias=True, exclude_none=True)
    lines = verify_result(state, tmp_path, whole, whole)
    assert lines[-1] == "verified", lines
    async with mcp_session(binding, state, *args) as session:
        replayed = await session.call_tool("slow", {"files": files}, meta=KEY)
    assert _stopped(replayed) == (tests, text)


def test_run_json_of_a_test_command_at_its_deadline_has_tests_saying_why_none(
    binding: Path, tmp_path: Path
) -> None:
    candidate = str(_candidate(tmp_path, SLOW))
    state = str(tmp_path / "state")
    done = jigcmd_cli(
        *("run", "--binding", str(binding), "--state-dir", state, "slow", "--files", candidate),
        *("--timeout", "2", "--json"),
    )
    assert done.returncode == 4, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["error"]["code"] == "DEADLINE_EXCEEDED"
    assert answer["tests"]["problem"] == AT_DEADLINE


@pytest.fixture
def watch() -> Iterator[Watch]:
    """A witness of every process the `jigcmd run` child starts."""
    witness = Watch()
    try:
        yield witness
    finally:
        witness.stop()


def test_run_json_of_a_cancelled_test_command_has_tests_saying_why_none(
    binding: Path, tmp_path: Path, watch: Watch
) -> None:
    """SIGTERM once the tests run (a child they start carries a token): CANCELLED, and why."""
    token = f"tok-{uuid.uuid4().hex}"
    source = (
        'import { test } from "bun:test";\n'
        'test("waits", async () => {\n'
        f'  Bun.spawn([process.execPath, "-e", "setInterval(() => {{}}, 1000)", "{token}"]);\n'
        "  await Bun.sleep(20000);\n"
        "}, 100000);\n"
    )
    candidate = str(_candidate(tmp_path, source))
    state = str(tmp_path / "state")
    options = ("--binding", str(binding), "--state-dir", state)
    child = subprocess.Popen(
        [sys.executable, "-m", "jigcmd", "run", *options, "slow", "--files", candidate, "--json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch.add_root(child.pid)
    wait_for(lambda: bool(watch.running(token)) or child.poll() is not None, 60, "the tests")
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 4, stdout + stderr
    answer = json.loads(stdout)
    assert answer["error"]["code"] == "CANCELLED"
    assert answer["tests"]["problem"] == CANCELLED
