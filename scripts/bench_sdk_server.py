"""The official MCP SDK's low-level stdio server, for bench_protocol.py.

It serves the tool definitions given as JSON in JIGCMD_BENCH_TOOLS, which the benchmark takes
from jigcmd's own tools/list answer, so both servers answer the same tools/list.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL_DEFINITIONS = [
    types.Tool.model_validate(definition)
    for definition in json.loads(os.environ.get("JIGCMD_BENCH_TOOLS", "[]"))
]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOL_DEFINITIONS)


async def main() -> None:
    server: Server[Any] = Server("sdk-bench", version="1", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
