"""SIGKILL of the server at each interesting instant: nothing left, uncertain forever, never re-run.

Each test kills `jigcmd serve` at one point of a run, restarts a server on the same state
directory (recovery runs at start-up) or runs `jigcmd recover`, then proves from the host
that no process, cgroup job, namespace, scratch mount or open row is left, that the
operation id answers `UNCERTAIN`, and, with a unique token in the candidate's arguments,
how many times the candidate really ran.
"""

from __future__ import annotations

import signal
import uuid
from typing import Any

import pytest

from jigcmd.durable.recovery import UNCERTAIN_REASON
from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import LEFTOVER_WAIT_S, Rig
from tests.lifetime.watch import Proc, alive, parent, wait_for

pytestmark = pytest.mark.envelope

# The supervisor's own wording when it fenced a run whose server died.
SERVER_WENT_AWAY = "the server went away during the run; the run was fenced without a proved result"


def _failure(response: dict[str, Any]) -> tuple[str, str]:
    error = response["error"]
    assert error["code"] == -32000, response
    return error["data"]["code"], error["message"]


def _ask_again(rig: Rig, operation_id: str, input: object) -> tuple[str, str]:
    """The same operation asked of a fresh server on the same state directory."""
    server = rig.serve()
    request_id = rig.next_id("again")
    server.send(flow_call(request_id, operation_id, input))
    answer = _failure(server.answer(request_id))
    assert server.close_input() == 0
    return answer


def _start_lingering(rig: Rig, server: ServeChild, operation_id: str, token: str) -> str:
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    return request_id


def _launch_held(rig: Rig, token: str, operation_id: str) -> tuple[ServeChild, list[Proc]]:
    """A server whose launch sits in a stopped prepared supervisor; the row is written."""
    server = rig.serve()
    rig.prepared(server)
    zygote = rig.zygote(server)
    # Every prepared supervisor is stopped, so whichever the launch goes to holds it unread.
    supervisors = rig.watch.children(zygote)
    assert supervisors
    for supervisor in supervisors:
        rig.stop(supervisor)
    _start_lingering(rig, server, operation_id, token)
    # The row is written while the launch is handed over (it is staged while the journal
    # commits); the launch then waits in a stopped supervisor's socket, not yet started.
    wait_for(lambda: rig.row(operation_id) is not None, 30, "the row to be written")
    row = rig.row(operation_id)
    # From its first commit the row names the prepared envelope the launch was handed to.
    assert row is not None and row.is_open and row.supervisor is not None
    assert row.supervisor.pid in {supervisor.pid for supervisor in supervisors}
    return server, supervisors


def test_a_kill_after_the_row_and_before_the_spawn_runs_nothing_once_recovered(rig: Rig) -> None:
    """Killed with the row written, the launch not yet started: recovery closes it, nothing runs."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-before-spawn"
    server, supervisors = _launch_held(rig, token, operation_id)
    server.kill()
    # A new server recovers at start-up (its ping answer proves start-up is over) …
    again = rig.serve()
    recovered = rig.row(operation_id)
    assert recovered is not None and recovered.state == "uncertain"
    assert recovered.reason == UNCERTAIN_REASON
    # … which fences registered envelopes of dead servers too; if the held supervisor is
    # still there, resumed now it must start nothing.
    for supervisor in supervisors:
        rig.resume(supervisor)
    wait_for(lambda: not any(map(alive, supervisors)), 30, "the held supervisors to exit")
    request_id = rig.next_id("again")
    again.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    assert _failure(again.answer(request_id)) == ("UNCERTAIN", UNCERTAIN_REASON)
    assert again.close_input() == 0
    rig.assert_nothing_left()
    final = rig.row(operation_id)
    assert final is not None and final.state == "uncertain" and final.cleanup == "complete"
    # The envelope the launch was handed to is gone, and nothing of the request ever ran.
    assert final.supervisor is not None
    assert not alive(Proc(final.supervisor.pid, final.supervisor.start))
    assert rig.watch.runs(token) == 0


def test_a_launch_reaching_its_supervisor_after_the_server_died_is_never_started(
    rig: Rig,
) -> None:
    """Launch held, server killed, supervisor resumed before recovery: it starts nothing."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-late-launch"
    server, supervisors = _launch_held(rig, token, operation_id)
    server.kill()
    for supervisor in supervisors:
        rig.resume(supervisor)
    wait_for(lambda: not any(map(alive, supervisors)), 30, "the supervisors to exit")
    row = rig.row(operation_id)
    # A supervisor that said go would have closed the row itself ("the server went away").
    assert row is not None and row.is_open and row.outcome is None
    rig.recover()
    code, message = _ask_again(rig, operation_id, cli_input(LINGER, token))
    assert (code, message) == ("UNCERTAIN", UNCERTAIN_REASON)
    rig.assert_nothing_left()
    final = rig.row(operation_id)
    assert final is not None and final.state == "uncertain" and final.cleanup == "complete"
    assert rig.watch.runs(token) == 0


