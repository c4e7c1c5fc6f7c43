"""`jigcmd verify` of an MCP tool result as a host holds it, and of one with forged `_meta`.

Through `jigcmd serve` and the official MCP SDK: `call_tool`'s result, dumped as a host
stores it, is evidence as the `result` of a whole answer is, and as FILE is refused by name;
a jigcmd `_meta` key in both eras' spellings fails, whichever of the two is genuine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.admitted_example import EXAMPLE, admit_example
from tests.mcpsession import mcp_session
from tests.mcpverify import verify_result

pytestmark = pytest.mark.envelope

PASSING = EXAMPLE / "candidates" / "passing"


async def _tests_result(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The state directory, and the `tests` call's result as a host stores it."""
    binding = admit_example(tmp_path)
    state = tmp_path / "state"
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
    async with mcp_session(binding, state, "--run-id", "run-mcp-answer") as client:
        ran = await client.call_tool("tests", {"files": files})
    return state, ran.model_dump(mode="json", by_alias=True, exclude_none=True)


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "verify", *args],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


async def test_a_bare_tool_result_is_evidence_and_not_a_bundle(tmp_path: Path) -> None:
    """The SDK's result with no JSON-RPC line around it: checked whole as --evidence; as
    FILE, status 2 saying what it is and where its statement is."""
    state, result = await _tests_result(tmp_path)
    lines = verify_result(state, tmp_path, result, result)
    assert lines[-1] == "verified", lines
    for said in (
        "ok   isError: false, as a call that ended 'exited' is",
        "ok   content: its text is the words of the checked structuredContent",
    ):
        assert said in lines, lines
    assert any(line.startswith("ok   attestation: names this statement") for line in lines)
    (tmp_path / "result.json").write_text(json.dumps(result))
    as_file = _verify(str(tmp_path / "result.json"), "--state-dir", str(state))
    assert as_file.returncode == 2, as_file.stdout + as_file.stderr
    assert "not a bundle: an MCP tool result, which carries no statement: fetch it with " in (
        as_file.stderr
    )
    assert "give this result as --evidence" in as_file.stderr
    # Text alone, as before 2025-06-18: nothing to check, said as such.
    old = {key: value for key, value in result.items() if key != "structuredContent"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    bundle, evidence = str(tmp_path / "b.jsonl"), str(tmp_path / "old.json")
    refused = _verify(bundle, "--state-dir", str(state), "--evidence", evidence)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "an MCP tool result without `structuredContent`" in refused.stderr


async def test_a_meta_key_in_both_spellings_fails(tmp_path: Path) -> None:
    """A forged report and attestation under `jigcmd/`, the genuine ones under
    `dev.jigcmd/`: neither spelling is passed over; and a link's words are said unsigned."""
    state, result = await _tests_result(tmp_path)
    meta = result["_meta"]
    forged_meta = {
        "jigcmd/report": {**meta["jigcmd/report"], "wallMs": 1.0},
        "jigcmd/attestation": {**meta["jigcmd/attestation"], "runId": "someone-else"},
        "dev.jigcmd/report": meta["jigcmd/report"],
        "dev.jigcmd/attestation": meta["jigcmd/attestation"],
    }
    lines = verify_result(state, tmp_path, result, {**result, "_meta": forged_meta})
    assert lines[-1] == "NOT verified", lines
    for name in ("report", "attestation"):
        said = f"both jigcmd/{name} and dev.jigcmd/{name}: jigcmd writes one era's prefix"
        assert f"FAIL _meta: {said}, never both" in lines, lines
    # The genuine pair alone, under the other era's spelling, holds.
    genuine = {key: value for key, value in forged_meta.items() if key.startswith("dev.")}
    lines = verify_result(state, tmp_path, result, {**result, "_meta": genuine})
    assert lines[-1] == "verified", lines
    links = [line for line in lines if line.startswith("skip content links: ")]
    assert links, lines
    assert links[0].endswith(
        "the server's links, their words (name, title, description) too, not signed"
    )
