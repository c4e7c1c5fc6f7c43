"""A frame no decoder takes is answered under the id its scan finds: exactly that id, or null.

Over the value budget or too deep to decode, a frame's id is found by a scan of tokens. A scan
with no token for `null` took the next key's string for the id (`"id":null,"method":…` was
answered `"id":"method"`); one whose 64 KiB head ended just after an `"id":` key took the
second id of a frame that names two. Raw frames, as a peer writes them, on the real
`jigcmd serve`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.jsonio import faults
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope


def _over_the_value_budget() -> bytes:
    """`"id":null` and 1,000,001 values, then a NaN."""
    zeros = b"0," * faults.MAX_VALUES + b"0"
    return b'{"jsonrpc":"2.0","id":null,"method":"ping","params":{"p":[' + zeros + b'],"x":NaN}}'


def _too_deep() -> bytes:
    """`"id":null` and params nested 3,000 deep."""
    deep = b"[" * 3000 + b"]" * 3000
    return b'{"jsonrpc":"2.0","id":null,"method":"ping","params":' + deep + b"}"


def _id_key_at_64_kib() -> bytes:
    """Two ids; the first `"id":` key ends the first 64 KiB, its value "A" follows them."""
    start = b'{"jsonrpc":"2.0","method":"ping","pad":"'
    key = b'","id":'
    pad = b"x" * (64 * 1024 - len(start) - len(key))
    return start + pad + key + b'"A","p":[' + b"0," * faults.MAX_VALUES + b'0],"id":"B"}'


@pytest.mark.parametrize(
    ("frame", "code", "wrong_ids"),
    [
        (_over_the_value_budget(), -32700, ["method"]),
        (_too_deep(), -32600, ["method"]),
        (_id_key_at_64_kib(), -32700, ["A", "B"]),
    ],
    ids=["null-id-over-the-value-budget", "null-id-too-deep", "id-key-at-64-kib"],
)
@pytest.mark.parametrize("protocol", ["flow", "mcp"])
def test_an_id_a_scan_cannot_name_is_answered_with_null(
    tmp_path: Path, frame: bytes, code: int, wrong_ids: list[str], protocol: str
) -> None:
    """Never under another member's string, nor under the second of two ids."""
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--protocol", protocol]
    with ServeChild(binding, args, timeout=60) as server:
        server.ping("p0")
        server.send_bytes(frame + b"\n")
        server.ping("p1")
        assert server.answer(None)["error"]["code"] == code
        assert not any(server.answered(wrong) for wrong in wrong_ids)
        assert server.close_input() == 0
