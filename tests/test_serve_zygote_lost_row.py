"""A call whose supervisor stops reporting: its answer and its journal row, read together.

The zygote (the supervisor of every envelope) killed while the candidate runs: the answer is
`UNCERTAIN` ("the run's end and cleanup are unproved"). The server's exit then proves the
envelope released (its job killed, empty, removed) and records the row's cleanup
`complete`. The row's reason stays the answer's words, which a replay repeats byte for byte
(a round of 2026-12-07 appended "proved afterwards" to it, and a replay then differed from
the answer); `cleanup` is the latest proof, as docs/operations.md says.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from tests.admitted_example import admit_example
from tests.required import require_runtime, usable_cgroups

pytestmark = pytest.mark.envelope

# Says it runs, then waits far past the moment the test kills its supervisor.
_CLI = 'console.log("the candidate runs");\nawait Bun.sleep(60000);\n'
_WAIT_S = 60


def _zygote_of(state: Path) -> int:
    """The zygote of this test's `jigcmd serve` of `state`: the server's child so named."""
    (server,) = [
        pid
        for pid, parent, argv in _processes()
        if parent == os.getpid() and str(state).encode() in argv
    ]
    (zygote,) = [
        pid
        for pid, parent, _argv in _processes()
        if parent == server and Path(f"/proc/{pid}/comm").read_text() == "jigcmd-zygote\n"
    ]
    return zygote


def _processes() -> list[tuple[int, int, list[bytes]]]:
    """Every process still there: its pid, its parent's, its argv."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        found.append((int(entry.name), int(status.split("\nPPid:")[1].split()[0]), argv))
    return found


async def test_a_call_whose_supervisor_was_killed_keeps_its_answers_words_beside_a_later_proof(
    tmp_path: Path,
) -> None:
    """UNCERTAIN, cleanup unproved in the answer; the row's cleanup `complete` only with words
    that it was proved afterwards, never beside words that say it is unproved."""
    usable_cgroups()
    require_runtime()
    binding = admit_example(tmp_path)
    state = tmp_path / "state"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "jigcmd", "serve", "--binding", str(binding), "--state-dir", str(state)],
    )
    answer: list[CallToolResult] = []
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()

            running = anyio.Event()

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                if message and "the candidate runs" in message:
                    running.set()

            async def call() -> None:
                files = {"src/cli.ts": _CLI}
                answer.append(
                    await client.call_tool(
                        "cli", {"files": files, "args": []}, progress_callback=on_progress
                    )
                )

            async with anyio.create_task_group() as calls:
                calls.start_soon(call)
                with anyio.fail_after(_WAIT_S):
                    await running.wait()
                # The candidate printed: it runs, supervised by the zygote, killed now.
                os.kill(_zygote_of(state), signal.SIGKILL)
    (result,) = answer
    assert result.is_error is True
    assert isinstance(result.content[0], TextContent)
    assert result.content[0].text == (
        "UNCERTAIN: the envelope supervisor stopped reporting; the run's end and cleanup are "
        "unproved"
    ), result.content
    listed = await anyio.run_process(
        [sys.executable, "-m", "jigcmd", "runs", "--state-dir", str(state), "--json"]
    )
    lines = listed.stdout.decode().splitlines()
    (listing,) = [json.loads(line) for line in lines if line.strip()]
    (operation,) = listing["operations"]
    assert (operation["state"], operation["ending"]) == ("uncertain", "UNCERTAIN")
    # The server's exit proved the envelope released, later than the answer's words.
    assert operation["cleanup"] == "complete", operation
    assert operation["reason"] == (
        "the envelope supervisor stopped reporting; the run's end and cleanup are unproved"
    ), operation
