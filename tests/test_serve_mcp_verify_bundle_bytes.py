"""`jigcmd verify` holds an MCP result's `_meta` digest against the bundle file's own bytes.

docs/attestation.md: `resources/read` serves "byte for byte the bundle with that digest".
A copy re-encoded (spaces after separators, CRLF line ends) has other bytes: its `attestation`
check once said `ok` all the same, while `run --json`'s said `skip` for the same copy.
Through `jigcmd serve` and the official MCP SDK, the statement from `jigcmd attest`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.mcpverify import verify_result
from tests.test_serve_mcp_verify_answer import _tests_result

pytestmark = pytest.mark.envelope


async def test_the_meta_digest_is_checked_against_the_files_bytes(tmp_path: Path) -> None:
    """The bundle as served: `ok`, naming the digest; a copy of it written with spaces or CRLF:
    `skip`, naming both digests (its signed facts still verify)."""
    state, result = await _tests_result(tmp_path)
    named = result["_meta"]["jigcmd/attestation"]
    lines = verify_result(state, tmp_path, result, result)
    served = (tmp_path / "b.jsonl").read_bytes()
    assert named["digest"] == "sha256:" + hashlib.sha256(served).hexdigest()
    said = f"run {named['runId']}, {named['operationId']}"
    assert f"ok   attestation: names this statement: {said}, digest {named['digest']}" in lines
    spaced = b"".join(json.dumps(json.loads(x)).encode() + b"\n" for x in served.splitlines())
    copies = {"spaced": spaced, "crlf": served.replace(b"\n", b"\r\n")}
    for name, data in copies.items():
        copy = tmp_path / f"{name}.jsonl"
        copy.write_bytes(data)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        checked = _verify_copy(state, tmp_path, copy)
        line = next(x for x in checked if x.split(" ", 1)[-1].startswith("attestation:"))
        assert line == (
            f"skip attestation: _meta names {said}, but its digest {named['digest']} is not "
            f"this file's bytes ({digest}): a copy re-encoded (pretty-printed, CRLF, a field "
            "added); verify the bundle as served (`resources/read`, `jigcmd attest`), byte "
            "for byte, to check it"
        ), (name, checked)


def _verify_copy(state: Path, tmp: Path, copy: Path) -> list[str]:
    from tests.test_cli_run import jigcmd_cli  # noqa: PLC0415 - the CLI helper, lazily

    done = jigcmd_cli(
        "verify", str(copy), "--state-dir", str(state), "--evidence", str(tmp / "e.json")
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.splitlines()
