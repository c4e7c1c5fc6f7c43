"""No refusal of any front names the state directory or the user's home.

HOME, the state directory and the checkout all live under one marked directory; every
refusal each front can be brought to give here (MCP in the handshake and per-request eras,
FLOW Run/1, a start-up failure answered to a peer, jarvis over HTTP) is read whole and must
not contain it. The operator's stderr may, and does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.reservations import Reservations
from tests.admitted_example import EXAMPLE
from tests.jarvis.jarvis_harness import SpyExecutor, harness, make_service
from tests.required import require_root

pytestmark = pytest.mark.envelope

MARK = "jigcmd-home-marker"
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "0"},
}
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Host:
    """A home with a checkout and a state directory in it, all under one marked path."""

    def __init__(self, root: Path, *, locked: bool) -> None:
        self.home = root / MARK
        self.state = self.home / ".local" / "state" / "jigcmd"
        self.checkout = Path(shutil.copytree(EXAMPLE, self.home / "src" / "example"))
        self.binding = self.checkout / "binding.toml"
        if locked:
            subprocess.run(
                [sys.executable, "-m", "jigcmd", "lock", "--binding", str(self.binding)],
                check=True,
                capture_output=True,
            )

    def serve(self, *extra: str) -> ServeChild:
        return ServeChild(self.binding, ["--state-dir", str(self.state), *extra], timeout=60)

    def clean(self, what: object) -> None:
        text = what if isinstance(what, str) else json.dumps(what)
        for path in (self.home, self.state, self.checkout, Path(os.path.realpath(self.home))):
            assert str(path) not in text, text
        assert MARK not in text, text


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_root()
    monkeypatch.setenv("HOME", str(tmp_path / MARK))
    return tmp_path


def _call(server: ServeChild, name: str, arguments: dict[str, Any], **meta: Any) -> Any:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return server.request("tools/call", params)


def test_an_unadmitted_binding_names_no_host_path_in_tools_or_refusals(home: Path) -> None:
    host = Host(home, locked=False)
    with host.serve() as server:
        host.clean(server.request("initialize", INIT))
        listed = server.request("tools/list", {})
        host.clean(listed)
        assert all(
            t["title"].endswith("(unavailable: not admitted)") for t in listed["result"]["tools"]
        )
        refused = _call(server, "tests", {"files": {"a.ts": "x"}})
        assert refused["result"]["isError"] is True
        assert "jigcmd lock --binding <binding dir>/binding.toml" in json.dumps(refused)
        host.clean(refused)
        host.clean(server.request("tools/call", {"name": "cli", "arguments": {}, "_meta": MODERN}))
    with host.serve("--protocol", "flow") as server:
        unavailable = json.loads(
            server.request_raw(
                "capability/call",
                {
                    "operationId": "x",
                    "slot": "command",
                    "method": "run",
                    "input": {"command": "tests", "files": {"a.ts": "x"}},
                },
                request_id="call-1",
            )
        )
        assert "UNAVAILABLE" in json.dumps(unavailable)
        host.clean(unavailable)


def test_every_slot_in_use_is_refused_without_the_state_directory(home: Path) -> None:
    """MCP waits its --queue-wait and refuses; Run/1 refuses at once; neither names the path."""
    host = Host(home, locked=True)
    host.state.mkdir(parents=True, mode=0o700)
    slots = Reservations(host.state, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    try:
        with host.serve("--max-envelopes", "1", "--queue-wait", "0.5") as server:
            server.request("initialize", INIT)
            waited = _call(server, "cli", {"files": {"src/cli.ts": "1"}})
            assert waited["result"]["isError"] is True
            assert "envelope slots are in use" in json.dumps(waited)
            host.clean(waited)
            missing = server.request(
                "resources/read", {"uri": f"jigcmd://run/{host.state}/x/stdout"}
            )
            assert missing["error"]["code"] == -32002
        with host.serve("--max-envelopes", "1", "--protocol", "flow") as server:
            flow = json.loads(
                server.request_raw(
                    "capability/call",
                    {
                        "operationId": "busy",
                        "slot": "command",
                        "method": "run",
                        "input": {"command": "cli", "files": {"src/cli.ts": "1"}},
                    },
                    request_id="call-1",
                )
            )
            assert "envelope slots are in use" in json.dumps(flow)
            host.clean(flow)
    finally:
        held.release()


def test_a_server_that_cannot_start_tells_its_peer_why_without_the_path(home: Path) -> None:
    host = Host(home, locked=True)
    host.state.mkdir(parents=True)
    os.chmod(host.state, 0o777)
    with host.serve() as server:
        refused = server.request("initialize", INIT)
        # Its stderr is read once it has exited: the answer may reach us before that line.
        server.close_input()
        stderr = server.stderr()
    assert "<state dir>" in refused["error"]["message"]
    host.clean(refused)
    assert str(host.state) in stderr


async def test_jarvis_refusals_name_no_state_directory(home: Path) -> None:
    state = home / MARK / "jarvis-state"
    state.mkdir(parents=True)
    slots = Reservations(state, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    service = make_service(SpyExecutor(), reservations=slots, queue_wait=0.3)
    try:
        async with harness(service) as h:
            refused = await h.invoke("jarvis.run.create", argv=["echo", "x"])
            unknown = await h.invoke("jarvis.nothing")
            forbidden = await h.invoke("jarvis.run.create", headers={}, argv=["echo"])
    finally:
        held.release()
    assert refused.status_code == 429
    for answer in (refused, unknown, forbidden):
        assert str(state) not in answer.text and MARK not in answer.text, answer.text
