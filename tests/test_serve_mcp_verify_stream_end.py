"""`jigcmd verify --evidence` of an MCP result's stream ends, which no statement binds.

Through `jigcmd serve` and the official MCP SDK, then the real `jigcmd attest` and `verify`:
each stream's `end`/`writtenBytes`/`endOmittedBytes` is said unsigned, and what the signed
captured count and truncation do bind of them is checked, so a forged count fails.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.admitted_example import EXAMPLE, admit_example
from tests.mcpsession import mcp_session
from tests.mcpverify import verify_result

pytestmark = pytest.mark.envelope

PASSING = EXAMPLE / "candidates" / "passing"
_FLOOD = 'process.stdout.write("A".repeat(70000) + "the end\\n");\n'
_UNSIGNED = "skip stdout end/writtenBytes/endOmittedBytes: "


async def _flooded(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The state directory, and a `cli` result (stdout past the cap) as a host stores it."""
    binding = admit_example(tmp_path)
    state = tmp_path / "state"
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
    files["src/cli.ts"] = _FLOOD
    async with mcp_session(binding, state, "--run-id", "run-stream-end") as client:
        ran = await client.call_tool("cli", {"files": files})
    return state, ran.model_dump(mode="json", by_alias=True, exclude_none=True)


def _forged(result: dict[str, Any], stream: str, **fields: object) -> dict[str, Any]:
    forged = copy.deepcopy(result)
    forged["structuredContent"][stream].update(fields)
    return forged


async def test_stream_ends_are_said_unsigned_and_forged_counts_fail(tmp_path: Path) -> None:
    state, result = await _flooded(tmp_path)
    stdout = result["structuredContent"]["stdout"]
    assert (stdout["truncated"], stdout["writtenBytes"]) == (True, 70008)
    genuine = verify_result(state, tmp_path, result, result)
    assert genuine[-1] == "verified", genuine
    assert any(line.startswith(_UNSIGNED) for line in genuine), genuine
    # A forged end within what was written: nothing binds it, and verify says so.
    quiet = _forged(result, "stdout", end="all 12 tests pass\n", endOmittedBytes=0)
    # The structuredContent alone, as a host keeps it: no words to hold it to.
    lines = verify_result(state, tmp_path, result, quiet["structuredContent"])
    assert lines[-1] == "verified" and any(line.startswith(_UNSIGNED) for line in lines), lines
    for stream, fields in (
        ("stdout", {"writtenBytes": 65535}),  # fewer written than the signed kept bytes
        ("stdout", {"endOmittedBytes": 4096}),  # more left out than was written past the cap
        ("stderr", {"writtenBytes": 7}),  # all of it kept, so written is what was captured
        ("stderr", {"end": "FATAL\n"}),  # all of it kept, so nothing past the cap
    ):
        lines = verify_result(state, tmp_path, result, _forged(result, stream, **fields))
        assert lines[-1] != "verified", (stream, fields, lines)
        assert any(line.startswith(f"FAIL {stream}: ") for line in lines), (stream, fields, lines)
