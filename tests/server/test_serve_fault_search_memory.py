"""Finding where a 16 MiB frame breaks a strict rule costs bounded memory, and the id is answered.

A frame strict parsing refuses is taken apart once more to name its fault and its id. A walk
that formatted every value's JSON pointer held, for a long key over a million numbers, one
copy of that key per number (a 2 MiB frame cost 1.2 GiB; a 16 MiB one a MemoryError and an
`"id": null` answer). Raw frames on the real `jigcmd serve`, its peak RSS read from
/proc/<pid>/status (VmHWM) against its own baseline; the server runs under an address-space
limit so that a regression fails here instead of reaching the host's OOM killer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.protocol.framing import MAX_FRAME_BYTES
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

# Generous: the frame itself, its decoded copies and the answer, far below one copy per value.
_PEAK_GROWTH_BYTES = 512 * 1024 * 1024
_ADDRESS_SPACE = "--as=6000000000"


def _flow(request_id: bytes, key_bytes: int, numbers: int) -> bytes:
    """A Run/1 call whose input holds a `key_bytes` key over `numbers` zeros, then a NaN."""
    zeros = b"0," * (numbers - 1) + b"0"
    return (
        b'{"jsonrpc":"2.0","id":"' + request_id + b'","method":"capability/call","params":'
        b'{"operationId":"op-' + request_id + b'","slot":"command","method":"run",'
        b'"input":{"command":"cli","' + b"k" * key_bytes + b'":[' + zeros + b'],"stdin":NaN}}}\n'
    )


def _peak_rss(pid: int) -> int:
    """VmHWM of `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def test_a_late_fault_in_a_16_mib_frame_is_answered_under_its_id_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """A long key over many values: the pointer of the fault alone is built, once."""
    binding = admit_example(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "--protocol", "flow"]
    launcher = ["prlimit", _ADDRESS_SPACE, "--"]
    with ServeChild(binding, args, launcher=launcher, timeout=60) as server:
        server.ping("p0")
        baseline = _peak_rss(server.pid)
        # Below the value budget, so the fault is looked for and named: 900,000 pointers
        # of a 14 MiB key each, had they been built.
        frame = _flow(b"m1", 14 * 1024 * 1024, 900_000)
        assert len(frame) < MAX_FRAME_BYTES
        server.send_bytes(frame)
        error = server.answer("m1")["error"]
        assert error["data"] == {
            "code": "INVALID_INPUT",
            "details": {"pointer": "/stdin", "rule": "strict-json"},
        }
        # Over the value budget: the rule, under the id, without its pointer.
        frame = _flow(b"m2", 100_000, 8_000_000)
        assert len(frame) < MAX_FRAME_BYTES
        server.send_bytes(frame)
        error = server.answer("m2")["error"]
        assert error["code"] == -32700
        assert error["message"].startswith("Parse error: NaN and Infinity are not JSON numbers")
        server.ping("p1")
        assert _peak_rss(server.pid) - baseline < _PEAK_GROWTH_BYTES
        assert server.close_input() == 0
