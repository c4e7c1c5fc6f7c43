"""What `jigcmd runs` and `jigcmd recover` say of a cleanup not yet proved: the operator reads
what is pending and what the pass did, never "nothing to recover" for a pass that proved a
cleanup and removed jobs (until 2026-12-07 it said exactly that)."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid

import pytest

from jigcmd.envelope import hostids
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import Proc, alive, wait_for

pytestmark = pytest.mark.envelope


def test_a_cleanup_recorded_failed_is_said_so_and_its_recheck_is_reported(rig: Rig) -> None:
    """The zygote killed mid-run, then its server: the row's cleanup is recorded failed, which
    `runs` says is checked again; `recover` proves it and says so."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-recheck"
    server = rig.serve()
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    rig.signal(rig.zygote(server), signal.SIGKILL)
    wait_for(lambda: not alive(candidate), 30, "the candidate to die with its zygote")
    assert server.answer(request_id)["error"]["data"]["code"] == "UNCERTAIN"
    # Killed before its clean exit, which would have checked the cleanup again.
    server.kill()
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.cleanup) == ("uncertain", "failed")
    listed = rig.runs()
    assert "cleanup failed (not proved; its server's clean exit or `jigcmd recover`" in listed
    output = rig.recover()
    assert (
        f"re-checked the cleanup of {operation_id} (run " in output
        and "), recorded as not confirmed: cleanup complete" in output
    ), output
    assert "nothing to recover" not in output
    final = rig.row(operation_id)
    assert final is not None and final.cleanup == "complete"
    assert "cleanup complete" in rig.runs()
    rig.assert_nothing_left()


def test_the_envelope_a_run_ran_in_is_never_said_to_have_run_nothing(rig: Rig) -> None:
    """The server and its zygote killed mid-run: the run's envelope is closed and its job
    released by `recover`, whose words for it claim nothing of what ran in it."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-ran"
    server = rig.serve()
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    zygote = rig.zygote(server)
    server.kill()
    rig.signal(zygote, signal.SIGKILL)
    wait_for(lambda: not alive(candidate), 30, "the candidate to die with its zygote")
    row = rig.row(operation_id)
    assert row is not None
    output = rig.recover()
    assert f"closed {operation_id} (run " in output, output
    about = [line for line in output.splitlines() if row.run_id in line]
    assert about and not any("ran nothing" in line for line in about), output
    rig.assert_nothing_left()


def _leases(proc: Proc) -> list[str]:
    """The host id lease files `proc` holds open (envelope/hostids.py)."""
    paths = []
    for fd in os.listdir(f"/proc/{proc.pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            target = os.readlink(f"/proc/{proc.pid}/fd/{fd}")
            if target.startswith(hostids.DIRECTORY + "/"):
                paths.append(target)
    return paths


def test_a_killed_zygotes_lease_files_go_with_its_servers_clean_exit(rig: Rig) -> None:
    """Its prepared envelopes' leases, unheld once it is killed, are removed as the server ends
    cleanly (as `recover` would), and the next `recover` has nothing of them to do."""
    server = rig.serve()
    rig.prepared(server)
    zygote = rig.zygote(server)
    leases = _leases(zygote)
    assert leases, "a prepared envelope holds a host id lease"
    rig.signal(zygote, signal.SIGKILL)
    wait_for(lambda: not alive(zygote), 30, "the zygote to die")
    assert all(os.path.exists(path) for path in leases)
    assert server.close_input() == 0
    assert not any(os.path.exists(path) for path in leases), leases
    rig.assert_nothing_left()
