"""A call stopped by its deadline shows the model its notes and each stream's end, as a
completed call does: the real `jigcmd serve` child, driven by the official MCP Python SDK."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from tests.admitted_example import EXAMPLE, admit_example
from tests.mcpsession import mcp_session

pytestmark = [pytest.mark.envelope, pytest.mark.slow]

PASSING = EXAMPLE / "candidates" / "passing"
# A snapshot test (a note), then a test that floods stdout until the deadline stops it.
_FLOODS = (
    'import { test, expect } from "bun:test";\n'
    'test("snapshot", () => expect({ v: 1 }).toMatchSnapshot());\n'
    'test("floods", () => {\n'
    '  const line = "x".repeat(1023) + "\\n";\n'
    "  while (true) process.stdout.write(line);\n"
    "});\n"
)


async def test_a_call_stopped_by_its_deadline_keeps_its_notes_and_streams_end(
    tmp_path: Path,
) -> None:
    binding = admit_example(tmp_path)
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
    files["test/project.test.ts"] = _FLOODS
    async with mcp_session(binding, tmp_path / "state") as session:
        listed = await session.list_tools()
        (schema,) = [t.output_schema for t in listed.tools if t.name == "tests"]
        result = await session.call_tool("tests", {"files": files})
    assert result.is_error is True
    assert result.meta is not None
    assert result.meta["jigcmd/error"]["code"] == "DEADLINE_EXCEEDED"
    view = result.structured_content
    assert view is not None
    assert schema is not None
    jsonschema.Draft202012Validator(schema).validate(view)
    (note,) = view["notes"]
    assert note.startswith("snapshot tests cannot pass in the envelope: test/project.test.ts")
    stdout = view["stdout"]
    assert stdout["truncated"] is True
    assert stdout["writtenBytes"] > stdout["capturedBytes"] == 65536
    assert stdout["end"].endswith("x" * 1023 + "\n") or set(stdout["end"]) == {"x", "\n"}
