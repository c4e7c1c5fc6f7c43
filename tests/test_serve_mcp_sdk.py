"""The official MCP Python SDK client drives the real `jigcmd serve` over the bundled example."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import jsonschema
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

from jigcmd.protocol.mcp_view import DEFAULT_BUDGET_BYTES
from tests.admitted_example import EXAMPLE, admit_example

pytestmark = pytest.mark.envelope

PASSING = EXAMPLE / "candidates" / "passing"


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    """The example, admitted in a temporary copy."""
    return admit_example(tmp_path)


async def test_the_official_mcp_client_runs_the_example_through_jigcmd_serve(
    binding: Path, tmp_path: Path
) -> None:
    """initialize, list_tools (valid schemas), a refused call, a real run, ping, shutdown."""
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
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
        ],
    )
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            init = await client.initialize()
            assert (init.protocol_version, init.server_info.name) == ("2025-11-25", "jigcmd")

            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["tests", "cli"]
            for tool in listed.tools:
                jsonschema.Draft202012Validator.check_schema(tool.input_schema)
                assert tool.output_schema is not None
                jsonschema.Draft202012Validator.check_schema(tool.output_schema)
            assert "args" not in listed.tools[0].input_schema["properties"]
            assert "args" in listed.tools[1].input_schema["properties"]
            tests, cli = listed.tools
            assert tests.title is not None and tests.title.startswith("bun test test/project")
            assert "Runs `bun test test/project.test.ts`" in (tests.description or "")
            assert "`files` must include `src/cli.ts`" in (cli.description or "")

            refused = await client.call_tool("tests", {"files": {"../escape.ts": "x"}})
            assert refused.is_error is True
            assert isinstance(refused.content[0], TextContent)
            assert "/files/..~1escape.ts" in refused.content[0].text

            # The SDK validates the structured content against outputSchema itself.
            ran = await client.call_tool("cli", {"files": files, "args": ["--x"], "stdin": "r\n"})
            assert ran.is_error is False, ran.content
            assert ran.structured_content is not None
            view = ran.structured_content
            assert (view["exitCode"], view["cleanup"]) == (0, "complete")
            assert view["stdout"]["head"] == '{"args":["--x"],"records":["r"]}\n'
            # The words and the view together within the budget, the streams linked.
            text, *links = ran.content
            assert isinstance(text, TextContent)
            assert text.text.startswith("`bun src/cli.ts --x` exited with code 0")
            assert len(text.text.encode()) <= DEFAULT_BUDGET_BYTES
            # stdout, stderr and the run's signed statement.
            assert [link.type for link in links] == ["resource_link"] * 3

            await client.send_ping()
        errlog.seek(0)
        assert "Traceback" not in errlog.read()
