"""`jigcmd verify --evidence` takes an MCP result: `structuredContent`, or the whole answer.

Through `jigcmd serve` and the official MCP SDK: each field the result carries is checked
against the signed statement, and what its budget cut leaves out is said to be unchecked.
A stream of bytes that are not UTF-8 has `capturedBytes` as written, the statement's count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.protocol.mcp_results import view_text
from jigcmd.protocol.mcp_view import View
from tests.admitted_example import EXAMPLE, admit_example
from tests.mcpsession import mcp_session
from tests.mcpverify import verify_result

pytestmark = pytest.mark.envelope

PASSING = EXAMPLE / "candidates" / "passing"
# Writes ff fe 00 41 e2 82: a BOM-like pair, a NUL, "A", and a cut 3-byte sequence.
RAW = "process.stdout.write(Buffer.from([0xff, 0xfe, 0x00, 0x41, 0xe2, 0x82]));\n"
NOISY = 'for (let i = 0; i < 4000; i++) console.log("line " + i);\n'


async def _calls(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The state directory, and each call's tools/call result as JSON."""
    binding = admit_example(tmp_path)
    state = tmp_path / "state"
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
    results = []
    async with mcp_session(binding, state, "--run-id", "run-mcp-verify") as client:
        for name, arguments in (
            ("tests", {"files": files}),
            ("cli", {"files": {**files, "src/cli.ts": RAW}}),
            ("cli", {"files": {**files, "src/cli.ts": NOISY}}),
        ):
            ran = await client.call_tool(name, arguments)
            results.append(ran.model_dump(mode="json", by_alias=True, exclude_none=True))
    return state, results


async def test_an_mcp_result_is_checked_against_its_statement(tmp_path: Path) -> None:
    """structuredContent and the whole answer line verify; the text is bound by its digest,
    and a tampered exit code or raw byte count fails the check that binds it."""
    state, (tests, raw, noisy) = await _calls(tmp_path)
    view = tests["structuredContent"]
    lines = verify_result(state, tmp_path, tests, view)
    assert lines[-1] == "verified", lines
    assert {line.split(":")[0] for line in lines} >= {
        "ok   candidate", "ok   stdout", "ok   stderr", "ok   ending", "skip tests",
    }  # fmt: skip
    answer = {"jsonrpc": "2.0", "id": 2, "result": tests}
    assert verify_result(state, tmp_path, tests, answer)[-1] == "verified"
    tampered = {**view, "exitCode": 1}
    lines = verify_result(state, tmp_path, tests, tampered)
    assert "FAIL ending: the result differs from the statement in exitCode" in lines
    assert lines[-1] == "NOT verified"
    # Bytes that are not UTF-8: the result counts them as written, as the statement does.
    stdout = raw["structuredContent"]["stdout"]
    assert stdout["capturedBytes"] == 6, stdout
    assert stdout["head"] == "\ufffd\ufffd\x00A\ufffd"
    assert verify_result(state, tmp_path, raw, raw["structuredContent"])[-1] == "verified"
    as_text = {**raw["structuredContent"], "stdout": {**stdout, "capturedBytes": 11}}
    lines = verify_result(state, tmp_path, raw, as_text)
    assert "FAIL stdout: the result's stdout differs in capturedBytes" in lines
    # A stream cut to its head and tail: the digest binds it, the cut is said to be unchecked.
    lines = verify_result(state, tmp_path, noisy, noisy["structuredContent"])
    assert lines[-1] == "verified", lines
    assert any(line.startswith("skip stdout head/tail: ") for line in lines), lines


async def test_a_head_and_tail_that_cannot_be_the_signed_stream_fail(tmp_path: Path) -> None:
    """Digest, captured bytes and truncation right, but a head rewritten: with no bytes said
    left out the digest refuses it; with some, a head longer than the stream the statement
    counts fails, and what no signature binds (budget, links, a cut) is a skip line."""
    state, (tests, _raw, noisy) = await _calls(tmp_path)
    view = tests["structuredContent"]
    stdout, stderr = view["stdout"], view["stderr"]
    forged_head = "I am forged: everything is on fire\n"
    assert len(forged_head) > stdout["capturedBytes"], stdout
    forged = {
        **view,
        "stdout": {**stdout, "head": forged_head, "omittedBytes": 1, "tail": ""},
        "stderr": {**stderr, "head": stderr["head"][:10], "omittedBytes": 0},
    }
    lines = verify_result(state, tmp_path, tests, forged)
    assert lines[-1] == "NOT verified", lines
    assert (
        "FAIL stdout: the result's stdout head, tail and omittedBytes need at least "
        f"{len(forged_head) + 1} captured bytes, more than the {stdout['capturedBytes']} captured"
    ) in lines
    assert "FAIL stderr: the result's stderr head and tail are not the signed text" in lines
    # Too few bytes said, or fewer than none, cannot be the stream either.
    for said, short in (
        ("do not add up: omittedBytes -1 is negative", {"omittedBytes": -1}),
        (
            f"add up to 15 bytes of text, too few for the {stdout['capturedBytes']} captured",
            {"head": stdout["head"][:10], "omittedBytes": 5},
        ),
    ):
        lines = verify_result(state, tmp_path, tests, {**view, "stdout": {**stdout, **short}})
        assert f"FAIL stdout: the result's stdout head, tail and omittedBytes {said}" in lines
    lines = verify_result(state, tmp_path, tests, {**view, "cleanup": "unconfirmed"})
    assert "FAIL ending: the result differs from the statement in cleanup" in lines
    # An invocation cut to the budget holds by its kept prefixes, and says the rest is unseen.
    invocation = view["invocation"]
    cut = {**view, "invocation": [*invocation[:-1], invocation[-1][:2] + "…"]}
    lines = verify_result(state, tmp_path, tests, cut)
    assert lines[-1] == "verified", lines
    assert any(line.startswith("skip invocation cut: cut to the budget: ") for line in lines)
    lines = verify_result(state, tmp_path, tests, view)
    assert lines[-1] == "verified", lines
    assert not any(line.startswith("skip invocation cut") for line in lines), lines
    assert not any(line.startswith("skip unknown fields") for line in lines), lines
    # A field jigcmd does not write is said, whatever it claims: no fact of the run.
    claims = {**view, "passed": True, "stdout": {**view["stdout"], "clean": True}}
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": claims}}
    lines = verify_result(state, tmp_path, tests, answer)
    assert lines[-1] == "verified", lines
    assert (
        "skip unknown fields: not fields of jigcmd's result, so no fact of the run: "
        "$.result.structuredContent.passed, $.result.structuredContent.stdout.clean"
    ) in lines
    budget = view["budgetBytes"]
    said = f"skip budgetBytes: {budget}: the size the server cut this result to, not signed"
    assert said in lines
    assert any(line.startswith("skip stdout uri: jigcmd://run/") for line in lines), lines
    # A real cut holds, and says its head and tail are checked only for fitting.
    lines = verify_result(state, tmp_path, noisy, noisy["structuredContent"])
    assert lines[-1] == "verified", lines
    assert any(line.startswith("skip stdout head/tail: ") for line in lines), lines


