"""A burst of 70 two-second calls through the official SDK: every one runs and is ok.

The queue wait is the caller's (or `--queue-wait`), never the command's 10 s ceiling: a call
that waited half a minute for a slot still gets its whole ceiling. The machine the tests run
on is shared and slow, so the queue limit is raised well past the 35 s the burst needs on
four slots; what is tested is that waiting does not eat the run's own time.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcpmodel.fixtures import admit

pytestmark = pytest.mark.envelope

CALLS = 70
SLEEPER = {"src/cli.ts": "await Bun.sleep(2000);\nconsole.log(`slept ${process.argv[2]}`);\n"}


async def test_seventy_concurrent_two_second_calls_all_complete(tmp_path: Path) -> None:
    binding = admit(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(binding),
            "--state-dir",
            str(tmp_path / "state"),
            "--max-envelopes",
            "4",
            "--queue-wait",
            "600",
        ],
    )
    results: dict[int, tuple[bool, str]] = {}
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()

            async def call(index: int) -> None:
                ran = await client.call_tool(
                    "cli",
                    {"files": SLEEPER, "args": [str(index)]},
                    read_timeout_seconds=900,
                )
                view = ran.structured_content or {}
                results[index] = (bool(ran.is_error), str(view.get("stdout", {}).get("head")))

            async with anyio.create_task_group() as burst:
                for index in range(CALLS):
                    burst.start_soon(call, index)
        errlog.seek(0)
        assert "Traceback" not in errlog.read()
    failed = {i: r for i, r in results.items() if r != (False, f"slept {i}\n")}
    assert len(results) == CALLS and not failed, failed
