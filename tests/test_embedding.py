"""The README's embedding entries, spawned as a host would: the MCP entry and the Flow command.

The README's placeholder paths are swapped for a locked copy of the example and a state
directory of the test's own; everything else (command, arguments, environment) is as written.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.run import read_candidate
from tests.required import require_root

pytestmark = pytest.mark.envelope

REPO = Path(__file__).resolve().parents[1]
SECTION = "## Embedding jigcmd"
PASSING = REPO / "jigcmd" / "example" / "candidates" / "passing"


def block(language: str) -> str:
    """The first fenced block of `language` in the README's embedding section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    fence = f"```{language}\n"
    start = section.index(fence) + len(fence)
    return section[start : section.index("```", start)]


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    """README placeholder → the path this test uses (a locked example copy, a state dir)."""
    require_root()
    jigcmd = Path(sys.executable).parent / "jigcmd"
    assert jigcmd.exists(), f"no jigcmd beside {sys.executable}"
    example = tmp_path / "example"
    shutil.copytree(REPO / "jigcmd" / "example", example)
    subprocess.run(
        [str(jigcmd), "lock", "--binding", str(example / "binding.toml")],
        check=True,
        capture_output=True,
    )
    return {
        "/opt/jigcmd/.venv/bin/jigcmd": str(jigcmd),
        "/root/jigcmd-example/binding.toml": str(example / "binding.toml"),
        "/srv/flow/binding.toml": str(example / "binding.toml"),
        "/var/lib/jigcmd": str(tmp_path / "state"),
    }


def converse(argv: list[str], env: dict[str, str], messages: list[dict[str, Any]]) -> list[Any]:
    """Send each message, read one answer per request, close stdin; the child exits 0."""
    child = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd="/",
    )
    assert child.stdin is not None and child.stdout is not None
    answers = []
    try:
        for message in messages:
            child.stdin.write(json.dumps(message) + "\n")
            child.stdin.flush()
            if "id" in message:
                answers.append(json.loads(child.stdout.readline()))
    finally:
        _, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr
    return answers


def test_the_mcp_servers_entry_starts_a_session_with_one_tool_per_command(
    places: dict[str, str],
) -> None:
    """command, args and env exactly as the README's entry has them; a tools/call completes."""
    entry = json.loads(block("json"))["mcpServers"]["jigcmd"]
    command = places[entry["command"]]
    args = [places.get(arg, arg) for arg in entry["args"]]
    env = {**os.environ, **{k: places.get(v, v) for k, v in entry["env"].items()}}
    tools, called = converse(
        [command, *args],
        env,
        [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "host", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "tests", "arguments": {"files": read_candidate(PASSING)}},
            },
        ],
    )[1:]
    assert [tool["name"] for tool in tools["result"]["tools"]] == ["tests", "cli"]
    result = called["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["exitCode"] == 0
    assert Path(places["/var/lib/jigcmd"]).is_dir()


def test_the_flow_command_line_serves_a_call_and_a_restart_with_its_run_id_replays_it(
    places: dict[str, str],
) -> None:
    """The README's Flow spawn answers a call; the same spawn again answers it from the journal."""
    argv = shlex.split(block("sh").replace("\\\n", " "), comments=True)
    assert "--run-id" in argv
    deadline = time.time_ns() // 1_000_000 + 60_000
    argv[argv.index("--root-deadline-unix-ms") + 1] = str(deadline)
    argv = [places.get(arg, arg) for arg in argv]
    argv += ["--state-dir", places["/var/lib/jigcmd"]]
    call = {
        "jsonrpc": "2.0",
        "id": "call-1",
        "method": "capability/call",
        "params": {
            "operationId": "embedding-1",
            "slot": "command",
            "method": "run",
            # A run prints its own time: a second run would differ, a replay cannot.
            "input": {"command": "cli", "files": {"src/cli.ts": "console.log(Bun.nanoseconds())"}},
            "deadlineUnixMs": deadline - 30_000,
        },
    }
    (first,) = converse(argv, dict(os.environ), [call])
    assert first["result"]["value"]["exitCode"] == 0
    (again,) = converse(argv, dict(os.environ), [call])
    assert again == first
