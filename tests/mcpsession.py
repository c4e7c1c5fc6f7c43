"""One MCP session with a real `jigcmd serve` child, through the official Python SDK.

Shared by the tests that read what an MCP host's model reads: the SDK does the handshake and
checks each structured result against its tool's outputSchema, as a host does.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult

__all__ = ["call_heard", "mcp_session"]


@asynccontextmanager
async def mcp_session(
    binding: Path, state: Path, *extra: str, errlog: Any = None, python: tuple[str, ...] = ()
) -> AsyncIterator[ClientSession]:
    """An initialized session with `jigcmd serve --binding B --state-dir S EXTRA…`.

    The server's stderr goes to `errlog` (a temporary file when None) and must hold no
    traceback when the session ends. `python`: how Python runs jigcmd, when not `-m jigcmd`
    (`-c SOURCE`, to inject a fault first).
    """
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            *(python or ("-m", "jigcmd")),
            "serve",
            "--binding",
            str(binding),
            "--state-dir",
            str(state),
            *extra,
        ],
    )
    with tempfile.TemporaryFile(mode="w+") as own:
        log = errlog or own
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
        log.seek(0)
        assert "Traceback" not in log.read()


async def call_heard(
    session: ClientSession, tool: str, arguments: dict[str, Any]
) -> tuple[CallToolResult, list[str]]:
    """`tools/call` of `tool`, and the message of each progress notification heard meanwhile."""
    heard: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    result = await session.call_tool(tool, arguments, progress_callback=on_progress)
    return result, heard
