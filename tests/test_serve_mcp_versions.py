"""Older MCP clients through the real `jigcmd serve`: each version answered and shaped for it.

The official SDK client offers its newest handshake version; the tests make it offer an
older one (its `LATEST_HANDSHAKE_VERSION`, read when it initializes) and check that it
accepts jigcmd's answer and gets the evidence the way that version carries it. The JSON-RPC
details the SDK's own server shows (blank lines, stray responses, unknown methods before
`initialize`) are checked with raw frames on the same real server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import mcp.client.session
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from jigcmd.frontends.servechild import ServeChild
from jigcmd.protocol.mcp_view import DEFAULT_BUDGET_BYTES
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

_QUICK = 'console.log("ran " + process.argv.slice(2).join(" "));\n'


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    """The example, admitted in a temporary copy."""
    return admit_example(tmp_path)


def _serve(binding: Path, state: Path) -> list[str]:
    return ["-m", "jigcmd", "serve", "--binding", str(binding), "--state-dir", str(state)]


@pytest.mark.parametrize(
    ("version", "structured"),
    [("2024-11-05", False), ("2025-03-26", False), ("2025-06-18", True), ("2025-11-25", True)],
)
async def test_the_sdk_client_offering_each_version_gets_it_and_results_shaped_for_it(
    binding: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, structured: bool
) -> None:
    """The offered version is answered; before 2025-06-18 the evidence is JSON text only."""
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", version)
    params = StdioServerParameters(command=sys.executable, args=_serve(binding, tmp_path / "s"))
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            init = await client.initialize()
            assert init.protocol_version == version
            listed = await client.list_tools()
            assert all((tool.output_schema is not None) is structured for tool in listed.tools)
            ran = await client.call_tool("cli", {"files": {"src/cli.ts": _QUICK}, "args": ["v"]})
        errlog.seek(0)
        assert "Traceback" not in errlog.read()
    assert isinstance(ran, CallToolResult)
    assert ran.is_error is False, ran.content
    assert (ran.structured_content is not None) is structured
    if structured:
        # stdout, stderr and the run's signed statement.
        assert [block.type for block in ran.content] == ["text", *["resource_link"] * 3]
        view = ran.structured_content
    else:
        # Before 2025-06-18: the words, then the same budgeted view as JSON text.
        _words, as_json = ran.content
        assert isinstance(as_json, TextContent)
        view = json.loads(as_json.text)
    assert view is not None
    assert (view["exitCode"], view["stdout"]["head"]) == (0, "ran v\n")
    assert view["budgetBytes"] == DEFAULT_BUDGET_BYTES


def test_blank_lines_stray_responses_and_early_unknown_methods_match_the_sdk_server(
    binding: Path, tmp_path: Path
) -> None:
    """Blank lines and responses get no answer; an unknown method before initialize is -32601."""
    frames = [
        b"",
        b"   \r",
        b'{"jsonrpc":"2.0","id":41,"result":{"roots":[]}}',
        b'{"jsonrpc":"2.0","id":"early","method":"prompts/list"}',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26",'
        b'"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}',
        b"",
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no sampling here"}}',
        b'{"jsonrpc":"2.0","id":2,"method":"ping"}',
    ]
    done = subprocess.run(
        [sys.executable, *_serve(binding, tmp_path / "s")],
        input=b"\n".join(frames) + b"\n",
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["early", 1, 2]
    assert answers[0]["error"]["code"] == -32601
    assert answers[1]["result"]["protocolVersion"] == "2025-03-26"
    assert answers[2]["result"] == {}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
def test_each_tool_says_its_streams_uri_returns_what_was_kept_not_all_output(
    binding: Path, tmp_path: Path, version: str
) -> None:
    """Past the 64 KiB kept the output is cut: a stream's uri returns all that was kept."""
    handshake = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw"}}
    with ServeChild(binding, ["--state-dir", str(tmp_path / "s")]) as server:
        server.request("initialize", handshake)
        server.notify("notifications/initialized", None)
        tools = server.request("tools/list", {})["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["tests", "cli"]
    for tool in tools:
        assert (
            "(the first 64 KiB of each are kept; resources/read of the stream's uri returns all "
            "that was kept; past them, the bytes written in all and the stream's end)"
        ) in tool["description"]
