"""The journal row's deadline is the signed `startedOn` plus the ceiling, to the millisecond.

docs/attestation.md, "Times": `startedOn` is "the instant its deadline runs from: the
deadline is `startedOn` plus the ceiling". The row's `deadline_unix_ms` was once read back
from the monotonic deadline when the row was begun, two roundings down later: about half the
rows came out 1 ms short. Driven as a caller does, Run/1 calls to a `jigcmd serve` child,
each statement from `jigcmd attest`; the row read from the journal, read only.
"""

from __future__ import annotations

import base64
import datetime
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.policy.planner import CEILING_SECONDS
from tests.lifetime.frames import flow_call
from tests.test_cli_run import BINDING, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# Enough calls that a deadline rounded apart from `startedOn` shows in one of them (each
# came out short about one time in two).
CALLS = 8


def _started_ms(state: Path, run_id: str, operation: str) -> int:
    fetched = subprocess.run(
        [sys.executable, "-m", "jigcmd", "attest", "--run-id", run_id, operation,
         "--state-dir", str(state)],
        capture_output=True, timeout=120, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    envelope = json.loads(fetched.stdout.splitlines()[0])
    instant = json.loads(base64.b64decode(envelope["payload"]))["predicate"]["startedOn"]
    parsed = datetime.datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return (parsed - _EPOCH) // datetime.timedelta(milliseconds=1)


def test_each_rows_deadline_is_its_statements_start_plus_the_ceiling(
    lock: Path, tmp_path: Path
) -> None:
    """Every row: `deadline_unix_ms - startedOn` is the ceiling, 10,000 ms, never 9,999."""
    state = tmp_path / "state"
    run_id = "run-deadline-start"
    args = ["--lock", str(lock), "--state-dir", str(state), "--run-id", run_id]
    call = {"command": "cli", "files": {"src/cli.ts": 'console.log("x");\n'}, "args": []}
    with ServeChild(BINDING, args, timeout=60) as server:
        for index in range(CALLS):
            server.send(flow_call(f"c-{index}", f"op-{index}", call))
            assert "result" in server.answer(f"c-{index}")
        assert server.close(60) == 0
    journal = sqlite3.connect(f"file:{state / 'journal.sqlite3'}?mode=ro", uri=True)
    try:
        rows = dict(
            journal.execute(
                "SELECT operation_id, deadline_unix_ms FROM operations WHERE root_run = ?",
                (run_id,),
            ).fetchall()
        )
    finally:
        journal.close()
    assert len(rows) == CALLS, rows
    spans = {op: rows[op] - _started_ms(state, run_id, op) for op in sorted(rows)}
    assert set(spans.values()) == {int(CEILING_SECONDS * 1000)}, spans
