"""An error message that quotes the peer's text is bounded as every message is: 1,024 chars.

A peer's unknown params member, method name or top-level member of 8 MiB is named in its
refusal: the answer keeps the start (which names the rule) and stays one short line, as the
`-32000` messages of Run/1 always were. Driven on the real `jigcmd serve`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jigcmd.errors import MESSAGE_MAX_CHARS
from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

_HUGE = "y" * (8 * 1024 * 1024)


def test_refusals_quoting_megabytes_of_the_peers_text_are_cut_to_1024_characters(
    tmp_path: Path,
) -> None:
    """-32602, -32601 and -32600 keep their rule and stay within the bound."""
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--protocol", "flow"]
    params = {"operationId": "o", "slot": "command", "method": "run", "input": {}, _HUGE: 1}
    frames: list[tuple[dict[str, Any], int, str]] = [
        ({"id": "m1", "method": "capability/call", "params": params}, -32602, "Invalid params"),
        ({"id": "m2", "method": _HUGE}, -32601, "Method not found"),
        ({"id": "m3", "method": "ping", _HUGE: 1}, -32600, "Invalid Request: unknown members"),
    ]
    with ServeChild(binding, args) as server:
        for frame, code, rule in frames:
            server.send_bytes(json.dumps({"jsonrpc": "2.0", **frame}).encode() + b"\n")
            line = server.response(frame["id"])
            error = json.loads(line)["error"]
            assert error["code"] == code
            assert error["message"].startswith(rule)
            assert len(error["message"]) == MESSAGE_MAX_CHARS
            assert error["message"].endswith("…")
            assert len(line) < 2 * MESSAGE_MAX_CHARS
        assert server.close_input() == 0
