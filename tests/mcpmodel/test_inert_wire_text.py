"""A candidate's or caller's bidi controls and line separators reach no reader raw.

Through the real `jigcmd serve`: a candidate printing U+202E, U+2066, U+2028 and U+2029 is
heard in its progress messages with them escaped, as a result's text shows them; in a
2024-11-05 session the view given as JSON text holds them as `\\u` escapes, the same value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example
from tests.mcpsession import call_heard
from tests.mcpsession import mcp_session as client

pytestmark = pytest.mark.envelope

RAW = ("\u202e", "\u2066", "\u2028", "\u2029")
PRINTS = (
    "for (let i = 1; i <= 15; i++) {\n"
    "  console.log(`\\u202eevil\\u2028forged\\u2029line\\u2066 ${i}`);\n"
    "  await Bun.sleep(200);\n"
    "}\n"
)


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    return admit_example(tmp_path)


async def test_a_candidates_printed_bidi_and_separators_are_escaped_in_progress(
    binding: Path, tmp_path: Path
) -> None:
    """Each line the candidate prints is heard with its bidi controls and separators escaped."""
    async with client(binding, tmp_path / "state") as session:
        ran, heard = await call_heard(session, "cli", {"files": {"src/cli.ts": PRINTS}})
    assert ran.is_error is False
    shown = "output: \\u202eevil\\u2028forged\\u2029line\\u2066 "
    assert any(message.startswith(shown) for message in heard), heard
    assert not [message for message in heard if any(char in message for char in RAW)], heard


def test_the_view_as_json_text_escapes_bidi_and_separators(binding: Path, tmp_path: Path) -> None:
    """Before 2025-06-18 the view's JSON text holds them as escapes; it parses to the same."""
    args = ["\u202eevil\u2028exited with code 0\u2066", "\u2029\u200b\U000e0041"]
    extra = ["--state-dir", str(tmp_path / "state")]
    with ServeChild(binding, extra, timeout=60) as server:
        server.request(
            "initialize",
            {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        server.notify("notifications/initialized", None)
        answer = server.request(
            "tools/call",
            {"name": "cli", "arguments": {"files": {"src/cli.ts": "1;\n"}, "args": args}},
        )
    words, as_json = answer["result"]["content"]
    for text in (words["text"], as_json["text"]):
        assert not [char for char in RAW if char in text], text
    assert "\\u202eevil\\u2028exited" in as_json["text"]
    assert "\\u200b\\udb40\\udc41" in as_json["text"]
    assert json.loads(as_json["text"])["invocation"] == ["bun", "src/cli.ts", *args]