def test_a_kill_mid_run_fences_the_candidate_and_the_operation_stays_uncertain(rig: Rig) -> None:
    """Killed mid-run: its supervisor fences the candidate; after restart UNCERTAIN, ran once."""
    server = rig.serve()
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-mid-run"
    _start_lingering(rig, server, operation_id, token)
    candidate = rig.candidate(token)
    # The server records the serving envelope when its supervisor reports the start.
    wait_for(lambda: getattr(rig.row(operation_id), "state", None) == "running", 30, "running")
    server.kill()
    # Not signalled by anyone but its supervisor, which lost the server.
    wait_for(lambda: not alive(candidate), 30, "the candidate to be fenced")
    code, message = _ask_again(rig, operation_id, cli_input(LINGER, token))
    assert code == "UNCERTAIN"
    assert message in (SERVER_WENT_AWAY, UNCERTAIN_REASON)
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1
    final = rig.row(operation_id)
    assert final is not None and final.state == "uncertain" and final.cleanup == "complete"
    # Nobody saw its end: no statement, never an invented one.
    assert final.attestation is None


def test_a_kill_during_cleanup_leaves_nothing_and_never_reruns(rig: Rig) -> None:
    """Killed after the candidate ended but before its result was recorded: UNCERTAIN, ran once."""
    server = rig.serve()
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-cleanup"
    _start_lingering(rig, server, operation_id, token)
    candidate = rig.candidate(token)
    supervisor = rig.supervisor(operation_id)
    # With its supervisor stopped, the candidate's end cannot be reported or recorded: the
    # server dies with the run over and its cleanup and record still to come.
    rig.stop(supervisor)
    rig.signal(candidate, signal.SIGTERM)
    wait_for(lambda: not alive(candidate), 30, "the candidate to end")
    server.kill()
    rig.resume(supervisor)
    wait_for(lambda: not alive(supervisor), 30, "the supervisor to finish its cleanup")
    recovery = rig.recover()
    code, message = _ask_again(rig, operation_id, cli_input(LINGER, token))
    assert code == "UNCERTAIN", recovery
    assert message in (SERVER_WENT_AWAY, UNCERTAIN_REASON)
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1
    final = rig.row(operation_id)
    assert final is not None and final.cleanup == "complete"
    assert final.attestation is None


def test_recover_closes_a_dead_servers_running_operation_without_a_restart(rig: Rig) -> None:
    """`jigcmd recover` alone: the row is closed, the run fenced, and nothing is left."""
    server = rig.serve()
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-recover"
    _start_lingering(rig, server, operation_id, token)
    supervisor_before = rig.supervisor(operation_id)
    rig.candidate(token)
    # The supervisor is stopped too, so only recovery can fence and close this run.
    rig.stop(supervisor_before)
    server.kill()
    output = rig.recover()
    assert f"closed {operation_id}" in output and "cleanup complete" in output
    rig.resume(supervisor_before)
    row = rig.row(operation_id)
    assert row is not None and row.state == "uncertain" and row.reason == UNCERTAIN_REASON
    assert row.cleanup == "complete"
    assert _ask_again(rig, operation_id, cli_input(LINGER, token)) == (
        "UNCERTAIN",
        UNCERTAIN_REASON,
    )
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_sigkill_of_pid_1_mid_run_is_uncertain_with_no_invented_evidence(rig: Rig) -> None:
    """Nobody cancelled: the answer is UNCERTAIN without evidence, journalled and replayed so."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-init-killed"
    server = rig.serve()
    request_id = _start_lingering(rig, server, operation_id, token)
    # The candidate's parent is the envelope's pid 1.
    init = parent(rig.candidate(token))
    assert init is not None
    rig.signal(init, signal.SIGKILL)
    answer = server.answer(request_id)
    code, message = _failure(answer)
    assert code == "UNCERTAIN", answer
    assert "pid 1" in message
    assert "details" not in answer["error"]["data"]
    row = rig.row(operation_id)
    assert row is not None and row.state == "uncertain"
    assert server.close_input() == 0
    assert _ask_again(rig, operation_id, cli_input(LINGER, token))[0] == "UNCERTAIN"
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_prepared_supervisor_killed_alone_leaves_no_job_or_registry_entry(rig: Rig) -> None:
    """The zygote releases a dead prepared supervisor's envelope itself, not the next recovery."""
    server = rig.serve()
    rig.prepared(server)
    zygote = rig.zygote(server)
    registry = EnvelopeRegistry(rig.state_dir)
    entries: list[EnvelopeEntry] = []

    def registered() -> bool:
        entries[:] = registry.entries()
        return bool(entries)

    wait_for(registered, 30, "a registered prepared envelope")
    entry = entries[0]
    supervisor = next(p for p in rig.watch.children(zygote) if p.pid == entry.supervisor.pid)
    rig.signal(supervisor, signal.SIGKILL)
    wait_for(
        lambda: (
            rig.backend.open(entry.name) is None
            and entry.name not in {e.name for e in registry.entries()}
        ),
        LEFTOVER_WAIT_S,
        f"the zygote to release {entry.name}",
    )
    server.ping(rig.next_id("alive"))
    assert server.close_input() == 0
    rig.assert_nothing_left()
