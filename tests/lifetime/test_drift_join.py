"""A Binding that drifts while an operation runs: the same call still joins that operation.

Under drift only what would run is refused (a new operation is `UNAVAILABLE`). The same
`operationId` with the same request joins the running operation, in the session running it
and from another `serve` of the run through the journal, as it replays once recorded: a join
runs nothing (until round 31 a join under drift was `UNAVAILABLE`, and the very same call
replayed the evidence once the operation had closed).
"""

from __future__ import annotations

import json
import shutil
import signal
import uuid
from pathlib import Path

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.store import Journal
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call, without_id
from tests.lifetime.rig import Rig
from tests.lifetime.watch import wait_for

pytestmark = pytest.mark.envelope

_DRIFT = "Binding changed since admission"


def _joins(rig: Rig, operation_id: str) -> int:
    """How many joins of the operation from other processes the journal names now."""
    with Journal.open(rig.state_dir) as journal:
        return len(journal.waiting(operation_id, root_run=rig.run_id))


def _refused_new(server: ServeChild) -> None:
    """`server` refuses a new operation for the drift (with input that would not validate:
    nothing runs either way)."""
    probe = {"command": "cli", "files": {"src/cli.ts": 7}}
    server.send(flow_call("probe", "op-new", probe))
    error = server.answer("probe")["error"]
    assert error["data"]["code"] == "UNAVAILABLE" and _DRIFT in error["message"], error


def test_the_same_call_joins_its_running_operation_after_the_binding_drifted(
    rig: Rig, tmp_path: Path
) -> None:
    own = tmp_path / "drifting"
    shutil.copytree(rig.binding.parent, own)
    rig.binding = own / rig.binding.name
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-running-under-drift"
    input = cli_input(LINGER, token)
    # Both servers first: the run has its 10 s ceiling from its start on.
    here, there = rig.serve(), rig.serve()
    here.send(flow_call("call-1", operation_id, input))
    candidate = rig.candidate(token)
    text = rig.binding.read_text()
    rig.binding.write_text(text.replace('run = "src/cli.ts"', 'run = "src/other.ts"'))
    # Each server's one line for the operator (a busy session refuses a probe call).
    wait_for(lambda: _DRIFT in here.stderr() and _DRIFT in there.stderr(), 30, "the drift seen")
    here.send(flow_call("call-2", operation_id, input))
    there.send(flow_call("call-3", operation_id, input))
    wait_for(lambda: _joins(rig, operation_id) > 0 or there.answered("call-3"), 30, "the join")
    assert _joins(rig, operation_id) == 1, there.response("call-3")
    assert not here.answered("call-2"), here.response("call-2")
    rig.signal(candidate, signal.SIGTERM)
    first = here.response("call-1")
    value = json.loads(first)["result"]["value"]
    assert (value["exitCode"], value["stdout"]["text"]) == (0, f"started {token}\nended {token}\n")
    assert without_id(here.response("call-2")) == without_id(first)
    assert without_id(there.response("call-3")) == without_id(first)
    # Drift still refuses what would run.
    _refused_new(there)
    assert here.close_input() == 0 and there.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1
