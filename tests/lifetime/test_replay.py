"""Durable operation identity across processes: exact replay, conflicts and in-flight joins.

Identity is scoped to a caller's run: the rig's servers share one run id (a coordinator
restarting its child), and a test that needs another run names it.

The candidate lingers until the test sends it SIGTERM, so any second dispatch of it would be
seen from the host (a second process with the run's token) and would not answer by itself.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call, serve_child, without_id
from tests.lifetime.rig import Rig
from tests.lifetime.watch import alive, wait_for

pytestmark = pytest.mark.envelope


def _code(line: bytes) -> str:
    code: str = json.loads(line)["error"]["data"]["code"]
    return code


def _state(rig: Rig, operation_id: str) -> str | None:
    row = rig.row(operation_id)
    return None if row is None else row.state


def _answered(
    rig: Rig, operation_id: str, input: dict[str, Any], token: str
) -> tuple[ServeChild, bytes]:
    """A server that ran `input` once (its lingering candidate let go) and its answer."""
    first = rig.serve()
    first.send(flow_call("call-1", operation_id, input))
    rig.signal(rig.candidate(token), signal.SIGTERM)
    return first, first.response("call-1")


def _replayed(
    second: ServeChild, operation_id: str, input: dict[str, Any], original: bytes
) -> None:
    """Another server answers the same operation with the very same bytes (its id aside)."""
    second.send(flow_call("call-2", operation_id, input))
    replayed = second.response("call-2")
    assert replayed == original.replace(b'"id":"call-1"', b'"id":"call-2"')
    assert second.close_input() == 0


def test_a_recorded_result_is_replayed_byte_for_byte_by_a_restarted_server(rig: Rig) -> None:
    """After a restart the same operation returns the very same bytes and runs nothing."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-replay"
    input = cli_input(LINGER, token)
    first, original = _answered(rig, operation_id, input, token)
    value = json.loads(original)["result"]["value"]
    assert value["stdout"]["text"] == f"started {token}\nended {token}\n"
    assert first.close_input() == 0

    _replayed(rig.serve(), operation_id, input, original)
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_call_refused_before_dispatch_is_not_kept_so_sent_again_it_runs_and_replays(
    rig: Rig,
) -> None:
    """Its deadline had passed: nothing ran and nothing was recorded, so the same session, sent
    it again without a deadline, runs it (not the stale refusal), and a restart replays that."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-past-deadline"
    input = cli_input(LINGER, token)
    first = rig.serve()
    first.send(flow_call("call-0", operation_id, input, deadlineUnixMs=1))
    refused = json.loads(first.response("call-0"))["error"]
    assert refused["data"] == {"code": "DEADLINE_EXCEEDED"}
    assert "nothing ran" in refused["message"]
    assert rig.row(operation_id) is None
    first.send(flow_call("call-1", operation_id, input))
    rig.signal(rig.candidate(token), signal.SIGTERM)
    original = first.response("call-1")
    assert json.loads(original)["result"]["value"]["exitCode"] == 0
    assert first.close_input() == 0

    _replayed(rig.serve(), operation_id, input, original)
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_reused_operation_id_with_another_input_conflicts_before_and_after_restart(
    rig: Rig,
) -> None:
    """Same operationId, different input: OPERATION_CONFLICT in the session and from the journal."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    operation_id = "op-conflict"
    first = rig.serve()
    first.send(flow_call("call-1", operation_id, cli_input(QUICK, token)))
    assert "result" in json.loads(first.response("call-1"))
    first.send(flow_call("call-2", operation_id, cli_input(LINGER, other)))
    assert _code(first.response("call-2")) == "OPERATION_CONFLICT"
    assert first.close_input() == 0

    second = rig.serve()
    second.send(flow_call("call-3", operation_id, cli_input(LINGER, other)))
    line = second.response("call-3")
    assert _code(line) == "OPERATION_CONFLICT"
    assert "was reused differently" in json.loads(line)["error"]["message"]
    assert second.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(other) == 0


