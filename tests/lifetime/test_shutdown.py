"""EOF and SIGTERM end the server only after every in-flight run was fenced."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.rig import Rig
from tests.lifetime.wire import ServerProcess, flow_call

pytestmark = pytest.mark.envelope


def _in_flight(rig: Rig, token: str) -> ServerProcess:
    server = rig.serve()
    server.send(flow_call("call-1", "op-in-flight", cli_input(LINGER, token)))
    rig.candidate(token)
    return server


def _assert_fenced_by_exit(rig: Rig, server: ServerProcess, token: str) -> None:
    """At the instant the server has exited, its run is already gone and its row closed."""
    assert not rig.watch.running(token), "the candidate outlived the server"
    row = rig.row("op-in-flight")
    assert row is not None and not row.is_open
    live = set(rig.backend.list_jobs())
    assert row.cgroup_job not in live, "the run's cgroup job outlived the server"
    answers = [json.loads(line) for line in server.lines]
    (answer,) = [a for a in answers if a.get("id") == "call-1"]
    assert answer["error"]["data"]["code"] == "CANCELLED"
    rig.assert_nothing_left()


def test_end_of_input_fences_the_run_in_flight_before_the_server_exits(rig: Rig) -> None:
    """stdin closed mid-run: exit 0, the candidate and its job already gone, answered CANCELLED."""
    token = f"tok-{uuid.uuid4().hex}"
    server = _in_flight(rig, token)
    assert server.close_input() == 0
    _assert_fenced_by_exit(rig, server, token)


def test_sigterm_fences_the_run_in_flight_before_the_server_exits(rig: Rig) -> None:
    """SIGTERM mid-run: exit 0, the candidate and its job already gone, answered CANCELLED."""
    token = f"tok-{uuid.uuid4().hex}"
    server = _in_flight(rig, token)
    assert server.terminate() == 0
    _assert_fenced_by_exit(rig, server, token)