_LOOPS = 'console.log("before the hang");\nwhile (true) {}\n'


def _answers(tmp_path: Path, binding: Path, run_id: str, *sources: str) -> list[dict[str, Any]]:
    """Each `cli` call's whole answer line, in a raw-framed session of `jigcmd serve`."""
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", run_id]
    with ServeChild(binding, args, timeout=90) as server:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}}
        assert "result" in server.request("initialize", hello)
        answers = [
            server.request("tools/call", {"name": "cli", "arguments": {"files": {"src/cli.ts": s}}})
            for s in sources
        ]
        assert server.close_input() == 0
    return answers


@pytest.mark.slow
def test_the_whole_mcp_answer_is_checked_not_only_its_structured_content(tmp_path: Path) -> None:
    """A stopped call's answer rewritten to read as a clean exit (isError false or absent,
    error code, text, report) fails each part the statement signs; a field jigcmd never
    writes is named; and another session's answer to the same call names another statement
    and fails."""
    binding = admit_example(tmp_path)
    ended, stopped = _answers(tmp_path, binding, "run-a", "1;\n", _LOOPS)
    (other,) = _answers(tmp_path, binding, "run-b", "1;\n")
    state = tmp_path / "state"
    lines = verify_result(state, tmp_path, stopped["result"], stopped)
    assert lines[-1] == "verified", lines
    for said in (
        "ok   isError: true, as a call that ended 'deadline' is",
        "ok   error: DEADLINE_EXCEEDED, as the statement's stop reason says",
        "ok   content: its text is the words of the checked structuredContent",
    ):
        assert said in lines, lines
    result = stopped["result"]
    meta = {k: v for k, v in result["_meta"].items() if k != "jigcmd/error"}
    meta["jigcmd/report"] = {**meta["jigcmd/report"], "wallMs": 1}
    text = "`bun src/cli.ts` exited with code 0 (stop reason: exited; cleanup complete)."
    forged = {
        **stopped,
        "result": {
            **result, "isError": False, "_meta": meta, "extra": 1,
            "content": [{"type": "text", "text": text}, *result["content"][1:]],
        },
    }  # fmt: skip
    lines = verify_result(state, tmp_path, result, forged)
    assert [line for line in lines if line.startswith(("FAIL", "NOT"))] == [
        "FAIL isError: the result says isError false, but the call was stopped ('deadline'), "
        "an error",
        "FAIL report: the result's _meta report differs from the signed resource report in wallMs",
        "FAIL content: the text the model reads is not the words of the checked structuredContent",
        "NOT verified",
    ]
    assert (
        "skip unknown fields: not fields of jigcmd's result, so no fact of the run: $.result.extra"
    ) in lines
    said = "skip error: the result names no error code: the signed stop (DEADLINE_EXCEEDED) is "
    assert said + "unchecked" in lines
    # isError left out, which MCP reads as false, and the text made a clean exit's again.
    bare = {key: value for key, value in forged["result"].items() if key != "isError"}
    view = msgspec.convert(result["structuredContent"], View)
    bare["content"] = [{"type": "text", "text": view_text(view, "")}, *result["content"][1:]]
    bare["_meta"] = {k: v for k, v in result["_meta"].items() if k != "jigcmd/error"}
    lines = verify_result(state, tmp_path, result, {**stopped, "result": bare})
    assert [line for line in lines if line.startswith(("FAIL", "NOT"))] == [
        "FAIL isError: absent, which MCP reads as false, but the call was stopped ('deadline'), "
        "an error",
        "NOT verified",
    ]
    # Session A's statement, session B's answer to the same call: another statement named.
    lines = verify_result(state, tmp_path, ended["result"], other)
    assert lines[-1] == "NOT verified", lines
    assert (
        "FAIL attestation: the result's _meta attestation names another statement than this "
        "one: it differs in runId, operationId, digest"
    ) in lines
