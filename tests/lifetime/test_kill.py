"""SIGKILL of the server at each interesting instant: nothing left, uncertain forever, never re-run.

Each test kills `jigcmd serve` at one point of a run, restarts a server on the same state
directory (recovery runs at start-up) or runs `jigcmd recover`, then proves from the host
that no process, cgroup job, namespace, scratch mount or open row is left, that the
operation id answers `UNCERTAIN`, and, with a unique token in the candidate's arguments,
how many times the candidate really ran.
"""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import pytest

from jigcmd.durable.recovery import UNCERTAIN_REASON
from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import LEFTOVER_WAIT_S, Rig
from tests.lifetime.watch import Proc, alive, parent, wait_for

pytestmark = pytest.mark.envelope

# The supervisor's own wording when it fenced a run whose server died.
SERVER_WENT_AWAY = "the server went away during the run; the run was fenced without a proved result"


def _in_job(proc: Proc, job: str) -> bool:
    try:
        with open(f"/proc/{proc.pid}/cgroup", encoding="utf-8") as handle:
            return f"/{job}" in handle.read()
    except OSError:
        return False


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
    """A server whose launch sits unread at its stopped zygote (the supervisor of every
    envelope); the row is written."""
    server = rig.serve()
    rig.prepared(server)
    zygote = rig.zygote(server)
    # The zygote is stopped, so the launch waits in its control socket, unread.
    rig.stop(zygote)
    _start_lingering(rig, server, operation_id, token)
    # The row is written while the launch is handed over (it is staged while the journal
    # commits); the launch then waits in the stopped zygote's socket, not yet started.
    wait_for(lambda: rig.row(operation_id) is not None, 30, "the row to be written")
    row = rig.row(operation_id)
    # From its first commit the row names the prepared envelope the launch was handed to,
    # and the zygote that supervises it.
    assert row is not None and row.is_open and row.supervisor is not None
    assert row.supervisor.pid == zygote.pid
    assert row.cgroup_paths and row.run_id in row.cgroup_paths[0]
    return server, [zygote]


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
    # … which fences registered envelopes of dead servers too (it kills their zygote); if
    # the held zygote is still there, resumed now it must start nothing.
    for supervisor in supervisors:
        rig.resume(supervisor)
    wait_for(lambda: not any(map(alive, supervisors)), 30, "the held zygote to exit")
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
    """Launch held, server killed, zygote resumed before recovery: it starts nothing."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-late-launch"
    server, supervisors = _launch_held(rig, token, operation_id)
    server.kill()
    for supervisor in supervisors:
        rig.resume(supervisor)
    wait_for(lambda: not any(map(alive, supervisors)), 30, "the zygote to exit")
    row = rig.row(operation_id)
    # A zygote that said go would have closed the row itself ("the server went away").
    assert row is not None and row.is_open and row.outcome is None
    rig.recover()
    code, message = _ask_again(rig, operation_id, cli_input(LINGER, token))
    assert (code, message) == ("UNCERTAIN", UNCERTAIN_REASON)
    rig.assert_nothing_left()
    final = rig.row(operation_id)
    assert final is not None and final.state == "uncertain" and final.cleanup == "complete"
    assert rig.watch.runs(token) == 0


def test_a_kill_mid_run_fences_the_candidate_and_the_operation_stays_uncertain(rig: Rig) -> None:
    """Killed mid-run: its zygote fences the candidate, records it and exits; after restart
    UNCERTAIN, ran once."""
    server = rig.serve()
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-mid-run"
    _start_lingering(rig, server, operation_id, token)
    candidate = rig.candidate(token)
    zygote = rig.zygote(server)
    # The server records the serving envelope when the zygote reports the start.
    wait_for(lambda: getattr(rig.row(operation_id), "state", None) == "running", 30, "running")
    server.kill()
    # Not signalled by anyone but the zygote, which lost the server.
    wait_for(lambda: not alive(candidate), 30, "the candidate to be fenced")
    # Its last envelope released, the zygote exits by itself, having closed the row.
    wait_for(lambda: not alive(zygote), 30, "the zygote to exit")
    row = rig.row(operation_id)
    assert row is not None and not row.is_open and row.reason == SERVER_WENT_AWAY
    assert row.cleanup == "complete"
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
    assert supervisor == rig.zygote(server)
    # With the zygote stopped, the candidate's end cannot be reported or recorded: the
    # server dies with the run over and its cleanup and record still to come.
    rig.stop(supervisor)
    rig.signal(candidate, signal.SIGTERM)
    wait_for(lambda: not alive(candidate), 30, "the candidate to end")
    server.kill()
    rig.resume(supervisor)
    wait_for(lambda: not alive(supervisor), 30, "the zygote to finish its cleanup")
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
    # The zygote (the supervisor) is stopped too, so only recovery can fence and close this
    # run: it kills the zygote, and the envelope goes with it.
    rig.stop(supervisor_before)
    server.kill()
    # Until then `jigcmd runs` (which fences nothing) says the running row's owner is gone.
    listed = rig.runs()
    assert f"{operation_id}  running (owner gone; `jigcmd recover` fences it)" in listed
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


def test_a_prepared_pid_1_killed_alone_leaves_no_job_or_registry_entry(rig: Rig) -> None:
    """The zygote releases a prepared envelope whose pid 1 died itself, not the next recovery."""
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
    # The zygote registers (and supervises) every envelope; the envelope's pid 1 is its
    # child in that envelope's job.
    assert entry.supervisor.pid == zygote.pid
    init = next(p for p in rig.watch.children(zygote) if _in_job(p, entry.name))
    rig.signal(init, signal.SIGKILL)
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


def test_a_sigkill_of_the_zygote_mid_run_takes_its_envelopes_and_nothing_reruns(rig: Rig) -> None:
    """The zygote killed mid-run: its envelopes die with it; UNCERTAIN, cleanup proved, ran once."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-zygote-killed"
    server = rig.serve()
    rig.prepared(server)
    request_id = _start_lingering(rig, server, operation_id, token)
    candidate = rig.candidate(token)
    zygote = rig.zygote(server)
    envelopes = rig.watch.live_jobs(server.pid)
    # The running envelope and at least one prepared beside it.
    wait_for(lambda: len(rig.watch.live_jobs(server.pid)) >= 2, 30, "a prepared envelope")
    rig.signal(zygote, signal.SIGKILL)
    # Each pid 1 dies with the zygote, and its namespace with it: nobody else signals it.
    wait_for(lambda: not alive(candidate), 30, "the candidate to die with its zygote")
    answer = server.answer(request_id)
    code, _message = _failure(answer)
    assert code == "UNCERTAIN", answer
    assert "details" not in answer["error"]["data"]
    assert server.close_input() == 0
    # Whatever the dead zygote left (the jobs, the registry entries), recovery fences,
    # proves empty and removes; the operation stays uncertain and is never run again.
    rig.recover()
    final = rig.row(operation_id)
    assert final is not None and final.state == "uncertain" and final.cleanup == "complete"
    assert _ask_again(rig, operation_id, cli_input(LINGER, token))[0] == "UNCERTAIN"
    rig.assert_nothing_left()
    assert not envelopes & set(rig.backend.list_jobs())
    assert rig.watch.runs(token) == 1


