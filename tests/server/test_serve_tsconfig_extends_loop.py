"""A tsconfig.json that extends itself, three times over, is answered: the model sends the
files, so its `extends` must not make `jigcmd serve` walk 3^16 layers (every walk reads each
config once). The real `jigcmd serve` child, driven by the official MCP Python SDK."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.admitted_example import EXAMPLE, admit_example
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

PASSING = EXAMPLE / "candidates" / "passing"
_LOOP = json.dumps({"extends": ["./tsconfig.json"] * 3})
# A guard, not an assertion: unfixed, the call is never answered and the test would hang.
_GUARD_SECONDS = 300


async def test_a_tsconfig_extending_itself_thrice_is_answered(tmp_path: Path) -> None:
    """The `tests` call on a candidate whose tsconfig.json extends itself gets its result."""
    binding = admit_example(tmp_path)
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
    files["tsconfig.json"] = _LOOP
    with anyio.fail_after(_GUARD_SECONDS):
        async with mcp_session(binding, tmp_path / "state") as session:
            result = await session.call_tool("tests", {"files": files})
    view = result.structured_content
    assert view is not None, result.content
    assert view["tests"]["summary"]["failed"] == 0, view
