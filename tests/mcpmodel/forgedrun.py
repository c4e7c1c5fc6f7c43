"""The `forged` test command on the example, and what its signed test result says, as the
tests of a candidate forging Bun's report drive them (Run/1 and `jigcmd attest`)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example, jigcmd_cli

__all__ = ["forged_binding", "incomplete_note", "run1_attested", "signed_test_result"]


def forged_binding(factory: pytest.TempPathFactory, name: str) -> Path:
    """The example with `forged`, one test file."""
    return admit_example(factory.mktemp(name), 'forged = { test = ["test/f.test.ts"] }\n')


def signed_test_result(bundle: str) -> dict[str, Any]:
    """The test-result predicate of a bundle (its second DSSE envelope's statement)."""
    envelope = json.loads(bundle.splitlines()[1])
    predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    return predicate


def incomplete_note(predicate: dict[str, Any]) -> str:
    """The test runner's `incomplete` annotation ("" when it has none)."""
    (report,) = [c for c in predicate["configuration"] if c["name"].startswith("test runner")]
    note: str = report["annotations"].get("incomplete", "")
    return note


def run1_attested(
    binding: Path, state: Path, source: str, run_id: str, operation_id: str
) -> tuple[dict[str, Any], Path]:
    """A Run/1 call of `forged` on `source` by a real `serve`, ended cleanly: its answer's
    value, and the bundle `jigcmd attest` wrote for it beside `state`."""
    call = {
        "jsonrpc": "2.0",
        "id": "c1",
        "method": "capability/call",
        "params": {
            "operationId": operation_id,
            "slot": "command",
            "method": "run",
            "input": {"command": "forged", "files": {"test/f.test.ts": source}},
        },
    }
    with ServeChild(binding, ["--state-dir", str(state), "--run-id", run_id]) as server:
        server.send(call)
        value: dict[str, Any] = server.answer("c1")["result"]["value"]
        assert server.close_input() == 0
    out = state.parent / "statement.jsonl"
    args = ("--run-id", run_id, operation_id, "--out", str(out), "--state-dir", str(state))
    fetched = jigcmd_cli("attest", *args)
    assert fetched.returncode == 0, fetched.stderr
    return value, out