def _staged_bun(rig: Rig, zygote: Proc) -> tuple[int, int]:
    """The device and inode of Bun's staged copy, as `zygote` sees it."""
    found = os.stat(f"/proc/{zygote.pid}/root{rig.state_dir}/runtime/opt/bun/bin/bun")
    return found.st_dev, found.st_ino


def test_a_sigkill_of_the_zygote_that_made_the_shared_runtime_leaves_other_sessions_running(
    rig: Rig,
) -> None:
    """Two sessions share one staged runtime, made by the first's zygote. That zygote killed
    mid-run takes its own envelopes only: the second session's running candidate ends as
    asked, its next call runs, and the first session's operation stays UNCERTAIN."""
    lender, borrower = rig.serve(), rig.serve()
    rig.prepared(lender)
    rig.prepared(borrower)
    lender_zygote, borrower_zygote = rig.zygote(lender), rig.zygote(borrower)
    assert _staged_bun(rig, lender_zygote) == _staged_bun(rig, borrower_zygote)
    theirs, ours = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    lost = _start_lingering(rig, lender, "op-lender", theirs)
    kept = _start_lingering(rig, borrower, "op-borrower", ours)
    lender_candidate, candidate = rig.candidate(theirs), rig.candidate(ours)
    rig.signal(lender_zygote, signal.SIGKILL)
    wait_for(lambda: not alive(lender_candidate), 30, "the lender's candidate to die with it")
    assert _failure(lender.answer(lost))[0] == "UNCERTAIN"
    assert alive(candidate)
    rig.signal(candidate, signal.SIGTERM)
    answer = borrower.answer(kept)
    assert answer["result"]["value"]["exitCode"] == 0, answer
    again = rig.next_id("again")
    borrower.send(flow_call(again, "op-borrower-again", cli_input(QUICK, ours, "again")))
    assert borrower.answer(again)["result"]["value"]["exitCode"] == 0
    for server in (lender, borrower):
        assert server.close_input() == 0
    rig.recover()
    rig.assert_nothing_left()
    assert rig.watch.runs(theirs) == 1
