"""A request whose `_meta` is not MCP's shape is refused with -32602 before anything runs.

MCP defines `_meta` as an object and its `progressToken` as a string or an integer. A
`tools/call` with `_meta: "x"` or `[1]`, or a token `{"a": 1}` or `1.5`, was run with no
progress heard; now each is -32602 naming the member, in the handshake era and in the
per-request era, and so is any other request jigcmd serves. A malformed token is sent
through the MCP Python SDK (a loosely typed request, as the TypeScript SDK's
`client.request` sends one); a `_meta` that is no object, which the SDK cannot send, in raw
frames. The journal holds only the well-formed call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import Request, Result

from jigcmd.frontends.runs import list_runs
from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example
from tests.mcpsession import mcp_session as client

pytestmark = pytest.mark.envelope

FILES = {"src/cli.ts": "console.log('ran');\n"}
CALL = {"name": "cli", "arguments": {"files": FILES}}
# Each request jigcmd serves in both eras, as its params without `_meta`.
REQUESTS: list[tuple[str, dict[str, Any]]] = [("tools/call", CALL), ("tools/list", {})]
NOT_AN_OBJECT = "Invalid params: /_meta must be an object"
NOT_A_TOKEN = "Invalid params: /_meta/progressToken must be a string or an integer"
BAD_TOKENS: list[object] = [{"a": 1}, 1.5, None, True]
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"},
}


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    return admit_example(tmp_path)


async def test_a_malformed_progress_token_is_refused_through_the_sdk(
    binding: Path, tmp_path: Path
) -> None:
    """tools/call, tools/list and ping with each token that is no string or integer: -32602."""
    state = tmp_path / "state"
    async with client(binding, state) as session:
        for token in BAD_TOKENS:
            for method, params in [*REQUESTS, ("ping", {})]:
                request = Request(
                    method=method, params={**params, "_meta": {"progressToken": token}}
                )
                with pytest.raises(MCPError) as refused:
                    await session.send_request(request, Result)
                error = refused.value.error
                assert (error.code, error.message) == (-32602, NOT_A_TOKEN), (method, token)
        ran = await session.call_tool("cli", {"files": FILES})
        assert ran.is_error is False
    assert len(list_runs(state)) == 1


def test_a_meta_that_is_no_object_is_refused_in_either_era(binding: Path, tmp_path: Path) -> None:
    """`_meta: "x"` and `[1]` after initialize, and in a per-request session (after its
    first call), and a per-request call whose token is a fraction: -32602 each."""
    with ServeChild(binding, ["--state-dir", str(tmp_path / "old")], timeout=60) as handshake:
        assert "result" in handshake.request("initialize", INIT)
        for meta in ("x", [1]):
            for method, params in [*REQUESTS, ("ping", {})]:
                answer = handshake.request(method, {**params, "_meta": meta})
                assert answer["error"] == {"code": -32602, "message": NOT_AN_OBJECT}, method
    assert list_runs(tmp_path / "old") == []
    with ServeChild(binding, ["--state-dir", str(tmp_path / "new")], timeout=60) as modern:
        answer = modern.request("tools/call", {**CALL, "_meta": {**MODERN, "progressToken": 1.5}})
        assert answer["error"] == {"code": -32602, "message": NOT_A_TOKEN}
        ran = modern.request("tools/call", {**CALL, "_meta": {**MODERN, "progressToken": 7}})
        assert ran["result"]["isError"] is False
        for meta in ("x", [1]):
            for method, params in REQUESTS:
                answer = modern.request(method, {**params, "_meta": meta})
                assert answer["error"] == {"code": -32602, "message": NOT_AN_OBJECT}, method
    assert len(list_runs(tmp_path / "new")) == 1
