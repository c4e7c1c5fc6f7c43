"""A bug while the result of a finished run is made closes its operation, UNCERTAIN.

A tester's candidate crashed the result's making (a JUnit report `jigcmd.protocol.junit`
now reads): the MCP call answered UNCERTAIN, its journal row stayed `running` with its
owner named gone, a same-key retry waited its whole deadline for a false "still running
elsewhere", a restart then replayed exit 0, and `jigcmd run` printed a traceback. The bug
is injected here (the making of the output's ends raises); driven as callers do:
`jigcmd serve` through the official MCP SDK, `jigcmd runs --json`, and `jigcmd run`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from mcp_types import RequestParamsMeta

from tests.admitted_example import admit_example, jigcmd_cli
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

# `python -c` runs jigcmd with the result's making broken, after the candidate has run.
BROKEN = (
    "import runpy, sys\n"
    "import jigcmd.command.execution as execution\n"
    "def broken(outcome):\n"
    "    raise RuntimeError('injected: no output ends')\n"
    "execution.output_ends = broken\n"
    "sys.argv[0] = 'jigcmd'\n"
    "runpy.run_module('jigcmd', run_name='__main__', alter_sys=True)\n"
)
ANSWER = (
    "UNCERTAIN: internal error in the command service while reading how the run ended; its "
    "envelope was cleaned up, but its outcome is unknown"
)
CLI = {"src/cli.ts": 'console.log("ran");\n'}
RUN_ID = "run-internal-error"
# An open map the SDK types with its own keys only.
KEY = cast("RequestParamsMeta", {"dev.jigcmd/operationId": "op-1"})


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return admit_example(tmp_path_factory.mktemp("internal"))


def _row(state: Path) -> dict[str, Any]:
    done = jigcmd_cli("runs", "--json", "--run-id", RUN_ID, "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    (run,) = [json.loads(line) for line in done.stdout.splitlines()]
    (row,) = run["operations"]
    assert isinstance(row, dict)
    return row


def _answered(result: Any) -> str:
    assert result.is_error is True
    assert result.structured_content is None
    (block,) = result.content
    text: str = block.text
    return text


async def test_the_operation_is_closed_uncertain_and_answered_so_again(
    binding: Path, tmp_path: Path
) -> None:
    """The row is closed at once; a retry, live and after a restart, is answered the same."""
    state = tmp_path / "state"
    args = ("--run-id", RUN_ID)
    with (tmp_path / "serve.log").open("w+") as log:
        async with mcp_session(binding, state, *args, errlog=log, python=("-c", BROKEN)) as session:
            first = await session.call_tool("cli", {"files": CLI}, meta=KEY)
            assert _answered(first) == ANSWER
            row = _row(state)
            assert (row["state"], row["ownerGone"], row["ending"], row["cleanup"]) == (
                "uncertain",
                False,
                "UNCERTAIN",
                "complete",
            )
            begun = time.monotonic()
            retried = await session.call_tool("cli", {"files": CLI}, meta=KEY)
            assert _answered(retried) == ANSWER and time.monotonic() - begun < 5
        log.seek(0)
        assert "RuntimeError: injected: no output ends" in log.read()
    async with mcp_session(binding, state, *args) as session:
        replayed = await session.call_tool("cli", {"files": CLI}, meta=KEY)
    assert _answered(replayed) == ANSWER


def test_run_says_uncertain_in_one_line_with_its_documented_status(
    binding: Path, tmp_path: Path
) -> None:
    """Exit status 3 (an operational failure) and the failure's line: no traceback."""
    candidate = tmp_path / "candidate"
    (candidate / "src").mkdir(parents=True)
    (candidate / "src" / "cli.ts").write_text(CLI["src/cli.ts"])
    state = str(tmp_path / "state")
    args = ("--binding", str(binding), "--state-dir", state, "cli", "--files", str(candidate))
    done = subprocess.run(
        [sys.executable, "-c", BROKEN, "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert "Traceback" not in done.stderr
    # Beside the operator's log line naming the bug (`RuntimeError: injected: …`).
    assert f"jigcmd run: {ANSWER}" in done.stderr.splitlines()
    assert done.returncode == 3
