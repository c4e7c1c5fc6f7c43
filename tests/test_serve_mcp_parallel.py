"""The official MCP Python SDK calls tools in parallel through the real `jigcmd serve`.

With one envelope slot, concurrent calls queue for it (first come, first served, a
progress notice when the caller asked for progress) and every one completes; a call
refused by validation is answered at once beside them, never waiting for a slot.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope


# Holds its envelope for a while (busy, so no timer can end it early), then prints its token.
_HOLD = (
    "const end = Date.now() + 1500;\n"
    "while (Date.now() < end) {}\n"
    'console.log("held " + process.argv[2]);\n'
)
_QUICK = 'console.log("ran " + process.argv[2]);\n'


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    """The example, admitted in a temporary copy."""
    return admit_example(tmp_path)


def _params(binding: Path, state: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(binding),
            "--state-dir",
            str(state),
            *extra,
        ],
    )


async def test_parallel_calls_queue_for_the_one_slot_and_all_complete(
    binding: Path, tmp_path: Path
) -> None:
    """Three concurrent calls on one slot: all complete with their own evidence, two queued."""
    tokens = [f"tok-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    sources = [_HOLD, _QUICK, _QUICK]
    results: dict[str, CallToolResult] = {}
    notices: dict[str, list[str]] = {token: [] for token in tokens}
    refused: list[CallToolResult] = []
    finished: list[str] = []
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(
                _params(binding, tmp_path / "state", "--max-envelopes", "1"), errlog=errlog
            ) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()

            async def call(token: str, source: str) -> None:
                async def on_progress(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    notices[token].append(message or "")

                result = await client.call_tool(
                    "cli",
                    {"files": {"src/cli.ts": source}, "args": [token]},
                    progress_callback=on_progress,
                )
                assert isinstance(result, CallToolResult)
                results[token] = result
                finished.append(token)

            async def invalid() -> None:
                result = await client.call_tool("cli", {"files": {"../escape.ts": "x"}})
                assert isinstance(result, CallToolResult)
                refused.append(result)
                finished.append("invalid")

            async with anyio.create_task_group() as calls:
                for token, source in zip(tokens, sources, strict=True):
                    calls.start_soon(call, token, source)
                calls.start_soon(invalid)
        errlog.seek(0)
        assert "Traceback" not in errlog.read()

    for token, source in zip(tokens, sources, strict=True):
        result = results[token]
        assert result.is_error is False, result.content
        assert result.structured_content is not None
        word = "held" if source is _HOLD else "ran"
        assert result.structured_content["stdout"]["head"] == f"{word} {token}\n"
    queued = [t for t in tokens if any(m.startswith("queued:") for m in notices[t])]
    assert len(queued) >= 2, notices
    (refusal,) = refused
    assert refusal.is_error is True
    assert isinstance(refusal.content[0], TextContent)
    assert "/files/..~1escape.ts" in refusal.content[0].text
    assert "still running" not in refusal.content[0].text
    # Refused at once, not after the slot's holder: validation never waits for a slot.
    assert finished.index("invalid") < finished.index(tokens[0])
