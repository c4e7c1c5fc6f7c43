"""A call stopped by its deadline keeps its streams and signed statement, as a finished one.

Driven in raw frames on the real `jigcmd serve`: a `cli` candidate that prints 3,000 lines
and then loops and a `tests` candidate whose test never ends, in the handshake era, and the
same loop as a 2026-07-28 task, all three side by side. Each answer is `DEADLINE_EXCEEDED`
with a `resource_link` to its stdout, stderr and statement, and `resources/read` returns
them: the statement's bytes are the digest `_meta` gives. Each carries the run's resource
report in `_meta`, as a completed run's answer does (`dev.jigcmd/report` in 2026-07-28).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example

pytestmark = [pytest.mark.envelope, pytest.mark.slow]

MODERN = "2026-07-28"
TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
_LOOPS = (
    'for (let i = 0; i < 3000; i++) console.log("line " + i);\n'
    'console.log("LAST LINE BEFORE HANG");\n'
    "while (true) {}\n"
)
_HANGS = (
    'import { test } from "bun:test";\n'
    'test("hangs", () => { console.log("LAST LINE BEFORE HANG"); while (true) {} });\n'
)


# A completed run's `_meta["jigcmd/report"]`: a stopped one's has the same.
REPORT_KEYS = {
    "wallMs",
    "setupMs",
    "cpuMs",
    "peakMemoryBytes",
    "oomKilled",
    "pidsLimitHit",
    "deadlineHit",
}


def _meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": TASKS,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }


def _call(request_id: int, name: str, files: dict[str, str], **params: Any) -> dict[str, Any]:
    arguments = {"name": name, "arguments": {"files": files}, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": arguments}


def _linked(
    server: ServeChild, result: dict[str, Any], prefix: str = "", **read: Any
) -> dict[str, str]:
    """Each `resource_link` of `result`, read back: its name -> its text."""
    assert result["isError"] is True
    assert result["_meta"][f"{prefix}jigcmd/error"]["code"] == "DEADLINE_EXCEEDED"
    # What the envelope measured, as a completed run's answer carries it.
    report = result["_meta"][f"{prefix}jigcmd/report"]
    assert set(report) == REPORT_KEYS and report["deadlineHit"] is True
    links = [block for block in result["content"] if block["type"] == "resource_link"]
    assert [link["name"] for link in links] == ["stdout", "stderr", "attestation"]
    assert result["structuredContent"]["stdout"]["uri"] == links[0]["uri"]
    texts = {}
    for link in links:
        answer = server.request("resources/read", {"uri": link["uri"], **read})
        texts[link["name"]] = answer["result"]["contents"][0]["text"]
    statement = texts["attestation"].encode()
    assert result["_meta"][f"{prefix}jigcmd/attestation"]["digest"] == (
        "sha256:" + hashlib.sha256(statement).hexdigest()
    )
    return texts


def test_calls_stopped_by_their_deadline_keep_their_streams_and_statement(
    tmp_path: Path,
) -> None:
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-hung"]
    with ServeChild(binding, args, timeout=90) as server:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}}
        assert "result" in server.request("initialize", hello)
        completed = server.request(
            "tools/call", {"name": "cli", "arguments": {"files": {"src/cli.ts": "1;\n"}}}
        )
        assert set(completed["result"]["_meta"]["jigcmd/report"]) == REPORT_KEYS
        server.send(
            _call(101, "cli", {"src/cli.ts": _LOOPS}),
            _call(102, "tests", {"test/project.test.ts": _HANGS}),
            _call(103, "cli", {"src/cli.ts": _LOOPS}, _meta=_meta()),
        )
        created = server.answer(103)["result"]
        assert created["resultType"] == "task"
        for request_id in (101, 102):
            texts = _linked(server, server.answer(request_id)["result"])
            assert "LAST LINE BEFORE HANG" in texts["stdout"] + texts["stderr"]
        deadline = time.monotonic() + 60
        while True:
            asked = {"taskId": created["taskId"], "_meta": _meta()}
            got = server.request("tasks/get", asked)["result"]
            if got["status"] != "working":
                break
            assert time.monotonic() < deadline
            time.sleep(got["pollIntervalMs"] / 1000)
        assert got["status"] == "completed"
        texts = _linked(server, got["result"], "dev.", _meta=_meta())
        assert texts["stdout"].endswith("LAST LINE BEFORE HANG\n")
        assert server.close_input() == 0
