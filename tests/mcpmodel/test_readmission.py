"""Tools say the truth about admission, and a lock changed while serving re-admits.

No "reviewed" without a lock; after a drift the tool is unavailable and says why without
naming the edited command; a new lock re-admits and `notifications/tools/list_changed` goes
to the client, as the SDK sees it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "0"},
}
PASSING = 'import { test } from "bun:test";\ntest("t", () => {});\n'
# Re-admission is polled once a second; generous for a loaded machine.
_NOTICE_WITHIN_S = 20.0


def _lock(binding: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
        check=True,
        capture_output=True,
    )


def _notices(server: ServeChild) -> list[dict[str, Any]]:
    return [
        message
        for message in (json.loads(line) for line in server.lines)
        if message.get("method") == "notifications/tools/list_changed"
    ]


def _await_notice(server: ServeChild, count: int) -> None:
    deadline = time.monotonic() + _NOTICE_WITHIN_S
    probe = 0
    while len(_notices(server)) < count:
        assert time.monotonic() < deadline, "no notifications/tools/list_changed"
        probe += 1
        server.ping(f"probe-{probe}")
        time.sleep(0.2)


def _tools(server: ServeChild) -> dict[str, dict[str, Any]]:
    listed = server.request("tools/list", {})["result"]["tools"]
    return {tool["name"]: tool for tool in listed}


def _signed_lock_digest(server: ServeChild, result: dict[str, Any]) -> str:
    """The lock digest the run's signed statement names, read through `resources/read`."""
    (link,) = [
        block
        for block in result["content"]
        if block.get("type") == "resource_link" and block.get("name") == "attestation"
    ]
    read = server.request("resources/read", {"uri": link["uri"]})["result"]
    first = read["contents"][0]["text"].splitlines()[0]
    statement = json.loads(base64.b64decode(json.loads(first)["payload"]))
    digest: str = statement["predicate"]["admission"]["lockDigest"]
    return digest


def _lock_digest(binding: Path) -> str:
    return "sha256:" + hashlib.sha256((binding.parent / "jigcmd.lock").read_bytes()).hexdigest()


def test_a_drift_and_a_new_lock_while_serving_change_the_tools_and_say_so(
    tmp_path: Path,
) -> None:
    binding = admit_example(tmp_path)
    with ServeChild(binding, ["--state-dir", str(tmp_path / "state")], timeout=60) as server:
        init = server.request("initialize", INIT)["result"]
        assert init["capabilities"]["tools"] == {"listChanged": True}
        server.notify("notifications/initialized", None)
        before = _tools(server)
        assert (
            before["tests"]["title"] == "bun test test/project.test.ts (reviewed command 'tests')"
        )

        # The operator edits the Binding: the commands drift to unavailable.
        text = binding.read_text().replace("test/project.test.ts", "test/other.test.ts")
        binding.write_text(text)
        _await_notice(server, 1)
        drifted = _tools(server)
        for tool in drifted.values():
            assert "reviewed" not in tool["title"]
            assert tool["title"].endswith("(unavailable: not admitted)")
            assert tool["description"].startswith("Unavailable: Binding changed since admission")
            # The reason ends as a sentence before the next one begins.
            assert "to review and re-admit. Calls are refused" in tool["description"]
            assert "other.test.ts" not in tool["description"] + tool["title"]
        refused = server.request(
            "tools/call", {"name": "tests", "arguments": {"files": {"test/other.test.ts": "x"}}}
        )["result"]
        assert refused["isError"] is True
        assert refused["_meta"]["jigcmd/error"]["code"] == "UNAVAILABLE"

        # The operator reviews and locks the edit: admitted again, without a restart.
        _lock(binding)
        _await_notice(server, 2)
        admitted = _tools(server)
        assert (
            admitted["tests"]["title"] == "bun test test/other.test.ts (reviewed command 'tests')"
        )
        ran = server.request(
            "tools/call",
            {
                "name": "tests",
                "arguments": {"files": {"test/other.test.ts": PASSING}},
            },
        )["result"]
        assert ran["isError"] is False, ran
        assert ran["structuredContent"]["tests"]["summary"]["passed"] == 1
        # The statement names the lock that admitted the run: the new one, not the startup's.
        assert _signed_lock_digest(server, ran) == _lock_digest(binding)


def test_an_edit_that_keeps_the_size_and_puts_the_mtime_back_is_still_seen(
    tmp_path: Path,
) -> None:
    """Same size, modification time reset with `utime`: the change time still moves."""
    binding = admit_example(tmp_path)
    with ServeChild(binding, ["--state-dir", str(tmp_path / "state")], timeout=60) as server:
        server.request("initialize", INIT)
        server.notify("notifications/initialized", None)
        before = binding.stat()
        text = binding.read_text().replace("test/project.test.ts", "test/projecx.test.ts")
        binding.write_text(text)
        os.utime(binding, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = binding.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        _await_notice(server, 1)
        assert all(
            t["title"].endswith("(unavailable: not admitted)") for t in _tools(server).values()
        )


def test_a_package_edit_while_serving_is_re_read_and_the_log_says_what_happened(
    tmp_path: Path,
) -> None:
    """FLOW.md loses its `uses:` (no Binding or lock edit): the tools become unavailable saying
    why and the log says so; put back, they are available again and the log says that."""
    binding = admit_example(tmp_path)
    manifest = binding.parent / "repair" / "FLOW.md"
    declared = manifest.read_text()
    log = tmp_path / "serve.stderr"
    state = ["--state-dir", str(tmp_path / "state")]
    with ServeChild(binding, state, timeout=60, stderr_path=log) as server:
        server.request("initialize", INIT)
        server.notify("notifications/initialized", None)
        manifest.write_text("---\nname: flows/repair\n---\n\n# no capability declared\n")
        _await_notice(server, 1)
        for tool in _tools(server).values():
            assert tool["title"].endswith("(unavailable: not admitted)")
            assert "does not declare the Project Command capability" in tool["description"]
        manifest.write_text(declared)
        _await_notice(server, 2)
        assert all("reviewed" in tool["title"] for tool in _tools(server).values())
        assert server.close_input() == 0
    said = [line for line in log.read_text().splitlines() if "jigcmd.command.assembly" in line]
    assert len(said) == 2, said
    assert f"{binding} is not admitted: its commands are unavailable: " in said[0]
    assert said[1].endswith(f"re-admitted {binding}: its commands are available")


def test_a_lock_made_while_serving_signs_the_runs_it_admits(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    (binding.parent / "jigcmd.lock").unlink()
    with ServeChild(binding, ["--state-dir", str(tmp_path / "state")], timeout=60) as server:
        server.request("initialize", INIT)
        server.notify("notifications/initialized", None)
        _lock(binding)
        _await_notice(server, 1)
        ran = server.request(
            "tools/call",
            {"name": "tests", "arguments": {"files": {"test/project.test.ts": PASSING}}},
        )["result"]
        assert ran["isError"] is False, ran
        assert _signed_lock_digest(server, ran) == _lock_digest(binding)


def test_without_a_lock_no_tool_says_reviewed(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    (binding.parent / "jigcmd.lock").unlink()
    with ServeChild(binding, ["--state-dir", str(tmp_path / "state")], timeout=60) as server:
        server.request("initialize", INIT)
        for tool in _tools(server).values():
            assert "reviewed" not in tool["title"]
            assert tool["description"].startswith(
                "Unavailable: no lock at <binding dir>/jigcmd.lock"
            )