def test_a_second_server_joins_an_operation_in_flight_and_returns_the_same_evidence(
    rig: Rig,
) -> None:
    """Two servers, one state directory: the second waits for the first's run and answers it."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-join"
    input = cli_input(LINGER, token)
    first, second = rig.serve(), rig.serve()
    first.send(flow_call("call-1", operation_id, input))
    candidate = rig.candidate(token)
    second.send(flow_call("call-2", operation_id, input))
    # The joiner cannot answer before the run it joined has ended.
    assert not second.answered("call-2")
    rig.signal(candidate, signal.SIGTERM)
    owner, joiner = first.response("call-1"), second.response("call-2")
    assert without_id(joiner) == without_id(owner)
    assert json.loads(owner)["result"]["value"]["exitCode"] == 0
    assert first.close_input() == 0
    assert second.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_server_killed_right_after_answering_replays_the_same_bytes_after_recovery(
    rig: Rig,
) -> None:
    """The answer leaves before the row's close; killed then, recovery closes it done."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-killed-after-answer"
    input = cli_input(LINGER, token)
    first, original = _answered(rig, operation_id, input, token)
    first.kill()
    assert json.loads(original)["result"]["value"]["exitCode"] == 0

    second = rig.serve()
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.cleanup) == ("done", "complete")
    # Its statement was committed with its evidence, before the answer: it is kept.
    assert row.attestation is not None
    _replayed(second, operation_id, input, original)
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_after_a_journal_conflict_the_stored_request_is_still_replayed(rig: Rig) -> None:
    """Restarted with the same run id: a conflict is answered, then the stored request replays."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    operation_id = "candidate-tests"
    stored = cli_input(QUICK, token)
    first = rig.serve()
    first.send(flow_call("call-1", operation_id, stored))
    original = first.response("call-1")
    assert first.close_input() == 0

    second = rig.serve()
    second.send(flow_call("call-2", operation_id, cli_input(QUICK, other)))
    assert _code(second.response("call-2")) == "OPERATION_CONFLICT"
    second.send(flow_call("call-3", operation_id, stored))
    assert second.response("call-3") == original.replace(b'"id":"call-1"', b'"id":"call-3"')
    assert second.close_input() == 0
    rig.assert_nothing_left()


def test_another_run_reusing_an_operation_id_runs_its_own_request(rig: Rig) -> None:
    """Run ids scope identity: a new run's `candidate-tests` runs, whatever an old run did."""
    token, other = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    operation_id = "candidate-tests"
    first = rig.serve(run_id="run-old")
    first.send(flow_call("call-1", operation_id, cli_input(QUICK, token)))
    assert json.loads(first.response("call-1"))["result"]["value"]["stdout"]["text"] == (
        f"ran {token}\n"
    )
    assert first.close_input() == 0

    # Another candidate: its own run, not OPERATION_CONFLICT.
    second = rig.serve(run_id="run-new")
    second.send(flow_call("call-2", operation_id, cli_input(QUICK, other)))
    ran = json.loads(second.response("call-2"))["result"]["value"]
    assert ran["stdout"]["text"] == f"ran {other}\n"
    assert second.close_input() == 0
    # The old candidate again, in a third run: it runs, it is not the old run's evidence.
    third = rig.serve(run_id="run-third")
    third.send(flow_call("call-3", operation_id, cli_input(QUICK, token, "again")))
    again = json.loads(third.response("call-3"))["result"]["value"]
    assert again["stdout"]["text"] == f"ran {token} again\n"
    assert third.close_input() == 0
    runs = {run for run, op in rig.rows() if op == operation_id}
    assert runs == {"run-old", "run-new", "run-third"}
    rig.assert_nothing_left()


def test_a_session_without_a_run_id_is_a_fresh_run_named_on_stderr_and_in_the_journal(
    rig: Rig,
) -> None:
    """No --run-id: a generated id, printed on stderr; the row is recorded under it."""
    token = f"tok-{uuid.uuid4().hex}"
    server = serve_child(rig.binding, rig.state_dir, rig.tmp / "fresh.stderr")
    rig.servers.append(server)
    server.send(flow_call("call-1", "candidate-tests", cli_input(QUICK, token)))
    assert "result" in json.loads(server.response("call-1"))
    assert server.close_input() == 0
    found = re.search(r"run id (run-[0-9a-f]+) \(generated", server.stderr())
    assert found is not None, server.stderr()
    row = rig.row("candidate-tests", found.group(1))
    assert row is not None and row.root_run == found.group(1) and row.state == "done"
    rig.assert_nothing_left()


@pytest.mark.parametrize("stop", ["kill", "close"])
def test_a_restarted_server_replays_recorded_operations_while_the_binding_has_drifted(
    rig: Rig, tmp_path: Path, stop: str
) -> None:
    """Recorded answers (a result; after kill -9 an UNCERTAIN) replay under drift, running
    nothing; a new operation is refused `UNAVAILABLE`; a recorded id with another request is
    `OPERATION_CONFLICT`, as without drift (not the drift's `UNAVAILABLE`)."""
    own = tmp_path / "drifting"
    shutil.copytree(rig.binding.parent, own)
    rig.binding = own / rig.binding.name
    token = f"tok-{uuid.uuid4().hex}"
    recorded, uncertain = cli_input(LINGER, token), cli_input(LINGER, token, "again")
    first, original = _answered(rig, "op-recorded", recorded, token)
    if stop == "kill":
        first.send(flow_call("call-2", "op-uncertain", uncertain))
        candidate = rig.candidate(token)
        wait_for(lambda: _state(rig, "op-uncertain") == "running", 30, "running")
        first.kill()
        wait_for(lambda: not alive(candidate), 30, "the candidate to be fenced")
    else:
        assert first.close_input() == 0
    text = rig.binding.read_text()
    rig.binding.write_text(text.replace('run = "src/cli.ts"', 'run = "src/other.ts"'))

    again = rig.serve()
    # First in this session: answered from the journal, not from the session's memory.
    again.send(flow_call("call-6", "op-recorded", cli_input(QUICK, token, "different")))
    assert _code(again.response("call-6")) == "OPERATION_CONFLICT"
    again.send(flow_call("call-3", "op-recorded", recorded))
    assert again.response("call-3") == original.replace(b'"id":"call-1"', b'"id":"call-3"')
    if stop == "kill":
        again.send(flow_call("call-4", "op-uncertain", uncertain))
        assert _code(again.response("call-4")) == "UNCERTAIN"
    again.send(flow_call("call-5", "op-new", cli_input(QUICK, token)))
    assert _code(again.response("call-5")) == "UNAVAILABLE"
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == (2 if stop == "kill" else 1)
