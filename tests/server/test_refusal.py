"""A `serve` that cannot start answers each request as its peer sends it, then ends.

On the real `jigcmd serve` with a Binding that does not exist: the official MCP Python SDK
in `auto` mode (`server/discover`, then `initialize` on reading its error) and in `legacy`
mode, a FLOW runtime's calls, and the bounds: a peer that keeps asking, or never reads its
answers, cannot keep the refusing server alive.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from jigcmd.fdwait import readable

REASON = "jigcmd cannot serve: <binding dir>/binding.toml: cannot be read: No such file"
_EXIT_S = 60.0


def _argv(tmp_path: Path) -> list[str]:
    binding = tmp_path / "missing" / "binding.toml"
    return ["-m", "jigcmd", "serve", "--binding", str(binding), "--state-dir", str(tmp_path / "s")]


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_in_each_mode_is_told_why_the_server_cannot_start(
    tmp_path: Path, mode: str
) -> None:
    """auto probes, reads the -32603, then sends initialize: that is answered with it too."""
    params = StdioServerParameters(command=sys.executable, args=_argv(tmp_path))
    with pytest.raises(BaseException) as raised:  # noqa: PT011 - the SDK may group it
        async with Client(params, mode=mode, read_timeout_seconds=_EXIT_S):
            pass
    errors = [leaf for leaf in _leaves(raised.value) if isinstance(leaf, MCPError)]
    assert [(e.code, str(e).startswith(f"Internal error: {REASON}")) for e in errors] == [
        (-32603, True)
    ], [repr(leaf) for leaf in _leaves(raised.value)]


@contextlib.contextmanager
def _start(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The refusing server, killed if a failed test leaves it running."""
    with subprocess.Popen(
        [sys.executable, *_argv(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as server:
        try:
            yield server
        finally:
            if server.poll() is None:
                server.kill()


def _ask(server: subprocess.Popen[bytes], request_id: object, method: str, params: Any) -> None:
    frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    stdin: IO[bytes] | None = server.stdin
    assert stdin is not None
    stdin.write(json.dumps(frame).encode() + b"\n")
    stdin.flush()


def _answer(server: subprocess.Popen[bytes]) -> dict[str, Any]:
    stdout: IO[bytes] | None = server.stdout
    assert stdout is not None
    assert readable(stdout.fileno(), _EXIT_S), "no answer"
    line = stdout.readline()
    assert line, "the server closed its output before answering"
    answer: dict[str, Any] = json.loads(line)
    return answer


def _ended(server: subprocess.Popen[bytes]) -> int:
    """Close stdin (end of input ends the refusal at once) and wait for the status."""
    assert server.stdin is not None
    server.stdin.close()
    return server.wait(_EXIT_S)


def test_a_request_sent_after_reading_the_first_error_is_answered_too(tmp_path: Path) -> None:
    """Claude Code's and the SDK's order in raw frames: discover, its answer, initialize."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    with _start(tmp_path) as server:
        for request_id, method, params in (
            (1, "server/discover", {"_meta": envelope}),
            (2, "initialize", initialize),
        ):
            _ask(server, request_id, method, params)
            answer = _answer(server)
            assert answer["id"] == request_id
            assert answer["error"]["code"] == -32603
            assert answer["error"]["message"].startswith(f"Internal error: {REASON}")
        assert _ended(server) == 2


def test_a_flow_runtime_gets_unavailable_for_each_call_as_before(tmp_path: Path) -> None:
    """Run/1's refusal is unchanged: -32000 `UNAVAILABLE` naming the reason, per call."""
    call = {"operationId": "op-1", "slot": "command", "method": "run", "input": {}}
    with _start(tmp_path) as server:
        for request_id in ("c1", "c2"):
            _ask(server, request_id, "capability/call", call)
            answer = _answer(server)
            assert answer["id"] == request_id
            assert answer["error"]["code"] == -32000
            assert answer["error"]["data"] == {"code": "UNAVAILABLE"}
            assert answer["error"]["message"].startswith(REASON)
        assert _ended(server) == 2


def test_a_peer_that_keeps_asking_cannot_keep_a_refusing_server_alive(tmp_path: Path) -> None:
    """Each answer at once brings the next request; the server still ends, status 2."""
    with _start(tmp_path) as server:
        asked = 0
        while server.poll() is None:
            try:
                _ask(server, asked, "ping", {})
            except BrokenPipeError:
                break
            assert server.stdout is not None
            if not readable(server.stdout.fileno(), _EXIT_S) or not server.stdout.readline():
                break
            asked += 1
        assert server.wait(_EXIT_S) == 2
        assert asked > 1


def test_a_peer_that_never_reads_its_answers_cannot_keep_it_alive(tmp_path: Path) -> None:
    """More answers than a pipe holds, none read: the server stops writing and ends."""
    requests = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": f"{n:04}" + "x" * 400, "method": "ping"}).encode()
        + b"\n"
        for n in range(200)
    )
    with _start(tmp_path) as server:
        assert server.stdin is not None
        # The server may end before it has read them all.
        with contextlib.suppress(BrokenPipeError):
            server.stdin.write(requests)
            server.stdin.flush()
        assert server.wait(_EXIT_S) == 2
