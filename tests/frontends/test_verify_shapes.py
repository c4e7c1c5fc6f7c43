"""`jigcmd verify --evidence` picks the file's shape by its keys and names the wrong field.

Each shape a run's evidence is answered in, with one field wrong: the error names that
shape and the field's path in the file, not the first of several guesses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from jigcmd.attest import dsse
from jigcmd.attest.keys import open_signing_key
from tests.frontends.test_attest_cli import EVIDENCE

GOOD: dict[str, Any] = msgspec.to_builtins(EVIDENCE)
BAD_TEXT = {**GOOD, "stdout": {"text": 5, "truncated": False}}
RECORD = {
    "run_id": 1, "status": "exited", "exit_code": "0", "signal": None,
    "stdout": {"text": "", "truncated": False}, "stderr": {"text": "", "truncated": False},
}  # fmt: skip
STREAM = {"capturedBytes": 0, "sha256": "sha256:" + "0" * 64, "truncated": False, "head": "",
          "omittedBytes": 0, "tail": ""}  # fmt: skip
VIEW = {
    "command": "tests", "invocation": [], "exitCode": 0, "signal": None, "stopReason": "exited",
    "limitsHit": [], "cleanup": "complete", "candidateDigest": "sha256:" + "0" * 64,
    "stdinDigest": "sha256:" + "1" * 64, "stdout": STREAM, "stderr": {**STREAM, "head": 1},
    "tests": None, "budgetBytes": 24576,
}  # fmt: skip
ERROR = {"code": -32000, "message": "m", "data": {"code": "INVALID_INPUT"}}


def _jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        (BAD_TEXT, "not jigcmd evidence: Expected `str`, got `int` - at `$.stdout.text`"),
        (
            {"evidence": BAD_TEXT, "report": {}},
            "not jigcmd evidence: Expected `str`, got `int` - at `$.evidence.stdout.text`",
        ),
        (RECORD, "not a jarvis run record: Expected `int | null`, got `str` - at `$.exit_code`"),
        (VIEW, "not an MCP structuredContent: Expected `str`, got `int` - at `$.stderr.head`"),
        (
            {"jsonrpc": "2.0", "id": "c1", "result": {"value": BAD_TEXT}},
            "not jigcmd evidence: Expected `str`, got `int` - at `$.result.value.stdout.text`",
        ),
        (
            {"jsonrpc": "2.0", "id": 3, "result": {"structuredContent": VIEW, "content": []}},
            "not an MCP structuredContent: Expected `str`, got `int` - at "
            "`$.result.structuredContent.stderr.head`",
        ),
        (
            {"jsonrpc": "2.0", "id": "c1", "error": ERROR},
            "a JSON-RPC error answer (INVALID_INPUT) with no evidence: only DEADLINE_EXCEEDED "
            "and CANCELLED carry it, at `.error.data.details.command`",
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": "t1",
                "error": {
                    "code": -32000,
                    "message": "request cancelled; operation 'opT' continues for its other callers",
                    "data": {"code": "CANCELLED"},
                },
            },
            "a JSON-RPC error answer (CANCELLED) with no evidence: this caller's own stop (it "
            "stopped waiting while the operation went on for its other callers, or nothing "
            "ran), which carries none; where the operation ran, its own recorded answer "
            "carries the evidence (the same call again, same operationId, replays it once it "
            "has ended)",
        ),
        (
            {"error": {"code": "INVALID_INPUT", "message": "m"}},
            "a `jigcmd run --json` error answer (INVALID_INPUT) with no evidence: only a "
            "deadline's or a cancel's carries it, at `.evidence`",
        ),
        (
            {"jsonrpc": "2.0", "id": 3, "result": {"content": [], "isError": False}},
            "a JSON-RPC answer with neither `.result.value` (FLOW Run/1) nor "
            "`.result.structuredContent` (MCP tools/call from 2025-06-18; an older protocol "
            "version's result has none to check)",
        ),
    ],
)
def test_a_wrong_field_is_named_by_its_shape_and_path(
    tmp_path: Path, shape: dict[str, Any], said: str
) -> None:
    """Status 2 and one line: the file, the shape it has, what is wrong and where."""
    (tmp_path / "state").mkdir()
    key = _jigcmd("key", "--state-dir", str(tmp_path / "state"))
    (tmp_path / "host.pub").write_text(key.stdout)
    # An envelope in shape, its signature never checked: what is refused is the other file.
    (tmp_path / "bundle.jsonl").write_text(
        '{"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []}\n'
    )
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(shape))
    done = _jigcmd(
        "verify", str(tmp_path / "bundle.jsonl"), "--key", str(tmp_path / "host.pub"),
        "--evidence", str(evidence),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert done.stderr == f"jigcmd verify: {evidence}: {said}\n"
    assert done.stdout == ""


def test_a_signed_statement_with_a_duplicate_key_is_not_verified(tmp_path: Path) -> None:
    """Signed by the host key, but read one way here and another by a first-wins verifier:
    the schema check fails, naming the key, before any field of it is trusted."""
    state = tmp_path / "state"
    state.mkdir()
    key = _jigcmd("key", "--state-dir", str(state))
    (tmp_path / "host.pub").write_text(key.stdout)
    body = b'{"predicateType": "https://example.com/other", "predicateType": "run/v1"}'
    signer = open_signing_key(state)
    envelope = dsse.sign(body, signer.sign, signer.public.keyid)
    (tmp_path / "bundle.jsonl").write_bytes(dsse.encode_bundle([envelope]))
    done = _jigcmd("verify", str(tmp_path / "bundle.jsonl"), "--key", str(tmp_path / "host.pub"))
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        'FAIL schema: statement 1 is not strict JSON: duplicate key "predicateType"',
        "NOT verified",
    ]


_ATTEST = "`jigcmd attest --run-id RUN OPERATION`"


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        (
            {"jsonrpc": "2.0", "id": "c1", "result": {"value": GOOD}},
            "a FLOW Run/1 answer line, which carries no statement: fetch it with "
            f"{_ATTEST} (the run id `serve` was given, the call's operationId) and give this "
            "answer as --evidence",
        ),
        (
            {"jsonrpc": "2.0", "id": 3, "result": {"structuredContent": VIEW, "content": []}},
            "an MCP tools/call answer, which carries no statement: fetch it with "
            f'{_ATTEST} (the ids its `_meta["jigcmd/attestation"]` names) or resources/read '
            "of its `attestation` link, and give this answer as --evidence",
        ),
        (
            {"error": {"code": "UNAVAILABLE", "message": "m"}},
            "a `jigcmd run --json` answer with no `attestation` (UNAVAILABLE: nothing ran to a "
            "signed end): it carries no statement",
        ),
        (
            GOOD,
            "jigcmd evidence, which carries no statement: give it as --evidence, and as FILE "
            f"the bundle ({_ATTEST})",
        ),
        (RECORD, "a jarvis run record with no `attestation`: jarvis signed nothing for this run"),
    ],
    ids=["run1", "mcp", "run json unavailable", "evidence", "jarvis"],
)
def test_an_answer_carrying_no_statement_as_file_is_status_2_saying_what_it_is(
    tmp_path: Path, shape: dict[str, Any], said: str
) -> None:
    """Not a failed bundle check ("not a DSSE envelope"): the wrong kind of file, named, and
    where its statement is."""
    key = _jigcmd("key", "--state-dir", str(tmp_path / "state"))
    (tmp_path / "host.pub").write_text(key.stdout)
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(shape))
    done = _jigcmd("verify", str(answer), "--key", str(tmp_path / "host.pub"))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert done.stderr == f"jigcmd verify: {answer}: not a bundle: {said}\n"
