"""The official MCP SDK's tool result names its run's signed statement.

`_meta["jigcmd/attestation"]` carries the bundle's digest and the caller's run and operation
id, a `resource_link` names it and `resources/read` serves it; `jigcmd attest` fetches
exactly the bytes with that digest, and they verify.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import ResourceLink, TextResourceContents

from tests.admitted_example import EXAMPLE, admit_example

pytestmark = pytest.mark.envelope

PASSING = EXAMPLE / "candidates" / "passing"


def _jigcmd(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


async def test_an_mcp_result_names_its_statement_and_attest_fetches_it(tmp_path: Path) -> None:
    """A completed tools/call: the digest in `_meta` is the SHA-256 of what attest prints."""
    binding = admit_example(tmp_path)
    state = tmp_path / "state"
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(binding),
            "--state-dir",
            str(state),
            "--run-id",
            "run-mcp-attest",
        ],
    )
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            ran = await client.call_tool("tests", {"files": files})
            refused = await client.call_tool("tests", {"files": {"../x.ts": "x"}})
            (link,) = [
                block
                for block in ran.content
                if isinstance(block, ResourceLink) and block.name == "attestation"
            ]
            served = await client.read_resource(link.uri)
    assert ran.is_error is False
    assert ran.meta is not None
    named = ran.meta["jigcmd/attestation"]
    assert named["runId"] == "run-mcp-attest"
    fetched = _jigcmd(
        "attest", "--run-id", named["runId"], named["operationId"], "--state-dir", str(state)
    )
    assert fetched.returncode == 0, fetched.stderr
    assert named["digest"] == "sha256:" + hashlib.sha256(fetched.stdout).hexdigest()
    # resources/read serves the very same bytes the result's link names.
    (contents,) = served.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.text.encode() == fetched.stdout
    assert link.mime_type == "application/jsonl"
    (tmp_path / "s.jsonl").write_bytes(fetched.stdout)
    checked = _jigcmd("verify", str(tmp_path / "s.jsonl"), "--state-dir", str(state))
    assert checked.returncode == 0, checked.stdout
    # Nothing ran for a refused call: no statement is named.
    assert refused.is_error is True
    assert "jigcmd/attestation" not in (refused.meta or {})
