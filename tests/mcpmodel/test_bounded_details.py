"""A refused call's `_meta["jigcmd/error"].details` is bounded like its text, whatever it quotes.

Through `jigcmd serve` and the MCP Python SDK, a tool call with a 1 MB argument name or a
1 MB file path is refused with a pointer to it: the pointer is cut as the message is (its
start, then `…`), `pointerChars` says how long it was, and the whole result stays small.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jigcmd.errors import MESSAGE_MAX_CHARS
from tests.admitted_example import admit_example
from tests.mcpsession import mcp_session as client

pytestmark = pytest.mark.envelope

HUGE = 1_000_000
FILES = {"src/cli.ts": "console.log('ran');\n"}


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    return admit_example(tmp_path)


async def test_a_pointer_to_a_huge_name_is_cut_and_says_its_length(
    binding: Path, tmp_path: Path
) -> None:
    """A 1 MB argument name and a 1 MB path: each pointer 1,024 characters, marked as cut."""
    calls: dict[str, dict[str, Any]] = {
        "/" + "k" * HUGE: {"files": FILES, "k" * HUGE: 1},
        "/files/" + "p" * HUGE: {"files": {**FILES, "p" * HUGE: "1"}},
    }
    async with client(binding, tmp_path / "state") as session:
        for pointer, arguments in calls.items():
            refused = await session.call_tool("cli", arguments)
            assert refused.is_error is True
            wire = refused.model_dump(mode="json", by_alias=True, exclude_none=True)
            details = wire["_meta"]["jigcmd/error"]["details"]
            assert details["pointer"] == pointer[: MESSAGE_MAX_CHARS - 1] + "…"
            assert details["pointerChars"] == len(pointer)
            assert len(json.dumps(wire)) < 4 * MESSAGE_MAX_CHARS


async def test_a_short_pointer_is_whole_and_says_no_length(binding: Path, tmp_path: Path) -> None:
    """Only a cut pointer carries `pointerChars`: a name ending in "…" is not a cut."""
    async with client(binding, tmp_path / "state") as session:
        refused = await session.call_tool("cli", {"files": FILES, "name…": 1})
    wire = refused.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["_meta"]["jigcmd/error"]["details"] == {"pointer": "/name…", "rule": "input-keys"}
