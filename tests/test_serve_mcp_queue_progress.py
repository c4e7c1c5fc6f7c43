"""A queued MCP call with a progress token keeps hearing of its place until it runs.

Driven in raw frames on the real `jigcmd serve` with one envelope slot: A holds it, B and C
wait behind it, C asks for progress. C hears `queued: … (1 ahead)` again and again while B
waits too, then `(0 ahead)` while B runs, then its own run's progress: a host whose timeout
restarts on progress (the TypeScript SDK's `resetTimeoutOnProgress`) keeps it alive, and
`progress` rises the whole way, across the switch from waiting to running.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

# A failsafe for each step to be told, never a timing claim.
WAIT_S = 60.0


def _hold(seconds: float) -> str:
    """Holds its envelope, busy (no timer can end it early), then prints its token."""
    return (
        f"const end = Date.now() + {round(seconds * 1000)};\n"
        "while (Date.now() < end) {}\n"
        'console.log("held " + process.argv[2]);\n'
    )


def _call(request_id: int, source: str, token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": "cli",
        "arguments": {"files": {"src/cli.ts": source}, "args": [uuid.uuid4().hex[:8]]},
    }
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _told(server: ServeChild, token: str) -> list[dict[str, Any]]:
    """The progress notifications for `token` so far."""
    server.answered(None)  # reads what has arrived
    return [
        message["params"]
        for message in map(json.loads, server.lines)
        if message.get("method") == "notifications/progress"
        and message["params"]["progressToken"] == token
    ]


def _until_told(server: ServeChild, token: str, start: str) -> None:
    """Wait until `token`'s call was told a line beginning with `start`."""
    deadline = time.monotonic() + WAIT_S
    while not any(p["message"].startswith(start) for p in _told(server, token)):
        assert time.monotonic() < deadline, f"{token} never told {start!r}"
        time.sleep(0.02)


def test_a_queued_call_hears_its_place_until_it_runs_on_one_rising_scale(
    tmp_path: Path,
) -> None:
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--max-envelopes", "1"]
    with ServeChild(binding, args, timeout=90) as server:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
        assert "result" in server.request("initialize", hello)
        server.notify("notifications/initialized", None)
        # In this order: A holds the slot, B waits for it, C waits behind B.
        server.send(_call(11, _hold(2.0), "a"))
        _until_told(server, "a", "running ")
        server.send(_call(12, _hold(1.5), "b"))
        _until_told(server, "b", "queued:")
        server.send(_call(13, _hold(0), "c"))
        for request_id in (11, 12, 13):
            assert server.answer(request_id)["result"]["isError"] is False
        assert server.close_input() == 0
    told = _told(server, "c")
    messages = [params["message"] for params in told]
    waiting = [m for m in messages if m.startswith("queued:")]
    # Told again while it waits, its place as it is now: behind B, then next.
    assert sum(m.endswith("(1 ahead)") for m in waiting) >= 2, messages
    assert any(m.endswith("(0 ahead)") for m in waiting), messages
    assert messages[: len(waiting)] == waiting, "told it waits after it began to run"
    assert any(m.startswith("running ") for m in messages), messages
    progress = [params["progress"] for params in told]
    assert progress == sorted(set(progress)), f"progress must rise: {progress}"
    # No total while waiting (the run's ceiling starts once it has a slot); then one.
    assert all("total" not in params for params in told[: len(waiting)])
    assert all("total" in params for params in told[len(waiting) :])
