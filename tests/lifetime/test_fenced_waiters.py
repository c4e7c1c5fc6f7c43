"""A lost coordinator with several waiters on one operation: every waiter is told how it ended.

SIGTERM, SIGINT or SIGHUP of `serve` cancels every waiter at once and stops the work (it
cannot outlive its process). None of them may be told the work goes on for its other callers
(until round 31 the first one was): each is answered with the `CANCELLED` the journal records,
its evidence included, and a new server of the same run replays those very bytes.
"""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call, without_id
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_every_waiter_of_a_fenced_operation_gets_its_recorded_cancelled(
    rig: Rig, signum: signal.Signals
) -> None:
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-fenced-with-two-waiters"
    input = cli_input(LINGER, token)
    server = rig.serve()
    server.send(flow_call("call-1", operation_id, input))
    rig.candidate(token)
    server.send(flow_call("call-2", operation_id, input))
    # Frames are read in order: once the ping is answered, call-2 waits on the operation too.
    server.ping("after-the-join")
    server.process.send_signal(signum)
    assert server.wait_exit(server.timeout) == 0
    assert not rig.watch.running(token), "the candidate outlived the server"
    answers = {request_id: server.response(request_id) for request_id in ("call-1", "call-2")}
    for request_id in ("call-1", "call-2"):
        error = json.loads(answers[request_id])["error"]
        assert "continues" not in error["message"], error["message"]
        assert error["data"]["code"] == "CANCELLED"
        evidence = error["data"]["details"]["command"]
        assert (evidence["stopReason"], evidence["cleanup"]) == ("cancelled", "complete")
    first, second = without_id(answers["call-1"]), without_id(answers["call-2"])
    assert first == second, "the two waiters were told different ends of one operation"
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.outcome) == ("done", "failure")
    # The operation's recorded answer is the one both waiters got.
    again = rig.serve()
    again.send(flow_call("call-3", operation_id, input))
    assert without_id(again.response("call-3")) == first
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1
