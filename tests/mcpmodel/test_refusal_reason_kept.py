"""A refusal naming a long name still says what is wrong with it, in the text a model reads.

Through `jigcmd serve` and the MCP Python SDK: a file path of 1,107 bytes and an unknown
argument name of 1,100 characters are refused with a pointer to them. The text is cut to
1,024 characters, so the pointer is quoted by its start and end, and the reason after it
(the path's length, the arguments the tool takes) is whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_types import TextContent

from jigcmd.errors import MESSAGE_MAX_CHARS
from tests.admitted_example import admit_example
from tests.mcpsession import mcp_session as client

pytestmark = pytest.mark.envelope

FILES = {"src/cli.ts": "console.log('ran');\n"}
LONG_PATH = "src/" + "a" * 1100 + ".ts"
LONG_KEY = "x" * 1100


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    return admit_example(tmp_path)


def _text(result: Any) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


async def test_the_reason_after_a_long_pointer_is_never_cut(binding: Path, tmp_path: Path) -> None:
    """Each text ends with its reason; the pointer shows its first and last characters."""
    async with client(binding, tmp_path / "state") as session:
        path = await session.call_tool("cli", {"files": {**FILES, LONG_PATH: "1"}})
        key = await session.call_tool("cli", {"files": FILES, LONG_KEY: 1})
    assert path.is_error is True and key.is_error is True
    said = _text(path)
    assert said.startswith("INVALID_INPUT: /files/src~1aaa"), said
    assert said.endswith("aaa.ts: path is 1107 bytes, more than 256"), said
    assert len(said) < MESSAGE_MAX_CHARS
    said = _text(key)
    assert said.startswith("INVALID_INPUT: /xxx"), said
    assert said.endswith("xxx: unknown argument (tool 'cli' takes files, args, stdin)"), said
    # The pointer in `_meta` is still cut only as every detail is, its length said.
    wire = key.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["_meta"]["jigcmd/error"]["details"]["pointerChars"] == 1 + len(LONG_KEY)


async def test_a_pointer_that_leaves_room_for_the_reason_is_quoted_whole(
    binding: Path, tmp_path: Path
) -> None:
    """A 307-byte path: its pointer and its reason both fit, so neither is cut."""
    path = "src/" + "a" * 300 + ".ts"
    async with client(binding, tmp_path / "state") as session:
        refused = await session.call_tool("cli", {"files": {**FILES, path: "1"}})
    said = _text(refused)
    pointer = "/files/" + path.replace("/", "~1")
    assert said == f"INVALID_INPUT: {pointer}: path is 307 bytes, more than 256", said
