"""A different request under a used operationId: one set of words from every path.

The session that runs or answered the operation, another `serve` of the run (through the
journal) and the shared work all say `OPERATION_CONFLICT` alike, and say truthfully whether
the request holding the id is running or recorded (until round 31 the session dropped that
clause, and the journal said "recorded" of an operation still running).
"""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope


def _conflict(server: ServeChild, request_id: str, operation_id: str, input: object) -> str:
    """The message of `server`'s OPERATION_CONFLICT for `input` under `operation_id`."""
    server.send(flow_call(request_id, operation_id, input))
    error = json.loads(server.response(request_id))["error"]
    assert error["data"] == {"code": "OPERATION_CONFLICT"}, error
    return str(error["message"])


def test_every_path_words_the_conflict_alike_running_then_recorded(rig: Rig) -> None:
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-held"
    other = cli_input(QUICK, token, "other")
    here, there = rig.serve(), rig.serve()
    here.send(flow_call("call-1", operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    running = f"operationId {operation_id!r} was reused differently (a different request is "
    running += "running under it)"
    assert _conflict(here, "here-running", operation_id, other) == running
    assert _conflict(there, "there-running", operation_id, other) == running
    rig.signal(candidate, signal.SIGTERM)
    assert "result" in json.loads(here.response("call-1"))
    recorded = running.replace("is running", "was recorded")
    assert _conflict(here, "here-recorded", operation_id, other) == recorded
    assert _conflict(there, "there-recorded", operation_id, other) == recorded
    fresh = rig.serve()
    assert _conflict(fresh, "fresh-recorded", operation_id, other) == recorded
    for server in (here, there, fresh):
        assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1
