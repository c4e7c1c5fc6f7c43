"""Envelope slots shared by two server processes on one state directory (`--max-envelopes 1`)."""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from jigcmd.journal.reservations import Reservations
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import alive, wait_for

pytestmark = pytest.mark.envelope


def test_a_second_server_is_refused_at_once_while_the_only_slot_is_held(rig: Rig) -> None:
    """One slot, two servers: RESOURCE_EXHAUSTED while the first runs; afterwards it works."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    first, second = rig.serve(max_envelopes=1), rig.serve(max_envelopes=1)
    first.send(flow_call("call-1", "op-holder", cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    # Answered while the holder still runs: the refusal does not wait for a slot.
    second.send(flow_call("call-2", "op-refused", cli_input(LINGER, other)))
    refused = json.loads(second.response("call-2"))["error"]
    assert alive(candidate)
    assert refused["data"]["code"] == "RESOURCE_EXHAUSTED"
    assert "all 1 envelope slots are in use" in refused["message"]
    assert rig.row("op-refused") is None

    rig.signal(candidate, signal.SIGTERM)
    assert json.loads(first.response("call-1"))["result"]["value"]["exitCode"] == 0
    second.send(flow_call("call-3", "op-after", cli_input(QUICK, other)))
    assert json.loads(second.response("call-3"))["result"]["value"]["exitCode"] == 0
    assert first.close_input() == 0
    assert second.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(other) <= 1


def test_a_killed_holders_slot_is_free_again_once_its_run_is_fenced(rig: Rig) -> None:
    """The holder is SIGKILLed mid-run: its supervisor fences and exits, and the slot is free."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    first, second = rig.serve(max_envelopes=1), rig.serve(max_envelopes=1)
    first.send(flow_call("call-1", "op-holder", cli_input(LINGER, token)))
    supervisor = rig.supervisor("op-holder")
    rig.candidate(token)
    first.kill()
    wait_for(lambda: not alive(supervisor), 30, "the holder's supervisor to exit")
    second.send(flow_call("call-2", "op-after", cli_input(QUICK, other)))
    assert json.loads(second.response("call-2"))["result"]["value"]["exitCode"] == 0
    assert second.close_input() == 0
    rig.assert_nothing_left()


def test_the_slot_is_free_when_the_answer_arrives(rig: Rig) -> None:
    """The supervisor drops the slot before it answers: no window of a finished run's slot."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(max_envelopes=1)
    slots = Reservations(rig.state_dir, 1)
    for attempt in range(5):
        server.send(flow_call(f"call-{attempt}", f"op-{attempt}", cli_input(QUICK, token)))
        assert json.loads(server.response(f"call-{attempt}"))["result"]["value"]["exitCode"] == 0
        assert slots.holder(0) is None, f"attempt {attempt}: the slot outlived the answer"
    assert server.close_input() == 0
    rig.assert_nothing_left()
