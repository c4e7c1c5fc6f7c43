"""`jigcmd verify --evidence` of one MCP tool result, as a caller holding it would run it.

Shared by the tests that hold an MCP result against its signed statement: the statement is
fetched with `jigcmd attest` by the run and operation ids the result's `_meta` names.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["verify_result", "verify_run"]


def _jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def verify_result(state: Path, tmp: Path, result: dict[str, Any], evidence: object) -> list[str]:
    """`jigcmd verify`'s lines for the result's statement (from `jigcmd attest`) and `evidence`."""
    checked = verify_run(state, tmp, result, evidence)
    assert checked.returncode in (0, 1), checked.stderr
    return checked.stdout.splitlines()


def verify_run(
    state: Path, tmp: Path, result: dict[str, Any], evidence: object
) -> subprocess.CompletedProcess[str]:
    """`jigcmd verify` of `evidence` against the result's statement, whatever it answers."""
    named = result["_meta"]["jigcmd/attestation"]
    fetched = _jigcmd(
        "attest", "--run-id", named["runId"], named["operationId"],
        "--state-dir", str(state), "--out", str(tmp / "b.jsonl"),
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    (tmp / "e.json").write_text(json.dumps(evidence))
    return _jigcmd(
        "verify", str(tmp / "b.jsonl"), "--state-dir", str(state), "--evidence", str(tmp / "e.json")
    )
