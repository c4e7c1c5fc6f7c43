"""A candidate printing short lines ends the same way under `run`, Flow and MCP.

24 MiB of "x\\n" (12 Mi lines), written in 18 ms to 0.4 s: under `serve` every line once went
through Python (the progress hook read everything, even for a call that asked for no
progress), so the server spent tens of seconds of its own CPU on it, the candidate waited on
a full pipe and a correct program was DEADLINE_EXCEEDED where `jigcmd run` said exit 0.
The signal is the evidence, not a time: the candidate's own line on stderr says it wrote all
24 MiB, then it exits 0 (the unfixed server could not read 12 Mi lines within the 10 s
deadline: no machine cleans a line in under a microsecond in Python).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example, jigcmd_cli

pytestmark = pytest.mark.envelope

CHATTY = (
    'import { writeSync } from "node:fs";\n'
    'const chunk = Buffer.from("x\\n".repeat(1 << 19)); // 1 MiB, 512 Ki lines\n'
    "for (let i = 0; i < 24; i++) writeSync(1, chunk);\n"
    'writeSync(2, "wrote 24 MiB of short lines\\n");\n'
)
# The candidate's work is milliseconds: its 10 s deadline is generous. A failsafe only.
ANSWER_S = 120.0


def _ended_well(exit_code: object, stdout: str, stderr: str) -> None:
    """Exit 0 after writing all 24 MiB, the first 64 KiB of it kept."""
    assert stderr == "wrote 24 MiB of short lines\n"
    assert exit_code == 0
    assert stdout.startswith("x\nx\n") and set(stdout) == {"x", "\n"}


def test_run_says_exit_0(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    (tmp_path / "files" / "src").mkdir(parents=True)
    (tmp_path / "files" / "src" / "cli.ts").write_text(CHATTY)
    done = jigcmd_cli(
        "run",
        *("--binding", str(binding), "--state-dir", str(tmp_path / "state")),
        *("cli", "--files", str(tmp_path / "files"), "--json"),
    )
    assert done.returncode == 0, done.stderr
    evidence = json.loads(done.stdout)["evidence"]
    _ended_well(evidence["exitCode"], evidence["stdout"]["text"], evidence["stderr"]["text"])
    assert evidence["stdout"]["truncated"]


def test_flow_says_exit_0(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--protocol", "flow"]
    with ServeChild(binding, args, timeout=ANSWER_S) as server:
        operation = f"op-{uuid.uuid4().hex[:8]}"
        params = {
            "operationId": operation,
            "slot": "command",
            "method": "run",
            "input": {"command": "cli", "files": {"src/cli.ts": CHATTY}},
        }
        answer = server.answer(_sent(server, operation, "capability/call", params))
        assert server.close_input() == 0
    assert "result" in answer, answer
    value = answer["result"]["value"]
    _ended_well(value["exitCode"], value["stdout"]["text"], value["stderr"]["text"])
    assert value["stdout"]["truncated"]


@pytest.mark.parametrize("token", [None, "chatty"], ids=["no-progress", "progress"])
def test_mcp_says_exit_0_with_or_without_progress(tmp_path: Path, token: str | None) -> None:
    binding = admit_example(tmp_path)
    with ServeChild(binding, ["--state-dir", str(tmp_path / "state")], timeout=ANSWER_S) as server:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
        assert "result" in server.request("initialize", hello)
        server.notify("notifications/initialized", None)
        params: dict[str, Any] = {"name": "cli", "arguments": {"files": {"src/cli.ts": CHATTY}}}
        if token is not None:
            params["_meta"] = {"progressToken": token}
        answer = server.answer(_sent(server, 7, "tools/call", params))
        assert server.close_input() == 0
    result = answer["result"]
    assert result["isError"] is False, result["content"]
    structured = result["structuredContent"]
    _ended_well(structured["exitCode"], structured["stdout"]["head"], structured["stderr"]["head"])
    if token is not None:
        told = [
            message["params"]["message"]
            for message in map(json.loads, server.lines)
            if message.get("method") == "notifications/progress"
        ]
        assert told and told[0].startswith("running "), told


def _sent(server: ServeChild, request_id: str | int, method: str, params: object) -> str | int:
    server.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    return request_id
