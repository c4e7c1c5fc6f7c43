"""Interoperability: the official MCP Python SDK client drives the real server process."""

from __future__ import annotations

import sys
import tempfile

import jsonschema
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

from tests.server.wire_process import FAKE_SERVER, server_env

# A dependency of the MCP SDK; loaded this way because it ships no type information.


async def test_the_official_mcp_client_completes_a_whole_session() -> None:
    """initialize, list_tools with valid schemas, an invalid call, a run, ping, clean shutdown."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(FAKE_SERVER)],
        env={"PYTHONPATH": server_env()["PYTHONPATH"]},
    )
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            init = await client.initialize()
            assert init.protocol_version == "2025-11-25"
            assert init.server_info.name == "jigcmd-fake"

            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["tests", "cli", "locked"]
            for tool in listed.tools:
                jsonschema.Draft202012Validator.check_schema(tool.input_schema)
                assert tool.output_schema is not None
                jsonschema.Draft202012Validator.check_schema(tool.output_schema)
            assert "args" not in listed.tools[0].input_schema["properties"]

            refused = await client.call_tool(
                "tests", {"files": {"test/a.test.ts": "x"}, "stdin": "invalid"}
            )
            assert refused.is_error is True
            assert isinstance(refused.content[0], TextContent)
            assert refused.content[0].text == "INVALID_INPUT: /files: needs 1-64 entries"

            # The SDK validates structured content against the tool's outputSchema itself.
            completed = await client.call_tool("tests", {"files": {"test/a.test.ts": "x"}})
            assert completed.is_error is False
            assert completed.structured_content is not None
            assert completed.structured_content["cleanup"] == "complete"

            await client.send_ping()
        errlog.seek(0)
        assert "Traceback" not in errlog.read()
