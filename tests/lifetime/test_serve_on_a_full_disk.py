"""A real `jigcmd serve` whose state directory's disk fills up: answered, nothing wedged or lost.

The state directory is a small tmpfs of the test's own (`tests.faults.disk`), filled between
calls; the real disk is never filled.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator

import pytest

from jigcmd.frontends.diagnosis.statecheck import journal_check
from jigcmd.journal.failures import LEAST_FREE_BYTES
from tests.faults.disk import SmallDisk, mounted
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call, mcp_initialized, tool_call
from tests.lifetime.rig import Rig
from tests.required import unavailable

pytestmark = pytest.mark.envelope


@pytest.fixture
def disk(rig: Rig) -> Iterator[SmallDisk]:
    """The rig's state directory on a 16 MiB tmpfs of its own."""
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs needs root")
    with mounted("16m") as small:
        if isinstance(small, str):
            unavailable(small)
        rig.state_dir = small.path
        try:
            yield small
        finally:
            small.free()
            rig.close()


def test_a_call_on_a_full_disk_fails_nothing_ran_and_the_same_operation_runs_once_space_returns(
    rig: Rig, disk: SmallDisk
) -> None:
    """Full journal: EXECUTION_FAILED with the request's id, the session goes on; then it runs."""
    server = rig.serve()
    token = f"tok-{uuid.uuid4().hex}"
    server.send(flow_call("warm", "op-warm", cli_input(QUICK, token)))
    assert "result" in server.answer("warm")

    disk.fill()
    token = f"tok-{uuid.uuid4().hex}"
    server.send(flow_call("full-1", "op-full", cli_input(QUICK, token)))
    failed = server.answer("full-1")
    assert failed["id"] == "full-1"
    assert failed["error"]["data"]["code"] == "EXECUTION_FAILED", failed
    message = failed["error"]["message"]
    assert "journal.sqlite3" in message and "full" in message and "nothing ran" in message
    server.ping("still-alive")
    assert rig.watch.runs(token) == 0

    disk.free()
    server.send(flow_call("full-2", "op-full", cli_input(QUICK, token)))
    answer = server.answer("full-2")
    assert answer["result"]["value"]["stdout"]["text"] == f"ran {token}\n", json.dumps(answer)
    assert rig.watch.runs(token) == 1
    assert server.close_input() == 0
    rig.assert_nothing_left()


def test_an_mcp_retry_of_a_call_whose_outcome_was_not_recorded_is_uncertain_again_at_once(
    rig: Rig, disk: SmallDisk
) -> None:
    """The disk fills while the candidate runs: UNCERTAIN, the row left open. The same call
    again, space back, in the same session: the same UNCERTAIN, not a join of a run that this
    server knows is running nowhere (it waited out the call's deadline)."""
    token, key = f"tok-{uuid.uuid4().hex}", "op-unrecorded"
    server = mcp_initialized(rig.serve(protocol="mcp"))
    server.send(tool_call(2, LINGER, token, key))
    candidate = rig.candidate(token)
    disk.fill()
    rig.signal(candidate, signal.SIGTERM)
    first = json.loads(server.response(2))["result"]
    assert first["isError"] is True, first
    text = first["content"][0]["text"]
    assert "UNCERTAIN" in text and "could not record its outcome" in text, text
    row = rig.row(key)
    assert row is not None and row.is_open

    disk.free()
    server.send(tool_call(3, LINGER, token, key))
    again = json.loads(server.response(3))["result"]
    assert again["isError"] is True, again
    assert again["content"][0]["text"] == text
    assert rig.watch.runs(token) == 1
    # The retry found the journal writable again: the row is closed, in the words answered,
    # for every other process too (it stayed open, "running", until `jigcmd recover`).
    _closed_as_answered(rig, key, text)
    assert server.close_input() == 0


def _closed_as_answered(rig: Rig, key: str, text: str) -> None:
    row = rig.row(key)
    assert row is not None and not row.is_open and row.state == "uncertain", row
    # An answer names the state directory by its placeholder; the row, by its path.
    assert row.reason and "could not record its outcome" in row.reason, row
    assert row.reason.split("journal.sqlite3")[-1] in text, (row.reason, text)


def test_a_row_left_uncertain_on_a_full_disk_is_closed_so_at_a_clean_exit_and_replayed_so(
    rig: Rig, disk: SmallDisk
) -> None:
    """The disk fills while the candidate runs: UNCERTAIN. Space back, the server ends cleanly:
    the row is closed uncertain (it stayed open, so a second serve's same call waited out its
    deadline, "still running elsewhere"), and that second serve replays the same UNCERTAIN."""
    token, key = f"tok-{uuid.uuid4().hex}", "op-left-open"
    server = rig.serve()
    server.send(flow_call("first", key, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    disk.fill()
    rig.signal(candidate, signal.SIGTERM)
    first = server.answer("first")
    assert first["error"]["data"]["code"] == "UNCERTAIN", first
    disk.free()
    assert server.close_input() == 0
    _closed_as_answered(rig, key, first["error"]["message"])

    again = rig.serve()
    again.send(flow_call("again", key, cli_input(LINGER, token)))
    replayed = again.answer("again")
    assert replayed["error"] == first["error"], replayed
    assert rig.watch.runs(token) == 1
    assert again.close_input() == 0


def test_below_the_least_free_space_serve_starts_replays_and_refuses_each_new_call(
    rig: Rig, disk: SmallDisk
) -> None:
    """A Flow runtime re-spawning a lost child on a nearly full disk: the new serve starts and
    replays the recorded answer (it refused to start); a new call is EXECUTION_FAILED, nothing
    ran, in the words of doctor's warning; once space is back it runs."""
    token = f"tok-{uuid.uuid4().hex}"
    first = rig.serve()
    first.send(flow_call("ran", "op-ran", cli_input(QUICK, token)))
    recorded = first.answer("ran")
    assert first.close_input() == 0

    disk.leave(LEAST_FREE_BYTES // 2)
    check = journal_check(disk.path)
    assert check.status == "warn" and check.hint is not None, check
    again = rig.serve()
    again.send(flow_call("replayed", "op-ran", cli_input(QUICK, token)))
    assert again.answer("replayed")["result"] == recorded["result"]
    fresh = f"tok-{uuid.uuid4().hex}"
    again.send(flow_call("new", "op-new", cli_input(QUICK, fresh)))
    refused = again.answer("new")
    assert refused["error"]["data"]["code"] == "EXECUTION_FAILED", refused
    message = refused["error"]["message"]
    assert "nothing ran" in message and check.hint in message, message
    # The paths are the state directory's placeholder in an answer; the rest is doctor's.
    cause = check.detail.split(" is full ")[1].split(";")[0]
    assert f" is full {cause}; nothing ran" in message and cause in check.detail, message
    assert rig.watch.runs(token) == 1 and rig.watch.runs(fresh) == 0

    disk.free()
    again.send(flow_call("new-2", "op-new", cli_input(QUICK, fresh)))
    assert again.answer("new-2")["result"]["value"]["stdout"]["text"] == f"ran {fresh}\n"
    assert again.close_input() == 0
